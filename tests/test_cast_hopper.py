"""The Hopper (Gluon) casts without a GPU: which casts have one, how the launcher chooses, and that each
compiles for sm_90 (Triton's compiler and ptxas run here; nothing launches) with no spills and its data bytes
leaving in wide stores (MXFP4: 16 bytes; MXFP8 and the fused 1x128 casts: 8). The MXFP4 encoders' PTX runs in
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


def test_hopper_kernels_exist_for_the_transposing_mx_casts_and_the_fused_1x128_casts():
    """Both MXFP4 cast-transposes (every flag setting) and the one in 32x32 blocks, the MXFP8 cast whose colwise
    codes are transposed and the fused 1x128 casts (colwise codes transposed or not, the segmented fused cast);
    not the MXFP8 casts that store both directions untransposed (the Triton kernel moves no tile there), nor
    one-direction casts."""
    from quantlay.lower import lower
    from quantlay.spec import shipped_kernels
    casts = [(k, dict(o)) for k, o in generated.VARIANTS if not k.startswith("fp8_gemm")]
    have = [(k, o) for k, o in casts if "gluon" in find(k, **o).BACKENDS]
    assert len(have) == 23 and ("fp8_segment_m", {"fused_rowwise": True}) in have
    families = {k: lower(shipped_kernels()[k].variant(**o))["hopper"] for k, o in have}
    assert families == {"mxfp4_cast_transpose_hw": "mxfp4", "mxfp4_cast_transpose_te": "mxfp4",
                        "mxfp4_32x32_hw": "mxfp4", "mxfp8_floor_transposed": "mxfp8", "fp8_1x128_rocm_te": "fp8_1x128",
                        "fp8_1x128_nvte": "fp8_1x128", "fp8_segment_m": "fp8_1x128"}
    for k, o in have:
        mod = find(k, **o)
        assert mod.HOPPER_FAMILY == families[k]
        warps, n_first, group, tiles, staged, cap = mod.HOPPER_CONFIG
        assert tiles == 1 and (n_first, group) == (True, 0), (k, o)
        if families[k] == "fp8_1x128":  # fp32 scales, 4 bytes a row of a tile, stored directly; capped at 80
            # registers (three programs an SM) where the kernel fits them with no spill: colwise codes transposed
            assert (warps, staged) == (8, False), (k, o)
            assert cap == (80 if o.get("gemm_ready") else 0), (k, o)
            continue
        assert cap == 0, (k, o)
        # the scale pass exactly where a scale layout is plain (not swizzled; the 32x32 cast's are plain)
        assert staged == (not o.get("with_gemm_swizzled_scales", False)), (k, o)


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


# A user's spec the fused 1x128 family takes: other scale rules than the shipped casts' (DeepGEMM's sf = amax / 448,
# rounded up to a power of two rowwise), the colwise data transposed. Scales stored as UE8M0 exponent bytes are
# left to the Triton kernel (the family stores fp32 scales)
FUSED_1X128_SPECS = {
    "fp8_1x128_deepgemm_rules": """
kernel deepgemm_both(x: bf16[M, N]) {
    rowwise blocks 1x128 profile fp8_block_deepgemm_ue8m0 {
        store data  as row_major
        store scale as row_major
    }
    colwise blocks 128x1 profile fp8_block_deepgemm {
        store data  as transpose
        store scale as transpose
    }
}
""",
}
EXPONENT_BYTES_SPEC = """
kernel ue8m0_bytes_both(x: bf16[M, N]) {
    rowwise blocks 1x128 profile fp8_block_deepgemm_ue8m0_bytes {
        store data  as row_major
        store scale as row_major
    }
    colwise blocks 128x1 profile fp8_block_deepgemm_ue8m0_bytes {
        store data  as row_major
        store scale as row_major
    }
}
"""


def test_a_user_spec_of_the_mxfp8_family_gets_the_hopper_kernel():
    import quantlay
    mod = quantlay.build(E5M2_TRANSPOSED_SPEC)
    assert mod.BACKENDS == ("gluon", "triton") and mod.HOPPER_CONFIG == (2, True, 0, 1, True, 0)
    assert "_codes_colwise(q, True)" in Path(mod.__file__).read_text()


def test_mxfp4_in_32x32_blocks_gets_the_hopper_kernel_in_the_layouts_its_gpu_tests_ran():
    """A spec like `mxfp4_32x32_hw` (plain layouts, the colwise outputs transposed) takes the MXFP4 family's
    kernel, four warps with the scale pass; with its codes preshuffled or its scales swizzled it stays on the
    Triton kernel (no GPU test ran those forms in 32x32 blocks)."""
    import quantlay
    from quantlay.spec import SPECS_DIR
    text = (SPECS_DIR / "mxfp4_2d.ql").read_text()
    text = text.replace("kernel mxfp4_32x32_hw(", "kernel mine(")
    mod = quantlay.build(text)
    assert mod.BACKENDS == ("gluon", "triton") and mod.HOPPER_FAMILY == "mxfp4"
    assert mod.HOPPER_CONFIG == (4, True, 0, 1, True, 0)
    for old, new in (("store data  as packed(low: even)\n", "store data  as packed(low: even) | preshuffle16x16\n"),
                     ("store scale as transpose\n", "store scale as transpose | e8m0_shuffle\n")):
        assert old in text
        assert quantlay.build(text.replace(old, new)).BACKENDS == ("triton",)


def test_users_specs_of_the_fused_1x128_family_get_the_hopper_kernel():
    import quantlay
    for text in FUSED_1X128_SPECS.values():
        mod = quantlay.build(text)
        assert mod.BACKENDS == ("gluon", "triton") and mod.HOPPER_FAMILY == "fp8_1x128"
        assert mod.HOPPER_CONFIG == (8, True, 0, 1, False, 80)  # colwise codes transposed: the register cap
    # not a one-direction cast, nor scales stored as exponent bytes
    one = FUSED_1X128_SPECS["fp8_1x128_deepgemm_rules"].split("    colwise")[0] + "}\n"
    assert quantlay.build(one).BACKENDS == ("triton",)
    assert quantlay.build(EXPONENT_BYTES_SPEC).BACKENDS == ("triton",)


def test_hopper_casts_compile_for_sm90_without_spills(tmp_path):
    """In a fresh process without the interpreter (the compile needs Triton's real front end)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = Path(__file__).parent / "hopper_compile.py"
    spec = tmp_path / "e5m2_transposed.ql"
    spec.write_text(E5M2_TRANSPOSED_SPEC)
    users = []
    for name, text in FUSED_1X128_SPECS.items():
        (tmp_path / f"{name}.ql").write_text(text)
        users.append(f"{tmp_path / name}.ql:0:8:1:0")
    forms = ["mxfp4_cast_transpose_hw:1:2:1:0", "mxfp4_cast_transpose_hw:0:2:1:1", "mxfp4_cast_transpose_te:1:2:1:1",
             "mxfp4_cast_transpose_te:0:4:2:0", "mxfp4_cast_transpose_hw:1:1:2:0", "mxfp8_floor_transposed:0:2:1:1",
             "mxfp8_floor_transposed:1:4:1:0", "mxfp8_floor_transposed:0:2:2:0", f"{spec}:0:2:1:1",
             "fp8_1x128_rocm_te:0:8:1:0", "fp8_1x128_nvte:0:8:1:0", "fp8_1x128_nvte:1:8:1:0", "fp8_1x128_nvte:1:4:2:1",
             "fp8_1x128_rocm_te:0:16:1:1", "fp8_segment_m:1:8:1:0", "fp8_segment_m:1:8:1:0:map",
             "fp8_segment_m:1:8:2:0:map", "mxfp4_32x32_hw:0:4:1:1", "mxfp4_32x32_hw:0:2:1:0",
             "mxfp4_32x32_hw:0:4:2:1", *users]
    out = subprocess.run([sys.executable, str(script), "--casts", *forms], env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    for form, r in json.loads(out.stdout.splitlines()[-1]).items():
        name, _, warps, tiles, staged, *row_map = form.split(":")  # NAME:FLAGS:WARPS:TILES:STAGED[:map]
        tiles, staged = int(tiles), staged == "1"
        # a segmented cast: a block past the last group stores its zero codes (a thread's share of 128 x 128 bytes)
        # and zero scales (16 bytes a thread) in 16-byte stores; scanning its 8 groups' lengths, program (0, 0)
        # also stores both offset buffers (2 x 9 int64) and the flag, once
        extras = {"wide": 0, "narrow": 0}
        if name == "fp8_segment_m":
            extras["wide"] = (128 * 128 // (32 * int(warps)) + 16) * tiles
            if not row_map:
                extras = {"wide": extras["wide"] + 2 * 9 * 8, "narrow": 1}
        assert r["local"] == 0 and r["stack"] == 0, (form, r)
        assert r["reg"] <= (r["maxnreg"] or 255), (form, r)
        if "fp8_1x128" in form or name == "fp8_segment_m":
            # a thread's codes of a row (8) or of a column (8, or 16 rows on four warps) as 8- or 16-byte stores:
            # the 2 (64 // warps) 8 bytes of its rows of 8 columns in both directions; each scale stored once
            # a tile (a layout wider than the values stores them again): its row block's fp32 value, its word
            # column's two blocks' as 8 bytes; staged ones marked evict_last
            warps = int(warps)
            wide = sum(n * (16 if op.endswith("128") else 8) for op, n in r["stores"].items()
                       if op.endswith((".64", ".128"))) - extras["wide"]
            narrow = {op: n for op, n in r["stores"].items() if not op.endswith((".64", ".128"))}
            narrow[min(narrow)] -= extras["narrow"]
            if ".ql" in form:  # a user's spec with transposed colwise scales (a word column's two blocks in two
                # rows of the scales: two 4-byte stores)
                assert wide == 2 * (64 // warps) * 8 * tiles and sum(narrow.values()) == 3 * tiles, (form, r)
            else:
                assert wide == (2 * (64 // warps) + 1) * 8 * tiles and sum(narrow.values()) == tiles, (form, r)
                assert not any("U8" in op or "U16" in op for op in r["stores"]), (form, r)
            assert all(".EL" in op for op in narrow) == staged, (form, r)
            # the H200 timings (docs/performance.md): eight warps at 12.9-15.3 lane-instructions an element
            # (the Triton kernel: 10.5), two barriers a tile where the compiler's conversions take 15 (the
            # segmented cast's scan of 8 groups, and program (0, 0)'s extras, add 4.3)
            bound = (16 if warps == 8 else 19.5) + (4.5 if extras["narrow"] else 0)
            assert r["lane_instructions_per_element"] < bound, (form, r)
            continue
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
        # a thread's 64 data bytes a tile as four 16-byte stores; its four scale bytes one by one (in 32x32 blocks
        # two: a square block's byte in each direction), staged ones marked evict_last (the scale pass reads them
        # from L2)
        scales = (2 if name == "mxfp4_32x32_hw" else 4) * tiles
        assert r["stores"] == {"STG.E.128": 4 * tiles, "STG.E.EL.U8" if staged else "STG.E.U8": scales}, (form, r)
        # the kernel is bound by its ALU pipe (ncu on the H200): its encoders take |x| and floor the rounding magic
        # on the FMA pipe, so that 9.0 (_hw) and 10.0 (_te, the tie bit) of its 18.4-20.6 lane-instructions an
        # element run on the ALU pipe, where they ran 10.8 of 19.4 before (the Triton kernel: 22.6 in all)
        assert r["alu_per_element"] < 10.25 and r["lane_instructions_per_element"] < 21, (form, r)


def test_the_gpu_suites_planted_bugs_find_their_target_text():
    """Each bug the GPU suite plants in a Hopper cast edits text its generated module has: a template change
    that moves such text fails here, before a GPU run would report a planted-bug test as broken."""
    from test_gemm import edited
    from test_gpu import HOPPER_BUGS, PDL_MUTATIONS, SEGMENT_MUTATIONS
    for name, opts, edits in HOPPER_BUGS.values():
        edited(name, edits, **opts)
    for edits in SEGMENT_MUTATIONS.values():
        edited("fp8_segment_m", edits, fused_rowwise=True)
    for name, opts, edits in PDL_MUTATIONS.values():
        edited(name, edits, **opts)
