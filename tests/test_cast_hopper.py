"""The Hopper (Gluon) casts without a GPU: which casts have one, how the launcher chooses, and that each
compiles for sm_90 (Triton's compiler and ptxas run here; nothing launches) with no spills and its data bytes
leaving in wide stores (MXFP4: 16 bytes; MXFP8: 8). The MXFP4 encoders' PTX runs in
tests/test_encoders_exhaustive.py's model; results are tested on the H200 (tests/test_gpu.py), against the
Triton kernel and the reference."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from quantlay import generated
from quantlay.errors import LaunchError
from quantlay.generated import find

from conftest import DEVICE

FLAGS = ("shuffle_rowwise_data", "shuffle_columnwise_data", "with_gemm_swizzled_scales")


def test_hopper_kernels_exist_for_the_transposing_mx_casts_only():
    """Both MXFP4 cast-transposes (every flag setting) and the MXFP8 cast whose colwise codes are transposed;
    not the MXFP8 casts that store both directions untransposed (the Triton kernel moves no tile there)."""
    from quantlay.lower import lower
    from quantlay.spec import shipped_kernels
    casts = [(k, dict(o)) for k, o in generated.VARIANTS if not k.startswith("fp8_gemm")]
    have = [(k, o) for k, o in casts if "gluon" in find(k, **o).BACKENDS]
    assert len(have) == 18 and {k for k, _ in have} == {"mxfp4_cast_transpose_hw", "mxfp4_cast_transpose_te",
                                                        "mxfp8_floor_transposed"}
    families = {k: lower(shipped_kernels()[k].variant(**o))["hopper"] for k, o in have}
    assert families == {"mxfp4_cast_transpose_hw": "mxfp4", "mxfp4_cast_transpose_te": "mxfp4",
                        "mxfp8_floor_transposed": "mxfp8"}
    for k, o in have:
        warps, n_first, group, tiles, staged = find(k, **o).HOPPER_CONFIG
        # the scale pass exactly where a scale layout is plain (not swizzled)
        assert staged == (not o["with_gemm_swizzled_scales"]), (k, o)
        assert tiles == 1 and (n_first, group) == (True, 0), (k, o)


def test_colwise_lane_pairs_follow_where_a_16_byte_run_continues():
    """The lowering derives from each layout where the 16 bytes after a thread's run lie: along the row (the
    plain transpose: the Hopper kernel's lane pairs hold a column's next two blocks, so a store writes whole
    sectors), in the next row (preshuffle16x16: the unpaired form), or neither (6-bit codes)."""
    from quantlay.lower import lower
    from quantlay.spec import shipped_kernels
    kernels = shipped_kernels()
    for name in ("mxfp4_cast_transpose_hw", "mxfp4_cast_transpose_te"):
        for variant in kernels[name].variants():
            opts = dict(variant.options)
            nxt = {o["key"]: o["sector_next"] for o in lower(variant)["outputs"] if o["role"] == "data"}
            assert nxt == {"rowwise_data": "rows" if opts["shuffle_rowwise_data"] else "cols",
                           "colwise_data": "rows" if opts["shuffle_columnwise_data"] else "cols"}, opts
            source = Path(find(name, **opts).__file__).read_text()
            paired = "gl.BlockedLayout([16, 1], [2, 16], [W // 2, 2], [0, 1])" in source
            assert paired == (not opts["shuffle_columnwise_data"]), opts
    assert {o["sector_next"] for o in lower(kernels["mxfp6_e2m3"].variants()[0])["outputs"]} == {None}


def test_backend_choice_and_errors():
    mod = find("mxfp4_cast_transpose_te", **dict.fromkeys(FLAGS, True))
    x = torch.randn(256, 256, dtype=torch.bfloat16, device=DEVICE)
    with pytest.raises(LaunchError, match="backend 'cuda' is not one of gluon, triton"):
        mod.quantize(x, backend="cuda")
    if DEVICE == "cpu":
        with pytest.raises(LaunchError, match="Hopper kernel cannot run this call: it runs compiled on sm_90"):
            mod.quantize(x, backend="gluon")
    a, b = mod.quantize(x), mod.quantize(x, backend="triton")
    assert all(torch.equal(a[k].tensor, b[k].tensor) for k in mod.LAYOUTS)
    with pytest.raises(LaunchError, match="backend 'gluon' is not one of triton"):
        find("mxfp8_nvte").quantize(x, backend="gluon")


# A user's spec the MXFP8 family takes: E5M2 codes, both directions' scales plain, the colwise data transposed
E5M2_TRANSPOSED_SPEC = """
kernel e5m2_transposed(x: bf16[M, N]) {
    rowwise blocks 1x32 profile mxfp8_nvte_e5m2 {
        store data  as row_major
        store scale as row_major
    }
    colwise blocks 32x1 profile mxfp8_nvte_e5m2 {
        store data  as transpose
        store scale as transpose
    }
}
"""


def test_a_user_spec_of_the_mxfp8_family_gets_the_hopper_kernel():
    import quantlay
    mod = quantlay.build(E5M2_TRANSPOSED_SPEC)
    assert mod.BACKENDS == ("gluon", "triton") and mod.HOPPER_CONFIG == (2, True, 0, 1, True)
    assert "_codes_colwise(q, True)" in Path(mod.__file__).read_text()


def test_hopper_casts_compile_for_sm90_without_spills(tmp_path):
    """In a fresh process without the interpreter (the compile needs Triton's real front end)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = Path(__file__).parent / "hopper_compile.py"
    spec = tmp_path / "e5m2_transposed.ql"
    spec.write_text(E5M2_TRANSPOSED_SPEC)
    forms = ["mxfp4_cast_transpose_hw:1:2:1:0", "mxfp4_cast_transpose_hw:0:2:1:1", "mxfp4_cast_transpose_te:1:2:1:1",
             "mxfp4_cast_transpose_te:0:4:2:0", "mxfp4_cast_transpose_hw:1:1:2:0", "mxfp8_floor_transposed:0:2:1:1",
             "mxfp8_floor_transposed:1:4:1:0", "mxfp8_floor_transposed:0:2:2:0", f"{spec}:0:2:1:1"]
    out = subprocess.run([sys.executable, str(script), "--casts", *forms], env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    for form, r in json.loads(out.stdout.splitlines()[-1]).items():
        *_, tiles, staged = form.split(":")  # NAME:FLAGS:WARPS:TILES:STAGED
        tiles, staged = int(tiles), staged == "1"
        assert r["local"] == 0 and r["stack"] == 0, (form, r)
        if form.startswith(("mxfp8", str(spec))):
            # a thread's 8 rows of 8 codes, then its 8 columns' transposed codes, as 8-byte stores; its few
            # scale bytes (a block's byte once: the blocks spread one a lane), staged ones marked evict_last
            data = {op: n for op, n in r["stores"].items() if op == "STG.E.64"}
            scales = {op: n for op, n in r["stores"].items() if op != "STG.E.64"}
            assert data == {"STG.E.64": 16 * tiles} and sum(scales.values()) <= 3 * tiles, (form, r)
            assert all(".EL." in op for op in scales) == staged, (form, r)
            # the H200 timings (docs/performance.md): 12.3-12.8 lane-instructions an element, where the Triton
            # kernel's transposition through shared memory takes 12.9 and 32 shared-memory instructions a thread
            assert r["lane_instructions_per_element"] < 13.5, (form, r)
            continue
        # a thread's 64 data bytes a tile as four 16-byte stores; its four scale bytes one by one, staged ones
        # marked evict_last (the scale pass reads them from L2)
        assert r["stores"] == {"STG.E.128": 4 * tiles, "STG.E.EL.U8" if staged else "STG.E.U8": 4 * tiles}, (form, r)
        # the kernel is bound by its ALU pipe (ncu on the H200): its encoders take |x| and floor the rounding magic
        # on the FMA pipe, so that 9.0 (_hw) and 10.0 (_te, the tie bit) of its 18.4-20.6 lane-instructions an
        # element run on the ALU pipe, where they ran 10.8 of 19.4 before (the Triton kernel: 22.6 in all)
        assert r["alu_per_element"] < 10.25 and r["lane_instructions_per_element"] < 21, (form, r)


def test_the_gpu_suites_planted_bugs_find_their_target_text():
    """Each bug the GPU suite plants in a Hopper cast edits text its generated module has: a template change
    that moves such text fails here, before a GPU run would report a planted-bug test as broken."""
    from test_gemm import edited
    from test_gpu import HOPPER_BUGS, PDL_MUTATIONS
    for name, opts, edits in HOPPER_BUGS.values():
        edited(name, edits, **opts)
    for name, opts, edits in PDL_MUTATIONS.values():
        edited(name, edits, **opts)
