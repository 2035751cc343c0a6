"""The committed tuning table: entries keyed by kernel, GPU, Triton and size bucket; a launcher takes the
nearest bucket tuned; the candidates come from the template and hold whole blocks."""
import json

import pytest
import torch
import triton

from quantlay import tune
from quantlay.generated import find


def _clear():
    tune._table.cache_clear()
    tune.lookup.cache_clear()
    tune.lookup_gemm.cache_clear()


@pytest.fixture
def own_table():
    """For a test that points the tuner at a table of its own: the table's caches cleared before and after."""
    _clear()
    yield
    _clear()


@pytest.fixture
def empty_table(tmp_path, monkeypatch, own_table):
    """An empty tuning table in place of the committed one, for a tuner run in the interpreter as 'GPU X'
    (skipped where CUDA is: the stages run on the CPU)."""
    if torch.cuda.is_available():
        pytest.skip("runs the tuner's stages in the interpreter")
    table = tmp_path / "tuning.json"
    table.write_text(json.dumps({"entries": []}))
    monkeypatch.setattr(tune, "TABLE", table)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "GPU X")
    return table


def test_lookup_takes_the_nearest_size_bucket(tmp_path, monkeypatch, own_table):
    def row(shape, bm):
        return {"kernel": "k", "gpu": "GPU X", "triton": triton.__version__, "block_m": bm, "block_n": 64,
                "num_warps": 4, "shape": shape, "median_ms": 1.0}
    table = tmp_path / "tuning.json"
    big = dict(row("16384x8192", 128), maxnreg=128, inplace_rows=True, grid_n_first=True, grid_group=4,
               opaque_widen=True, region_m=2, scale_pass=True, l2_prefetch=66)
    table.write_text(json.dumps({"entries": [row("4096x4096", 32), big]}))
    monkeypatch.setattr(tune, "TABLE", table)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "GPU X")
    assert tune.size_bucket(4096 * 4096) == 24 and tune.size_bucket(16384 * 8192) == 27
    assert tune.lookup("k", 24) == dict(block_m=32, block_n=64, num_warps=4, maxnreg=None, inplace_rows=False,
                                        grid_n_first=False, grid_group=0, opaque_widen=False, region_m=1,
                                        scale_pass=False, l2_prefetch=0)
    assert tune.lookup("k", 20)["block_m"] == 32    # below every bucket: the smallest
    assert tune.lookup("k", 26)["block_m"] == 128   # nearer 27 than 24
    # cap, in-place rows, grid order, the opaque widening, the region, the scale pass and the prefetch ride along
    assert tune.lookup("k", 30) == dict(block_m=128, block_n=64, num_warps=4, maxnreg=128, inplace_rows=True,
                                        grid_n_first=True, grid_group=4, opaque_widen=True, region_m=2,
                                        scale_pass=True, l2_prefetch=66)
    assert tune.lookup("other", 24) is None         # no entry: the template's default tile


def test_launch_settings_take_the_caller_then_the_table_then_the_default(monkeypatch):
    from quantlay import runtime
    table = dict(block_m=128, block_n=64, num_warps=8, maxnreg=128, inplace_rows=True, grid_n_first=True,
                 grid_group=0, opaque_widen=True, region_m=1, scale_pass=False, l2_prefetch=66)
    monkeypatch.setattr(tune, "lookup", lambda kernel, bucket, index=0: table if kernel == "k" else None)
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert runtime.launch_settings("k", cuda, 1 << 20, (32, 64, 1)) == table
    assert runtime.launch_settings("k", cpu, 1 << 20, (32, 64, 1)) == dict(  # off CUDA: no table
        block_m=32, block_n=64, num_warps=1, **runtime.LAUNCH_DEFAULTS)
    assert runtime.launch_settings("other", cuda, 1 << 20, (32, 64, 1))["block_m"] == 32
    given = runtime.launch_settings("k", cuda, 1 << 20, (32, 64, 1), block_m=64, maxnreg=0, opaque_widen=False,
                                    grid_group=None, l2_prefetch=0)
    # the caller wins, maxnreg 0 lifts the table's cap, None leaves the table's setting
    assert given == dict(table, block_m=64, maxnreg=None, opaque_widen=False, l2_prefetch=0)


def test_candidates_hold_whole_blocks():
    for name, opts in (("fp8_1x128_rocm_te", {}), ("fp8_1x128_colwise_transposed", {}),
                       ("fp8_segment_m", {"fused_rowwise": True}), ("mxfp8_nvte", {"with_gemm_swizzled_scales": True})):
        mod = find(name, **opts)
        assert mod.CONFIGS, name
        for bm, bn, w, regs, inplace in mod.CONFIGS:
            assert bm % mod.BLOCK_M_MULTIPLE == 0 and bn % mod.BLOCK_N_MULTIPLE == 0, (name, bm, bn)
    assert all(c[0] == 128 for c in find("fp8_segment_m", fused_rowwise=True).CONFIGS)  # the segment's rows


def test_committed_table_rows_name_generated_kernels():
    from quantlay.generated import __file__ as gen_init
    import pathlib
    names = {p.stem for p in pathlib.Path(gen_init).parent.glob("*.py")}
    for r in json.loads(tune.TABLE.read_text())["entries"]:
        assert r["kernel"] in names, r["kernel"]
        assert r["block_m"] > 0 and r["block_n"] > 0 and r["num_warps"] in (1, 2, 4, 8, 16)


def test_tuner_stages_in_the_interpreter(monkeypatch, empty_table):
    """The tuner's stages on the CPU (interpreter; a fake timer makes each later candidate faster, and
    the uncapped config in groups of 4 fastest of all): every candidate is checked bit-exact, the opaque
    stage runs for a two-direction kernel as it is and capped, groups are timed M-first, the
    winner is stored with 'no cap' written as null, a sweep cut short keeps the best of its finished
    stages, and max_tile leaves out larger tiles (none left: an error naming the fix)."""
    import itertools
    mod = find("mxfp8_floor_transposed", with_gemm_swizzled_scales=False)
    monkeypatch.setattr(mod, "CONFIGS", [(32, 64, 1, None, False), (32, 64, 2, None, True), (64, 64, 1, None, False)])
    table = empty_table
    ticks = itertools.count()
    timed = []

    def timer(fn):
        fn()
        timed.append(1)
        tick = next(ticks)
        return 1.0 if tick == 11 else 100.0 - tick  # 11: the best N-first config (uncapped) in groups of 4
    (w,) = tune.tune([("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": False})], shapes=[(64, 256)],
                     device="cpu", timer=timer, max_tile=2048)  # max_tile leaves out the 64x64 tile
    # 2 sweeps + 2 x (uncapped, capped) opaque + 4 N-first + 2 x groups of 2 and 4 (8 does not divide 4
    # tiles) + the best config of each of the 4 tiles (2 tiles, each with and without the opaque stage's
    # register cap) with the scale pass + the best 4 with 3 prefetch distances
    assert len(timed) == 2 + 4 + 4 + 4 + 4 + 12
    assert w["opaque_widen"] and w["grid_group"] == 4 and not w["grid_n_first"] and w["maxnreg"] is None
    assert (w["block_m"], w["block_n"], w["num_warps"], w["inplace_rows"]) == (32, 64, 2, True)
    stored = json.loads(table.read_text())["entries"]
    assert [r["kernel"] for r in stored] == [mod.NAME] and stored[0]["maxnreg"] is None
    # a sweep cut short (a device time limit) in the group stage keeps the best of the stages before it
    table.write_text(json.dumps({"entries": []}))
    tune._table.cache_clear()
    cut = itertools.count()

    def cut_timer(fn):
        tick = next(cut)
        if tick == 10:  # 2 sweeps + 4 opaque + 4 N-first: the first group candidate
            raise KeyboardInterrupt
        return 100.0 - tick
    with pytest.raises(KeyboardInterrupt):
        tune.tune([("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": False})], shapes=[(64, 256)],
                  device="cpu", timer=cut_timer, max_tile=2048)
    (kept,) = json.loads(table.read_text())["entries"]
    assert kept["grid_n_first"] and kept["median_ms"] == 91.0
    with pytest.raises(ValueError, match="max_tile=1024"):
        tune.tune([("mxfp8_floor_transposed", {"with_gemm_swizzled_scales": False})], shapes=[(64, 256)],
                  device="cpu", timer=timer, max_tile=1024)


def test_tuner_region_stage_in_the_interpreter(monkeypatch, empty_table):
    """A kernel with plain transposed scales (REGION_BLOCK_ROWS) gets a last stage: the best config of each
    of the three best tiles (here the one candidate tile) in columns of 2 and 4 tiles per program where
    they divide M (here 2 of 64-row tiles; 4 would pass M = 128), checked bit-exact like every candidate;
    the winner stores its region_m."""
    off = dict.fromkeys(("shuffle_rowwise_data", "shuffle_columnwise_data", "with_gemm_swizzled_scales"), False)
    mod = find("mxfp4_cast_transpose_hw", **off)
    assert mod.REGION_BLOCK_ROWS and not find("mxfp4_cast_transpose_hw", **dict(off, with_gemm_swizzled_scales=True)).REGION_BLOCK_ROWS
    monkeypatch.setattr(mod, "CONFIGS", [(64, 64, 2, None, False)])
    table = empty_table
    seen = []

    def timer(fn):
        seen.append(1)  # each later candidate faster up to the region stage's last; the scale pass slower
        return 100.0 - len(seen) if len(seen) <= 4 else 200.0
    (w,) = tune.tune([("mxfp4_cast_transpose_hw", off)], shapes=[(128, 128)], device="cpu", timer=timer)
    # the sweep's tile, N-first, groups of 2, the region of 2, then the best config of the one tile with
    # the scale pass (one tile a program), then the best 4 with 3 prefetch distances (slower here)
    assert len(seen) == 4 + 1 + 12
    assert w["region_m"] == 2 and not w["scale_pass"] and (w["block_m"], w["block_n"]) == (64, 64)
    (stored,) = json.loads(table.read_text())["entries"]
    assert stored["region_m"] == 2


def test_tuner_scale_pass_stage_retimes_every_good_tile(monkeypatch, empty_table):
    """The scale pass reorders the tiles (smaller tiles write more partial scale sectors, so gain most): the
    pass stage retimes the best configuration of each good tile, not the best few configurations, which can
    all be one tile. Here a fake timer makes 32x128 fastest without the pass, in all of its settings, and
    32x64 fastest with it: 32x64 must be retimed with the pass and win."""
    mod = find("mxfp8_nvte_e5m2", with_gemm_swizzled_scales=False)
    assert mod.SCALE_PASS
    monkeypatch.setattr(mod, "CONFIGS", [(32, 64, 1, None, False), (32, 128, 2, None, False)])
    launched = []
    quantize = mod.quantize
    monkeypatch.setattr(mod, "quantize", lambda *a, **cfg: launched.append(cfg) or quantize(*a, **cfg))

    def timer(fn):
        fn()
        cfg = launched[-1]
        if cfg["block_n"] == 128:
            return 10.0
        return 1.0 if cfg["scale_pass"] else 50.0
    (w,) = tune.tune([("mxfp8_nvte_e5m2", {"with_gemm_swizzled_scales": False})], shapes=[(64, 256)],
                     device="cpu", timer=timer)
    assert (w["block_m"], w["block_n"], w["num_warps"]) == (32, 64, 1) and w["scale_pass"]


def test_gemm_tuner_checks_each_candidate_and_stores_the_fastest(monkeypatch, empty_table):
    """The GEMM sweep in the interpreter: balanced groups, bit-exact candidates, an accumulating GEMM timed
    on a scratch buffer of its own, the winner stored under its M * N * K bucket."""
    import itertools
    table = empty_table
    for name in ("fp8_gemm_grouped_fprop", "fp8_gemm_grouped_wgrad_t_acc"):
        monkeypatch.setattr(find(name), "CONFIGS", [(32, 64, 4, 3, 8), (64, 32, 4, 3, 8)])
    ticks = itertools.count()
    winners = tune.tune_gemm(["fp8_gemm_grouped_fprop", "fp8_gemm_grouped_wgrad_t_acc"], shapes=[(128, 64, 256)],
                             device="cpu", timer=lambda fn: 10.0 - next(ticks), groups=3)
    assert [(w["block_m"], w["block_n"]) for w in winners] == [(64, 32), (64, 32)]
    stored = json.loads(table.read_text())["entries"]
    assert {r["kernel"] for r in stored} == {find("fp8_gemm_grouped_fprop").NAME,
                                             find("fp8_gemm_grouped_wgrad_t_acc").NAME}
    assert all(r["shape"] == "128x64x256" for r in stored)
    with pytest.raises(ValueError, match="no shipped gemm 'fp8_gemm_nope'"):
        tune.tune_gemm(["fp8_gemm_nope"], device="cpu", timer=lambda fn: 1.0)
