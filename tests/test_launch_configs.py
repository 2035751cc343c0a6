"""Launch configurations the tuner may pick change speed, never bytes: a register cap, tiles narrower
than a block's length across the block axis, one-warp programs, rowwise scales computed in place and
the grid in N-first order or in groups of column tiles, the second direction's opaque widening, an L2
prefetch of a later program's tile, on ragged shapes with every output poisoned first, against the reference (interpreter or CUDA)."""
import pytest
import torch
import triton
import triton.language as tl

import quantlay
from quantlay import inputs, reference
from quantlay.generated import find
from quantlay.spec import shipped_kernels

from conftest import DEVICE

CASES = [  # (kernel, options, tile, shape): shapes that leave partial tiles
    ("mxfp4_cast_transpose_hw", dict.fromkeys(("shuffle_rowwise_data", "shuffle_columnwise_data",
                                               "with_gemm_swizzled_scales"), True), (64, 64), (192, 320)),
    ("fp8_1x128_nvte", {"gemm_ready": True}, (128, 128), (300, 520)),
    ("mxfp8_nvte", {"with_gemm_swizzled_scales": True}, (32, 64), (100, 200)),
    ("fp8_segment_m", {"fused_rowwise": True}, (128, 128), (260, 256)),
]
KERNELS = shipped_kernels()


def check(name, opts, tile, shape, seed, **launch):
    """Quantize with the tile and the launch options given (maxnreg, num_warps, inplace_rows, grid order)."""
    mod = find(name, **opts)
    M, N = shape
    x = inputs.specials(M, N, seed=seed).to(DEVICE)
    groups = torch.tensor([100, 0, 129, 31], device=DEVICE) if KERNELS[name].groups else None
    args = () if groups is None else (groups,)
    shapes = mod._shapes(M, N, *(() if groups is None else (groups.numel(),)))
    out = {k: torch.full(s[2], 0x5A, dtype=mod.DTYPES[k], device=DEVICE) for k, s in shapes.items()}
    res = mod.quantize(x, *args, out=out, block_m=tile[0], block_n=tile[1], **launch)
    ref = reference.quantize(KERNELS[name].variant(**opts), x, None if groups is None else groups.cpu())
    for k in ref:
        assert reference.same_values(res[k].tensor.cpu(), ref[k].cpu()), (name, tile, k)


@pytest.mark.parametrize("name,opts,tile,shape", CASES, ids=[c[0] for c in CASES])
def test_register_cap_matches_reference(name, opts, tile, shape):
    check(name, opts, tile, shape, seed=5, maxnreg=128)

NARROW = [  # single-direction kernels on tiles narrower than a block's length across the block axis
    ("fp8_1x128_colwise_transposed", {}, (128, 32), (300, 200)),
    ("fp8_1x128_deepgemm_sm100", {}, (32, 128), (100, 640)),
    ("fp8_segment_m", {"fused_rowwise": False}, (128, 64), (260, 200)),
]


@pytest.mark.parametrize("name,opts,tile,shape", NARROW, ids=[c[0] for c in NARROW])
def test_narrow_tiles_match_reference(name, opts, tile, shape):
    check(name, opts, tile, shape, seed=6)


ONE_WARP = [  # one-warp programs: every block reduced inside the warp (compiled: shuffles, no shared memory)
    ("fp8_1x128_colwise_transposed", {}, (128, 16), (300, 200)),
    ("mxfp8_nvte", {"with_gemm_swizzled_scales": True}, (32, 64), (100, 200)),
    ("mxfp4_cast_transpose_hw", {}, (32, 64), (96, 160)),
]


@pytest.mark.parametrize("name,opts,tile,shape", ONE_WARP, ids=[c[0] for c in ONE_WARP])
def test_one_warp_tiles_match_reference(name, opts, tile, shape):
    check(name, opts, tile, shape, seed=7, num_warps=1)


INPLACE = CASES + [  # rowwise scale math in place: E8M0 (FP4 packed, MXFP8) and fp32 rules, segments
    ("fp8_1x128_deepgemm", {}, (32, 128), (100, 300)),
    ("fp8_1x128_deepgemm_ue8m0", {}, (32, 128), (70, 260)),
    ("fp8_128x128_nvte", {}, (128, 128), (260, 300)),
    ("mxfp4_cast_transpose_te", {}, (32, 64), (96, 160)),
]


@pytest.mark.parametrize("name,opts,tile,shape", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_row_scales_match_reference(name, opts, tile, shape):
    check(name, opts, tile, shape, seed=8, inplace_rows=True)


N_FIRST = CASES + [  # the grid along N first: each program still finds its own tile (and its group)
    ("fp8_1x128_colwise_transposed", {}, (128, 32), (300, 200)),
    ("fp8_128x128_rocm_te", {}, (128, 128), (260, 300)),
    ("fp8_1x128_deepgemm_sm100", {}, (32, 128), (100, 640)),
]


@pytest.mark.parametrize("name,opts,tile,shape", N_FIRST, ids=[c[0] for c in N_FIRST])
def test_n_first_grid_matches_reference(name, opts, tile, shape):
    check(name, opts, tile, shape, seed=9, grid_n_first=True)


GROUPED = [  # groups of column tiles: each program still finds its own tile (and its group of rows)
    ("fp8_1x128_colwise_transposed", {}, (128, 32), (300, 320), 5),     # ragged rows, 2 groups of 5 tiles
    ("mxfp4_cast_transpose_hw", CASES[0][1], (64, 64), (192, 256), 4),  # one group of all 4 column tiles
    ("fp8_segment_m", {"fused_rowwise": True}, (128, 128), (260, 256), 2),
    ("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": False}, (32, 64), (100, 256), 2),  # 2 groups of 2
    ("fp8_1x128_nvte", {"gemm_ready": True}, (128, 128), (300, 520), 3),  # 3 does not divide 5 tiles: plain
]


@pytest.mark.parametrize("name,opts,tile,shape,group", GROUPED, ids=[c[0] for c in GROUPED])
def test_grouped_grid_matches_reference(name, opts, tile, shape, group):
    check(name, opts, tile, shape, seed=10, grid_group=group)


OPAQUE = CASES + [  # two-direction kernels with the second direction widened opaquely (compiled only:
    # in the interpreter the option leaves the code as it is), under the tuner's cap and without one
    ("fp8_1x128_rocm_te", {}, (128, 128), (300, 520)),
    ("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": False}, (64, 64), (100, 256)),
    ("fp8_1x128_colwise_transposed", {}, (128, 32), (300, 200)),  # one direction: nothing to widen
]


@pytest.mark.parametrize("maxnreg", [0, 128])
@pytest.mark.parametrize("name,opts,tile,shape", OPAQUE, ids=[c[0] for c in OPAQUE])
def test_opaque_widening_matches_reference(name, opts, tile, shape, maxnreg):
    check(name, opts, tile, shape, seed=11, opaque_widen=True, maxnreg=maxnreg)


MXFP4_ON = CASES[0][1]
PAIR_RUNS = [  # the MXFP4 colwise direction loads even and odd rows apart, with runs of PAIR_RUN pairs per
    # thread (runtime.pair_run); each run length it can take, options on and off, on ragged shapes
    ((32, 64), 4, 1, {}), ((64, 64), 4, 2, MXFP4_ON), ((64, 64), 2, 4, {}), ((128, 64), 2, 8, MXFP4_ON),
    ((128, 128), 1, 16, {}),
]


@pytest.mark.parametrize("tile,warps,run,opts", PAIR_RUNS, ids=[f"run{c[2]}" for c in PAIR_RUNS])
def test_pair_runs_match_reference(tile, warps, run, opts):
    from quantlay.runtime import pair_run
    assert pair_run(tile[0], tile[1], warps, 32) == run
    shape = (192, 320) if opts else (162, 202)  # the shuffled layouts need 64-row and 64-column multiples
    check("mxfp4_cast_transpose_hw", opts, tile, shape, seed=12, num_warps=warps)


def test_launch_grid_keeps_to_cuda_limits():
    from quantlay.runtime import MAX_GRID_Y, launch_grid
    assert launch_grid(10, 3, False) == ((10, 3), False, 0)
    assert launch_grid(10, 3, True) == ((3, 10), True, 0)
    assert launch_grid(10, 8, False, 4) == ((40, 2), False, 4)    # 4 column tiles side by side per group
    assert launch_grid(10, 6, False, 4) == ((10, 6), False, 0)    # a group must divide the column tiles
    assert launch_grid(10, 8, True, 4) == ((8, 10), True, 0)      # groups are an M-first order
    assert launch_grid(MAX_GRID_Y + 1, 3, True) == ((MAX_GRID_Y + 1, 3), False, 0)  # too many row tiles for axis 1
    assert launch_grid(3, MAX_GRID_Y + 1, False) == ((MAX_GRID_Y + 1, 3), True, 0)  # too many column tiles
    assert launch_grid(3, 2 * MAX_GRID_Y, False, 2) == ((6, MAX_GRID_Y), False, 2)  # the groups fit axis 1


MXFP4_OFF = dict.fromkeys(MXFP4_ON, False)
REGIONS = [  # (kernel, options, tile, shape, region_m): a column of tiles per program, the transposed
    # plain scales stored as one word per row (2, 4 and 8 bytes); ragged shapes and kernels without such
    # an output fall back to one tile per program
    ("mxfp4_cast_transpose_hw", MXFP4_OFF, (64, 64), (256, 192), 2),
    ("mxfp4_cast_transpose_hw", MXFP4_OFF, (64, 64), (256, 192), 4),
    ("mxfp4_cast_transpose_hw", MXFP4_OFF, (32, 64), (256, 128), 8),
    ("mxfp4_cast_transpose_te", dict(MXFP4_ON, with_gemm_swizzled_scales=False), (64, 64), (256, 192), 2),
    ("mxfp4_cast_transpose_hw", MXFP4_OFF, (64, 64), (162, 202), 2),  # ragged: one tile per program
    ("fp8_1x128_nvte", {"gemm_ready": True}, (128, 128), (512, 256), 2),  # no plain transposed scales
]


@pytest.mark.parametrize("name,opts,tile,shape,region", REGIONS, ids=[f"{c[0]}-{c[3][0]}x{c[3][1]}-r{c[4]}" for c in REGIONS])
def test_region_tiles_match_reference(name, opts, tile, shape, region):
    check(name, opts, tile, shape, seed=13, num_warps=2 if tile[0] < 128 else 8, region_m=region)


def test_region_rows_applies_only_where_it_can():
    from quantlay.errors import LaunchError
    from quantlay.runtime import region_rows
    scale = torch.zeros(64, dtype=torch.uint8)
    assert region_rows("k", 4, 64, 32, True, 512, scale) == 4       # 8-byte words
    assert region_rows("k", 2, 32, 32, True, 512, scale) == 2       # 2-byte words
    assert region_rows("k", 4, 64, 32, False, 512, scale) == 1      # ragged grid
    assert region_rows("k", 4, 64, 32, True, 384, scale) == 1       # the region does not divide M
    assert region_rows("k", 8, 64, 32, True, 1024, scale) == 1      # a 16-byte word
    assert region_rows("k", 4, 64, 0, True, 512, None) == 1         # no plain transposed scales
    assert region_rows("k", 2, 64, 32, True, 512, scale[1:]) == 1   # a view not aligned to the word
    for bad in (0, -2, True, 2.0):
        with pytest.raises(LaunchError, match="region_m must be a positive int"):
            region_rows("k", bad, 64, 32, True, 512, scale)


def test_region_tiles_in_64_bit_offsets(monkeypatch):
    """A column of tiles with 64-bit offsets (taken when a buffer reaches 2^31 elements) against the
    reference: the word offsets and the loop's program ids in int64."""
    from quantlay import runtime
    monkeypatch.setattr(runtime, "needs_int64", lambda *sizes: True)
    check("mxfp4_cast_transpose_hw", MXFP4_OFF, (64, 64), (256, 192), seed=14, num_warps=2, region_m=4)


SCALE_PASS = [  # (kernel, options, tile, shape, launch): the scales staged per tile, then moved into their
    # layouts by the scale pass: plain and swizzled (padded) layouts, transposed ones, fp32 scales, 6-bit
    # codes, two-level scales; ragged shapes, and a column of tiles asked for as well (the pass wins)
    ("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": False}, (64, 128), (198, 260), {}),
    ("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": True}, (32, 64), (198, 260), {"grid_n_first": True}),
    ("mxfp4_cast_transpose_hw", MXFP4_OFF, (64, 64), (256, 192), {"region_m": 2}),
    ("mxfp4_cast_transpose_te", MXFP4_ON, (64, 64), (192, 320), {"grid_group": 2}),
    ("fp8_1x128_nvte", {"gemm_ready": True}, (128, 128), (300, 520), {}),
    ("nvfp4", {"with_gemm_swizzled_scales": False}, (64, 64), (130, 192), {}),
    ("mxfp6_e3m2", {}, (64, 64), (96, 128), {}),
]


@pytest.mark.parametrize("name,opts,tile,shape,launch", SCALE_PASS,
                         ids=[f"{c[0]}-{c[3][0]}x{c[3][1]}" for c in SCALE_PASS])
def test_scale_pass_matches_reference(name, opts, tile, shape, launch):
    check(name, opts, tile, shape, seed=15, num_warps=2 if tile[0] < 128 else 8, scale_pass=True, **launch)


def test_scale_pass_in_64_bit_offsets(monkeypatch):
    """The staged tiles and the pass's block coordinates in int64 (taken when a buffer reaches 2^31 elements)."""
    from quantlay import runtime
    monkeypatch.setattr(runtime, "needs_int64", lambda *sizes: True)
    check("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": False}, (64, 128), (198, 260), seed=16,
          num_warps=2, scale_pass=True)


PREFETCH = [  # whole tiles (the launcher takes it only there) and segmented rows, N-first and M-first grids
    ("fp8_1x128_rocm_te", {}, (128, 128), (256, 384), {"grid_n_first": True}),
    ("mxfp8_nvte", {"with_gemm_swizzled_scales": False}, (32, 64), (128, 256), {}),
    ("fp8_segment_m", {"fused_rowwise": True}, (128, 128), (260, 256), {"grid_n_first": True}),
    ("fp8_1x128_nvte", {"gemm_ready": True}, (128, 128), (300, 520), {}),  # ragged: not taken
]


@pytest.mark.parametrize("ahead", [1, 5])
@pytest.mark.parametrize("name,opts,tile,shape,launch", PREFETCH, ids=[c[0] for c in PREFETCH])
def test_l2_prefetch_matches_reference(name, opts, tile, shape, launch, ahead):
    """Each program warming L2 for a later one (compiled kernels only: the interpreter has no L2 to ask)."""
    check(name, opts, tile, shape, seed=17, num_warps=4 if tile[0] == 128 else 1, l2_prefetch=ahead, **launch)


_program_ahead = find("fp8_1x128_rocm_te")._program_ahead


@triton.jit
def _ahead_probe(out_ptr, D: tl.constexpr, GRID_N_FIRST: tl.constexpr):
    pm, pn, there = _program_ahead(D, GRID_N_FIRST)
    at = (tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)) * 3
    tl.store(out_ptr + at, pm)
    tl.store(out_ptr + at + 1, pn)
    tl.store(out_ptr + at + 2, there.to(tl.int32))


@pytest.mark.parametrize("n_first", [True, False])
@pytest.mark.parametrize("ahead", [1, 7, 40])
def test_program_ahead_follows_the_launch_order(n_first, ahead):
    """The tile a program prefetches is that of the program `ahead` places later, grid axis 0 first; past
    the last program there is none."""
    g0, g1 = 5, 4
    out = torch.full((g0 * g1 * 3,), -1, dtype=torch.int32, device=DEVICE)
    _ahead_probe[(g0, g1)](out, D=ahead, GRID_N_FIRST=n_first)
    got = out.view(g1, g0, 3).cpu()
    for p1 in range(g1):
        for p0 in range(g0):
            q, r = divmod(p1 * g0 + p0 + ahead, g0)
            want = (q, r) if n_first else (r, q)  # N-first: axis 0 walks N (pid_n), else M
            assert tuple(got[p1, p0].tolist()) == (*want, int(q < g1)), (p0, p1)


def test_l2_prefetch_refuses_what_is_not_a_count():
    for bad in (-1, True, 2.5):
        with pytest.raises(quantlay.LaunchError, match=r"l2_prefetch must be a non-negative int .* use 0 for none"):
            find("fp8_1x128_rocm_te").quantize(inputs.normal(128, 128).to(DEVICE), l2_prefetch=bad)
