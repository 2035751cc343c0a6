"""The same bit-exact checks on the GPU at realistic sizes (skipped without CUDA)."""
import functools
import itertools

import pytest
import torch
import triton
import triton.language as tl

from quantlay import generated, inputs, reference, runtime
from quantlay.generated import find
from quantlay.spec import shipped_kernels

pytestmark = pytest.mark.gpu

KERNELS = ["mxfp4_cast_transpose_hw", "mxfp4_cast_transpose_te"]
FLAGS = ["shuffle_rowwise_data", "shuffle_columnwise_data", "with_gemm_swizzled_scales"]
COMBOS = [dict(zip(FLAGS, bits)) for bits in itertools.product([False, True], repeat=3)]


def exact(res, ref):
    return {k: torch.equal(res[k].tensor, ref[k]) for k in ref}


@pytest.mark.parametrize("shape", [(4096, 6144), (8192, 8192)])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("opts", COMBOS, ids=lambda o: "".join(str(int(v)) for v in o.values()))
def test_bit_exact_at_realistic_sizes(mxfp4_kernels, kernel, opts, shape):
    variant = mxfp4_kernels[kernel].variant(**opts)
    mod = find(kernel, **opts)
    for cname, make in inputs.CLASSES.items():
        x = make(*shape, seed=sum(shape)).cuda()
        res = mod.quantize(x)
        ok = exact(res, reference.quantize(variant, x))
        assert all(ok.values()), (cname, ok)


@pytest.mark.parametrize("opts", COMBOS, ids=lambda o: "".join(str(int(v)) for v in o.values()))
def test_poisoned_ragged_shapes(mxfp4_kernels, opts):
    variant = mxfp4_kernels["mxfp4_cast_transpose_hw"].variant(**opts)
    mod = find("mxfp4_cast_transpose_hw", **opts)
    # not multiples of the tile; multiples of what each enabled preshuffle needs (M % 64 / N % 16 ...)
    M = 704 if opts["shuffle_columnwise_data"] else (1008 if opts["shuffle_rowwise_data"] else 1000)
    N = 1344 if opts["shuffle_rowwise_data"] else (1232 if opts["shuffle_columnwise_data"] else 1234)
    for poison in (0x00, 0xAB):
        x = inputs.specials(M, N, seed=5).cuda()
        shapes = mod._shapes(M, N)
        out = {k: torch.full(s[2], poison, dtype=torch.uint8, device="cuda") for k, s in shapes.items()}
        res = mod.quantize(x, out=out)
        assert all(exact(res, reference.quantize(variant, x)).values())
        for d in ("rowwise", "colwise"):
            ref = reference.quantize(variant, x)
            assert reference.same_values(mod.dequantize(res, d), reference.dequantize(variant, d, ref, M, N))


@pytest.mark.big_memory
@pytest.mark.parametrize("M", [65600, 65792], ids=["triton", "hopper"])
def test_more_than_2_31_elements(mxfp4_kernels, M):
    """One input of more than 2^31 elements: the kernel must switch to 64-bit offsets (65600 rows pad the
    swizzled scales, so the Triton kernel runs; 65792 are whole tiles: on sm_90 the Hopper kernel)."""
    opts = dict.fromkeys(FLAGS, True)
    variant = mxfp4_kernels["mxfp4_cast_transpose_hw"].variant(**opts)
    mod = find("mxfp4_cast_transpose_hw", **opts)
    N = 32768
    assert M * N > 2 ** 31
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16, generator=g)
    res = mod.quantize(x)
    logical = {k: reference.logical_view(variant.output(k), res[k].tensor, M, N) for k in res}
    del res
    for r0 in (0, 32768, M - 2048):  # first, middle and last rows (the last lie past 2^31 elements)
        chunk = x[r0:r0 + 2048]
        ref = reference.quantize(variant.kernel.variant(), chunk)  # plain layouts: logical == physical
        assert torch.equal(logical["rowwise_data"][r0:r0 + 2048], reference.unpack(ref["rowwise_data"], 1, "even"))
        assert torch.equal(logical["rowwise_scale"][r0:r0 + 2048], ref["rowwise_scale"])
        assert torch.equal(logical["colwise_data"][r0:r0 + 2048], reference.unpack(ref["colwise_data"].t(), 0, "even"))
        assert torch.equal(logical["colwise_scale"][r0 // 32:(r0 + 2048) // 32], ref["colwise_scale"].t())


# ---- the Hopper (Gluon) kernels: against the Triton kernel and the reference ------------------------------
sm90 = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                          reason="the Hopper kernel runs on sm_90 only")
# every module with a Hopper kernel: both MXFP4 cast-transposes in every flag setting and the one in 32x32 blocks,
# the transposing MXFP8 cast, the fused 1x128 casts (the segmented one, which takes group lengths, has tests of
# its own below)
HOPPER_MODULES = [(k, dict(o)) for k, o in generated.VARIANTS if not k.startswith("fp8_gemm")
                  and "gluon" in find(k, **dict(o)).BACKENDS and not shipped_kernels()[k].groups]
# (num_warps, grid_n_first, grid_group, column tiles a program, scale pass): forms the launcher takes beside
# each module's default (HOPPER_CONFIG, with the scale pass and without), by family (its tiles: 32 num_warps x 64,
# or 128x128 on 4, 8 or 16 warps)
MX_FORMS = [(1, False, 4, 1, False), (1, False, 4, 1, True), (4, False, 4, 1, True), (2, False, 1, 2, False),
            (4, False, 2, 2, True), (2, False, 0, 1, False), (2, True, 0, 1, True), (4, True, 0, 2, False)]
HOPPER_FORMS = {"mxfp4": MX_FORMS, "mxfp8": MX_FORMS,
                "fp8_1x128": [(4, False, 4, 1, False), (16, False, 4, 1, True), (4, False, 2, 2, True),
                              (16, False, 0, 1, False), (8, True, 0, 2, False), (4, True, 0, 1, False)]}


def _hopper_forms(mod):
    """The module's default form (its register cap too), with the scale pass and without, then its family's
    HOPPER_FORMS (no register cap)."""
    cfg = mod.HOPPER_CONFIG
    return [cfg, cfg._replace(staged=not cfg.staged)] + HOPPER_FORMS[mod.HOPPER_FAMILY]


def _hopper_cases():
    """Every bf16 pattern in four orders (and transposed), then every input class at three shapes."""
    allbits = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    for seed in range(4):
        x = allbits[torch.randperm(65536, generator=torch.Generator().manual_seed(seed))].reshape(256, 256)
        yield f"allbits{seed}", x
        yield f"allbits{seed}_t", x.t().contiguous()
    for cname, make in inputs.CLASSES.items():
        for shape in ((256, 256), (512, 1024), (1024, 512)):
            yield f"{cname}{shape}", make(*shape, seed=3)


def _same_bytes(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.contiguous().view(torch.uint8))


def _assert_hopper_matches(mod, variant, forms, few):
    """The Triton kernel and the Hopper kernel in each of `forms` against the reference on _hopper_cases (the
    first `few` forms only where the case is neither every bf16 pattern nor the special values)."""
    for cname, x in _hopper_cases():
        x = x.cuda()
        ref = reference.quantize(variant, x)
        triton_res = mod.quantize(x, backend="triton")
        assert [k for k in ref if not _same_bytes(triton_res[k].tensor, ref[k])] == [], cname
        every = cname.startswith("allbits") or cname.startswith("specials")
        for form in forms if every else forms[:few]:
            assert _hopper_wrong(mod, x, ref, form) == [], (cname, form)


def _hopper_wrong(mod, x, ref, form, lens=None):
    """The outputs the Hopper kernel in `form` gets wrong against the reference's `ref` (buffers poisoned
    first: every cell must be written); a segmented cast's for group lengths `lens`, its extras against the
    reference's offsets and a clear flag."""
    M, N = x.shape
    segs = () if lens is None else runtime.segment_buffers(mod.NAME, lens.cuda(), x)
    bufs = {k: torch.empty(s[2], dtype=mod.DTYPES[k], device="cuda") for k, s in mod._shapes(M, N, *segs[:1]).items()}
    for b in bufs.values():
        b.view(torch.uint8).fill_(0xAB)
    mod._launch_hopper(x, bufs, M, N, *((segs[0], segs[1:]) if segs else ()), *form)
    wrong = [k for k in ref if not _same_bytes(bufs[k], ref[k])]
    if segs:
        _, offsets = reference.segment_rows(x[:, :1].float().cpu(), lens, 128)
        starts = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lens, 0)]).tolist()
        wrong += [k for k, v in (("group_offsets", segs[2].tolist() != starts),
                                 ("padded_offsets", segs[3].tolist() != torch.as_tensor(offsets).tolist()),
                                 ("invalid_groups", segs[4].tolist() != [0])) if v]
    return wrong


@sm90
@pytest.mark.parametrize("kernel,opts", HOPPER_MODULES,
                         ids=[k + "-" + "".join(str(int(v)) for v in o.values()) for k, o in HOPPER_MODULES])
def test_hopper_kernel_matches_triton_kernel_and_reference(kernel, opts):
    mod = find(kernel, **opts)
    # every form on every bf16 pattern and the special values, the two defaults on the other cases
    _assert_hopper_matches(mod, shipped_kernels()[kernel].variant(**opts), _hopper_forms(mod), 2)


def _user_specs():
    from test_cast_hopper import E5M2_TRANSPOSED_SPEC, FUSED_1X128_SPECS
    return {"mxfp8_e5m2_transposed": E5M2_TRANSPOSED_SPEC, **FUSED_1X128_SPECS}


@sm90
@pytest.mark.parametrize("spec", sorted(_user_specs()))
def test_hopper_kernel_of_a_user_spec(spec):
    """Specs outside the shipped ones that a family takes (MXFP8: E5M2 codes, plain scales; fused 1x128: DeepGEMM's
    scale rules, transposed colwise scales): the Hopper kernel against the Triton kernel and the reference, like
    the shipped modules."""
    import quantlay
    from quantlay.spec import load
    text = _user_specs()[spec]
    mod = quantlay.build(text)
    forms = _hopper_forms(mod)[:4]
    _assert_hopper_matches(mod, load(text)[0].variant(), forms, len(forms))


@sm90
@pytest.mark.parametrize("kernel", [KERNELS[1], "mxfp8_floor_transposed", "fp8_1x128_nvte"])
def test_hopper_kernel_is_the_default_on_whole_tiles(kernel, monkeypatch):
    from quantlay.errors import LaunchError
    calls = []

    def recorded(mod):  # the module, its Hopper launches recorded in calls as (M, N)
        launch = mod._launch_hopper
        monkeypatch.setattr(mod, "_launch_hopper", lambda x2, bufs, M, N, *form: calls.append((M, N)) or launch(x2, bufs, M, N, *form))
        return mod

    flags = shipped_kernels()[kernel].options
    mod = recorded(find(kernel, **dict.fromkeys(flags, True)))
    x = inputs.normal(512, 768, seed=1).cuda()
    mod.quantize(x)  # whole tiles: the Hopper kernel
    mod.quantize(x, num_warps=4)  # launch settings given: the Triton kernel
    mod.quantize(x, backend="triton")
    ragged = inputs.normal(320, 768, seed=1).cuda()  # MX: its swizzled scales pad the rows to 512; 1x128: 320 rows
    mod.quantize(ragged)
    with pytest.raises(LaunchError, match=r"not whole \d+x\d+ tiles with no padding"):
        mod.quantize(ragged, backend="gluon")
    assert calls == [(512, 768)]
    # plain scale layouts (the scale pass): the Hopper kernel at every whole-tile size too
    mod = recorded(find(kernel, **dict.fromkeys(flags, False)))
    calls.clear()
    mod.quantize(x)
    mod.quantize(x, num_warps=4)
    assert calls == [(512, 768)]


@sm90
@pytest.mark.big_memory
def test_mxfp8_hopper_kernel_past_2_31_elements():
    """The transposing MXFP8 cast's Hopper kernel on an input of more than 2^31 elements (whole tiles, plain
    layouts: 64-bit offsets), against the reference on its first, middle and last rows."""
    variant = shipped_kernels()["mxfp8_floor_transposed"].variant(with_gemm_swizzled_scales=False)
    mod = find("mxfp8_floor_transposed", with_gemm_swizzled_scales=False)
    M, N = 65536, 32832
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16, generator=g)
    res = {k: t.tensor for k, t in mod.quantize(x, backend="gluon").items()}
    for r0 in (0, 32768, M - 2048):
        ref = reference.quantize(variant, x[r0:r0 + 2048])
        assert torch.equal(res["rowwise_data"][r0:r0 + 2048], ref["rowwise_data"])
        assert torch.equal(res["rowwise_scale"][r0:r0 + 2048], ref["rowwise_scale"])
        assert torch.equal(res["colwise_data"][:, r0:r0 + 2048], ref["colwise_data"])
        assert torch.equal(res["colwise_scale"][:, r0 // 32:(r0 + 2048) // 32], ref["colwise_scale"])


@sm90
@pytest.mark.big_memory
def test_fused_1x128_hopper_kernel_past_2_31_elements():
    """The fused 1x128 cast's Hopper kernel (NVIDIA's GEMM_READY layouts: the colwise codes transposed, the
    rowwise scales MN-major) on an input of more than 2^31 elements (64-bit offsets), against the reference on
    its first, middle and last rows, output by output in logical order."""
    variant = shipped_kernels()["fp8_1x128_nvte"].variant(gemm_ready=True)
    mod = find("fp8_1x128_nvte", gemm_ready=True)
    M, N = 65536, 32896
    assert M * N > 2 ** 31
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16, generator=g)
    res = mod.quantize(x, backend="gluon")
    logical = {k: reference.logical_view(variant.output(k), res[k].tensor, M, N) for k in res}
    del res
    for r0 in (0, 32768, M - 2048):
        ref = reference.quantize(variant, x[r0:r0 + 2048])
        for k in ref:
            want = reference.logical_view(variant.output(k), ref[k], 2048, N)
            per = M // logical[k].shape[0]  # 1: a row per row of x; 128: a row per block of rows
            assert torch.equal(logical[k][r0 // per:(r0 + 2048) // per], want), (r0, k)


# the segmented fused cast (fp8_segment_m, fused_rowwise): group lengths with empty groups, groups of 1, 127, 128
# and 129 rows and groups that end inside a block, then one group, then 40 (past the 32 each program scans: the map
# kernel's row map)
SEGMENT_LENS = [[0, 1, 127, 128, 129, 0, 700, 3], [1088], [300, 0, 724, 64],
                [int(v) for v in torch.randint(0, 60, (40,), generator=torch.Generator().manual_seed(2))]]


def _segment_cases():
    """(name, x, lengths): every bf16 pattern in two orders, then every input class, for each SEGMENT_LENS."""
    allbits = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    for seed in range(2):
        x = allbits[torch.randperm(65536, generator=torch.Generator().manual_seed(seed))].reshape(256, 256)
        yield f"allbits{seed}", x, torch.tensor([100, 0, 156])
    for lens in SEGMENT_LENS:
        for cname, make in inputs.CLASSES.items():
            yield f"{cname}{lens[:8]}", make(sum(lens), 384, seed=len(lens)), torch.tensor(lens)


@sm90
def test_segmented_hopper_kernel_matches_triton_kernel_and_reference():
    """The segmented fused cast's Hopper kernel (a program's rows mapped from its group) in six forms (its default,
    with a register cap of 80, then other warps, orders and column tiles), its row map scanned by each program or
    read from the map kernel's, against the Triton kernel and the reference, outputs poisoned first; the extras
    (group and padded offsets, the flag) the reference's."""
    mod = find("fp8_segment_m", fused_rowwise=True)
    variant = shipped_kernels()["fp8_segment_m"].variant(fused_rowwise=True)
    forms = [mod.HOPPER_CONFIG, mod.HOPPER_CONFIG._replace(maxnreg=80), (4, False, 4, 1, False),
             (16, False, 0, 1, False), (8, True, 0, 2, False), (4, False, 2, 3, False)]
    for cname, x, lens in _segment_cases():
        ref = {k: v.cuda() for k, v in reference.quantize(variant, x, lens).items()}
        x = x.cuda()
        triton_res = mod.quantize(x, lens.cuda(), backend="triton")
        assert [k for k in ref if not _same_bytes(triton_res[k].tensor, ref[k])] == [], cname
        for form in [f for f in forms if x.shape[1] % (128 * f[3]) == 0]:
            assert _hopper_wrong(mod, x, ref, form, lens) == [], (cname, form)


@sm90
def test_segmented_hopper_kernel_is_the_default_on_whole_column_tiles(monkeypatch):
    from quantlay.errors import LaunchError
    mod = find("fp8_segment_m", fused_rowwise=True)
    calls = []
    launch = mod._launch_hopper
    monkeypatch.setattr(mod, "_launch_hopper", lambda x2, bufs, M, N, *rest: calls.append((M, N)) or launch(x2, bufs, M, N, *rest))
    lens = torch.tensor([100, 0, 156], device="cuda")
    mod.quantize(inputs.normal(256, 768, seed=1).cuda(), lens)  # whole 128-column tiles: the Hopper kernel
    mod.quantize(inputs.normal(256, 768, seed=1).cuda(), lens, backend="triton")
    ragged = inputs.normal(256, 700, seed=1).cuda()
    mod.quantize(ragged, lens)
    with pytest.raises(LaunchError, match=r"N = 700 is not whole 128-column tiles"):
        mod.quantize(ragged, lens, backend="gluon")
    assert calls == [(256, 768)]


@sm90
@pytest.mark.big_memory
def test_segmented_hopper_kernel_past_2_31_elements():
    """The segmented fused cast's Hopper kernel on an input of more than 2^31 elements (64-bit offsets), groups
    ending inside blocks, against its Triton kernel (the reference's bytes on the smaller cases above)."""
    mod = find("fp8_segment_m", fused_rowwise=True)
    M, N = 65536, 32896
    assert M * N > 2 ** 31
    lens = torch.tensor([8000, 1, 0, 20000, 127, 30000, 7408], device="cuda")
    assert int(lens.sum()) == M
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16, generator=g)
    want = {k: t.tensor for k, t in mod.quantize(x, lens, backend="triton").items()}
    got = mod.quantize(x, lens, backend="gluon")
    assert [k for k in want if not torch.equal(got[k].tensor.view(torch.uint8), want[k].view(torch.uint8))] == []


HOPPER_MUTATIONS = {
    "odd rows read the even rows' words": [("_hopper_rows(so, pid_m, 1,", "_hopper_rows(se, pid_m, 1,")],
    "column 2j + 1 scaled by column 2j's block": [("mult1, e1 = _scale_colwise(m & -65536)",
                                                  "mult1, e1 = _scale_colwise((m & 0xFFFF) << 16)")],
    "a program's second tile encodes its first tile's words": [("xe = gl.load(ptrs + (t + 1) * BNW)\n", "xe = gl.load(ptrs)\n")],
    "staged column 2j + 1 scales over column 2j's": [("gl.store(st + PM // 16, e1.to(gl.uint8),", "gl.store(st, e1.to(gl.uint8),")],
    "grouped programs map onto the wrong column tiles": [(
        "pid_t = gl.program_id(1) * GRID_GROUP + gl.program_id(0) % GRID_GROUP",
        "pid_t = gl.program_id(1) + gl.program_id(0) % GRID_GROUP")],
}
EIGHT_BIT_MUTATIONS = {  # the 8-bit families' (MXFP8, fused 1x128): the same text in both kernels
    "a row block's scale from its even columns only": [("mult, e = _scale_rowwise(_lanes_max(m) << 16)",
                                                        "mult, e = _scale_rowwise((m & 0xFFFF) << 16)")],
    "column 2j + 1 scaled by column 2j's block": [("mult, e = _scale_colwise(_lanes_apart(m) << 16)",
                                                  "mult, e = _scale_colwise(_lanes_apart((m & 0xFFFF) | (m << 16)) << 16)")],
    "a program's second tile encodes its first tile's words": [("_hopper_tile(gl.load(ptrs + t * (BN // 2)),",
                                                                "_hopper_tile(gl.load(ptrs),")],
}
HOPPER8_MUTATIONS = {**EIGHT_BIT_MUTATIONS,  # the transposing MXFP8 kernel's
    "staged colwise scales in column-major order": [("+ rb * BN + cc, e.to(gl.uint8)", "+ cc * (BM // 32) + rb, e.to(gl.uint8)")],
}
HOPPER128_MUTATIONS = {**EIGHT_BIT_MUTATIONS,  # the fused 1x128 kernel's
    "the colwise codes scaled by the rows' multipliers": [("mc.load(gl.SliceLayout(0, L))", "mr.load(gl.SliceLayout(0, L))")],
    "staged row scales of every row tile in the first one's place": [("(pid_m * GRID_N + pid_n) * BM + rr + cb",
                                                                      "pid_n * BM + rr + cb")],
}
SQUARE_MUTATIONS = {  # the MXFP4 kernel's in 32x32 blocks
    "a square block's amax from its even columns only": [("m = _max_u16x2(m, ((m >> 16) & 0xFFFF) | (m << 16))",
                                                          "m = (m & 0xFFFF) | (m << 16)")],
    "every band's rowwise scale in the first band's place": [("+ blk * (BNW // 16) + cb, e.to", "+ blk * 0 + cb, e.to"),
                                                             ("        ti = pid_m * (PM // 16) + blk\n", "        ti = pid_m * (PM // 16) + blk * 0\n")],
    "the rows scaled by their own 1x32 blocks' amax": [(
        "m = sq.load(gl.SliceLayout(2, x.type.layout))",
        "m = _max_u16x2(gl.reduce(x, 2, _max_u16x2) & 0x7FFF7FFF, gl.reduce(x, 2, _max_s16x2) & 0x7FFF7FFF)")],
}
SEGMENT_MUTATIONS = {  # the segmented fused cast's Hopper kernel
    # (clamped into x's rows: a planted bug must not write past a buffer, or its fault would end the worker)
    "rowwise outputs at the padded rows": [("    ti = pr + delta\n", "    ti = gl.minimum(pr, M - 1)\n")],
    "a block past the last group quantized as a group's": [("    if row_lim == 0:\n        for t in gl.static_range(TILES):\n",
                                                           "    if row_lim < 0:\n        for t in gl.static_range(TILES):\n")],
    "a block past the last group with its scales left out": [("    gl.store(colwise_scale_ptr + ((r * N) + c), gl.zeros(",
                                                              "    gl.store(colwise_scale_ptr + ((r * N) + c), mask=tj < 0, value=gl.zeros(")],
    "a group's padding rows read the row after it": [("delta, row_lim, M), 1)", "delta, row_lim + 1, M), 1)")],
    "the row map read a word off": [("delta = gl.load(map_ptr + 2 * pid_m)\n", "delta = gl.load(map_ptr + 2 * pid_m + 1)\n")],
    "rowwise scales of the rows past a group's end": [("mask=_segment_ok(pid_m * BM + rr, delta, row_lim, M))",
                                                       "mask=_segment_ok(pid_m * BM + rr, delta, row_lim + 1, M))")],
}
# bug -> (kernel, its options, edits)
HOPPER_BUGS = {**{b: (KERNELS[0], dict.fromkeys(FLAGS, True), e) for b, e in HOPPER_MUTATIONS.items()},
               **{"mxfp8: " + b: ("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": False}, e)
                  for b, e in HOPPER8_MUTATIONS.items()},
               **{"fp8_1x128: " + b: ("fp8_1x128_nvte", {"gemm_ready": True}, e) for b, e in HOPPER128_MUTATIONS.items()},
               **{"mxfp4_32x32: " + b: ("mxfp4_32x32_hw", {}, e) for b, e in SQUARE_MUTATIONS.items()}}


@sm90
@pytest.mark.parametrize("bug", sorted(HOPPER_BUGS))
def test_hopper_planted_bugs_are_caught(bug, tmp_path):
    from test_gemm import mutated
    kernel, opts, edits = HOPPER_BUGS[bug]
    m = mutated(kernel, edits, tmp_path, **opts)
    variant = shipped_kernels()[kernel].variant(**opts)
    x = inputs.normal(1024, 1024, seed=4).cuda()
    ref = reference.quantize(variant, x)
    wrong = [_hopper_wrong(m, x, ref, form) for form in _hopper_forms(m)]
    assert any(wrong), f"the suite misses: {bug}"


@sm90
@pytest.mark.parametrize("bug", sorted(SEGMENT_MUTATIONS))
def test_segmented_hopper_planted_bugs_are_caught(bug, tmp_path):
    from test_gemm import mutated
    m = mutated("fp8_segment_m", SEGMENT_MUTATIONS[bug], tmp_path, fused_rowwise=True)
    variant = shipped_kernels()["fp8_segment_m"].variant(fused_rowwise=True)
    wrong = []
    for lens in ([300, 0, 724, 64], [1088]):
        lens = torch.tensor(lens)
        x = inputs.normal(int(lens.sum()), 512, seed=4)
        ref = {k: v.cuda() for k, v in reference.quantize(variant, x, lens).items()}
        for inline in (32, 0):  # the row map scanned by each program, or the map kernel's
            m.INLINE_MAP_GROUPS = inline
            wrong.append(_hopper_wrong(m, x.cuda(), ref, m.HOPPER_CONFIG, lens))
    assert any(wrong), f"the suite misses: {bug}"


# ---- programmatic dependent launch: a cast reads x only once the grid before it has completed -------------
@triton.jit
def _write_late(dst_ptr, src_ptr, n, DELAY_NS: tl.constexpr, BLOCK: tl.constexpr):
    """Lets the next grid launch at once (griddepcontrol.launch_dependents), then copies src into dst after
    DELAY_NS: a cast launched after it that read x before this grid completed would read the old x. With
    DELAY_NS = 0 and launched as a dependent, it is a copy that does not wait for the grid before it."""
    tl.extra.cuda.gdc_launch_dependents()
    t = tl.extra.cuda.globaltimer()
    end = t + DELAY_NS
    while t < end:
        t = tl.extra.cuda.globaltimer()
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


DELAY_NS = 20_000_000  # far longer than a cast's host-side launch path


@functools.lru_cache(maxsize=None)
def _group_lengths():
    """The segmented cast's group lengths on the GPU, made once: copied in during the race, they would wait
    for the grid before the cast."""
    return torch.tensor([300, 0, 724], device="cuda")


# (kernel, options, call): each kind of cast the launchers start as a programmatic dependent
PDL_CASTS = {
    "triton": ("mxfp8_nvte", {}, lambda m, x: m.quantize(x)),
    "triton with the scale pass": (KERNELS[1], dict.fromkeys(FLAGS, False), lambda m, x: m.quantize(x, backend="triton")),
    "fused 1x128": ("fp8_1x128_rocm_te", {}, lambda m, x: m.quantize(x, backend="triton")),
    "hopper fused 1x128": ("fp8_1x128_nvte", {"gemm_ready": True}, lambda m, x: m.quantize(x)),
    "hopper": (KERNELS[1], dict.fromkeys(FLAGS, True), lambda m, x: m.quantize(x)),
    "hopper with the scale pass": (KERNELS[0], dict.fromkeys(FLAGS, False), lambda m, x: m.quantize(x)),
    "hopper mxfp8": ("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": True}, lambda m, x: m.quantize(x)),
    "segmented": ("fp8_segment_m", {"fused_rowwise": True},
                  lambda m, x: m.quantize(x, _group_lengths(), backend="triton")),
    "hopper segmented": ("fp8_segment_m", {"fused_rowwise": True}, lambda m, x: m.quantize(x, _group_lengths())),
}


def _raced(mod, call, shape=(1024, 1024)):
    """`call` on an x that a _write_late grid writes DELAY_NS after it lets the cast launch, against the same
    call on that x in a synchronized stream: the outputs (and extras) that differ."""
    final = inputs.normal(*shape, seed=7).cuda()
    want = call(mod, final)
    torch.cuda.synchronize()
    x = torch.zeros_like(final)
    n, block = x.numel(), 4096
    _write_late[(triton.cdiv(n, block),)](x, final, n, DELAY_NS=DELAY_NS, BLOCK=block)
    got = call(mod, x)
    torch.cuda.synchronize()
    bad = [k for k in want.keys() if not torch.equal(got[k].tensor, want[k].tensor)]
    return bad + [k for k in want.extras if not torch.equal(got.extras[k], want.extras[k])]


@sm90
def test_a_dependent_that_does_not_wait_reads_the_old_x():
    """The race the tests below rely on: a grid launched as _write_late's programmatic dependent starts while
    _write_late still waits, so without griddepcontrol.wait it reads x before x is written. (Nothing may be
    enqueued between the two, an event record included, and the dependent must be compiled already.)"""
    final = inputs.normal(1024, 1024, seed=7).cuda()
    x, seen = torch.zeros_like(final), torch.empty_like(final)
    torch.cuda.synchronize()
    n, block = x.numel(), 4096
    _write_late[(triton.cdiv(n, block),)](seen, x, n, DELAY_NS=0, BLOCK=block, launch_pdl=True)  # compiled before the race
    seen.fill_(1.0)
    torch.cuda.synchronize()
    _write_late[(triton.cdiv(n, block),)](x, final, n, DELAY_NS=DELAY_NS, BLOCK=block)
    _write_late[(triton.cdiv(n, block),)](seen, x, n, DELAY_NS=0, BLOCK=block, launch_pdl=True)
    torch.cuda.synchronize()
    assert torch.equal(x, final) and not seen.any()


@sm90
@pytest.mark.parametrize("kind", sorted(PDL_CASTS))
def test_casts_wait_for_the_grid_before_them(kind):
    name, opts, call = PDL_CASTS[kind]
    assert _raced(find(name, **opts), call) == []


PDL_MUTATIONS = {  # a cast whose wait is gone: it reads x while the grid before it still writes
    "triton": ("mxfp8_nvte", {}, [("has completed\n        tl.extra.cuda.gdc_launch_dependents()\n        tl.extra.cuda.gdc_wait()\n",
                                   "has completed\n        tl.extra.cuda.gdc_launch_dependents()\n")]),
    "hopper": (KERNELS[1], dict.fromkeys(FLAGS, True), [('"griddepcontrol.wait; // $0"', '"// $0"')]),
}


@sm90
@pytest.mark.parametrize("kind", sorted(PDL_MUTATIONS))
def test_a_cast_without_its_wait_is_caught(kind, tmp_path):
    from test_gemm import mutated
    name, opts, edits = PDL_MUTATIONS[kind]
    assert _raced(mutated(name, edits, tmp_path, **opts), PDL_CASTS[kind][2]) != [], f"the suite misses: {kind}"
