"""The Hopper (Gluon) GEMM kernels without a GPU: which GEMMs have one, how the launcher chooses, and that
each compiles for sm_90 (Triton's compiler and ptxas run here; nothing launches) with no register spills.
Their results are tested on the H200 (tests/test_gpu_gemm.py), against the Triton kernel and the reference."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from quantlay.errors import LaunchError
from quantlay.generated import find
from quantlay.spec import SPECS_DIR, load_gemms

from conftest import DEVICE
from test_gemm import edited, engineered

GEMMS = {g.name: g for g in load_gemms(SPECS_DIR / "fp8_gemm.ql")}


def test_hopper_kernels_exist_where_tma_can_load_both_operands():
    have = {n for n in GEMMS if "gluon" in find(n).BACKENDS}
    # the weight gradient's operands are K-major (TMA, the FP8 MMA) only in the transposed segmented cast
    assert have == {n for n in GEMMS if not n.startswith("fp8_gemm_grouped_wgrad") or "_t" in n[len("fp8_gemm_grouped_wgrad"):]}
    assert "fp8_gemm_grouped_wgrad_t_acc" in have and "fp8_gemm_grouped_wgrad" not in have


def test_backend_choice_and_errors():
    g = GEMMS["fp8_gemm_fprop"]
    a, b = engineered(g.a, (40, 256), seed=1), engineered(g.b, (130, 256), seed=2)
    mod = find(g.name)
    with pytest.raises(LaunchError, match="backend 'cutlass' is not one of gluon, triton"):
        mod.gemm(a, b, backend="cutlass")
    if DEVICE == "cpu":
        with pytest.raises(LaunchError, match="Hopper kernel cannot run this call: the operands are not on a CUDA"):
            mod.gemm(a, b, backend="gluon")
    assert torch.equal(mod.gemm(a, b), mod.gemm(a, b, backend="triton"))
    with pytest.raises(LaunchError, match="backend 'gluon' is not one of triton"):
        find("fp8_gemm_grouped_wgrad").gemm(a, b, torch.tensor([0, 40], device=DEVICE), backend="gluon")


def test_hopper_kernels_compile_for_sm90_without_spills():
    """In a fresh process without the interpreter (the compile needs Triton's real front end)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = Path(__file__).parent / "hopper_compile.py"
    out = subprocess.run([sys.executable, str(script), "fp8_gemm_fprop", "fp8_gemm_grouped_dgrad",
                          "fp8_gemm_grouped_wgrad_t", "fp8_gemm_grouped_wgrad_t_acc", "fp8_gemm_grouped_wgrad_t_bf16",
                          "fp8_gemm_grouped_wgrad_t_acc+add", "fp8_gemm_grouped_fprop",
                          "fp8_gemm_grouped_fprop+split"], env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.splitlines()[-1])
    for name, r in report.items():
        # accumulating, one word of stack holds a flag across the K loop (read once per tile); nothing else,
        # and nothing in it
        assert r["local"] == 0 and r["stack"] <= (8 if name.endswith("_acc") else 0), (name, r)
        assert r["k_loop_local"] == 0, (name, r)
        assert r["wgmma"] >= 8, (name, r)  # 4 K steps of 32 in each of the two consumer warpgroups
        assert r["shared"] <= 232448, (name, r)  # the H200's shared memory per block
        # the output leaves by TMA, one store per consumer (or, adding by TMA, one reduce-add); a split call's
        # consumers have a second copy of the tile's code, for their piece of the tail
        copies = 2 if "+split" in name else 1
        stores = (0, 2) if name.endswith("+add") else (2 * copies, 0)
        assert (r["tma_stores"], r["tma_adds"]) == stores, (name, r)
        # a rows-grouped half across its group's end by TMA too (through the windows), one per consumer
        windows = 2 * copies if name.startswith("fp8_gemm_grouped_") and "wgrad" not in name else 0
        assert r["tma_window_stores"] == windows, (name, r)
        # the K loop's control stays uniform (a divergent branch around it, as when a grouped tile's group
        # came from cross-lane reductions, moves its counters off the uniform datapath: 168 instructions
        # a K block, 16 of them R2UR); the grouped loop is the dense one's, give or take its scale index
        # (ptxas may move one scale into a uniform register there: one predicated R2UR)
        assert r["k_loop_r2ur"] <= 1, (name, r)
        # each grouped partition reads its tiles' group offsets in its tile loop, not once before it
        assert all(r["offsets_in_loops"]) == name.startswith("fp8_gemm_grouped"), (name, r)
        if "+split" in name:  # the whole tiles of a split call run the unsplit tile code, the pieces' K ranges
            # only in the piece's copy (in one tile loop, the split's K loop ran 278 instructions a trip, not 269,
            # and its whole tiles 5% slower on the H200)
            assert r["k_loop"] <= report["fp8_gemm_grouped_fprop"]["k_loop"] + 3, (name, r)
        if not name.startswith("fp8_gemm_grouped_wgrad"):
            assert r["k_loop"] <= report["fp8_gemm_fprop"]["k_loop"] + 8, (name, r)
            # two blocks a trip (their scales in two sets of registers): each block's 4 MMAs, then its wait
            assert r["mmas"] == 8 and r["mma_waits"] == [0, 0], (name, r)
        else:  # a pair of blocks: 8 MMAs, the first block promoted while the second's run (not serialized)
            assert r["mmas"] == 8 and r["mma_waits"] == [1, 0], (name, r)


def test_the_timeline_tool_finds_its_anchors_in_every_hopper_kernel():
    """bench/gemm_timeline.py stamps the consumers of an edited copy at anchors of the generated code: each
    Hopper module takes all of them (the sm_90 compile of a stamped copy: its --compile-only)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import gemm_timeline
    for name in GEMMS:
        mod = find(name)
        if "gluon" in mod.BACKENDS:
            text = gemm_timeline.instrument(Path(mod.__file__).read_text())
            # four stamps in each copy of the tile code (grouped by rows, a split call's piece is the second),
            # and a clock on each side of every wait for a stage or an MMA
            consumer = Path(mod.__file__).read_text().split("def _hopper_consumer(")[1]
            waits = sum(len(re.findall(w, consumer)) for w in gemm_timeline.WAITS.values())
            copies = 2 if mod.GROUPS == "rows" else 1
            assert text.count("%clock64") == 4 * copies + 2 * waits and "TIMELINE = None" in text, name
            compile(text, name, "exec")


def test_the_ablation_tool_takes_its_parts_out_of_every_hopper_kernel():
    """bench/gemm_ablate.py edits the consumer at anchors of the generated code: every Hopper module takes
    the ablations of the parts it has (row_scales: the weight gradient's scales from the stage), each edit
    changes the consumer only, and the copy is still Python."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import gemm_ablate
    for name in GEMMS:
        mod = find(name)
        if "gluon" not in mod.BACKENDS:
            continue
        text = Path(mod.__file__).read_text()
        wgrad = name.startswith("fp8_gemm_grouped_wgrad")
        parts = list(gemm_ablate.ABLATIONS) if wgrad else ["no_scales", "no_staging"]
        for part in parts:
            edited = gemm_ablate.ablate(text, part)
            assert edited != text and edited.split("def _hopper_consumer(")[0] == text.split("def _hopper_consumer(")[0]
            compile(edited, f"{name}:{part}", "exec")
    with pytest.raises(SystemExit, match="row_scales"):
        gemm_ablate.ablate(Path(find("fp8_gemm_fprop").__file__).read_text(), "row_scales")


@pytest.mark.parametrize("lag,together", [(0, "100%"), (500, "0%")])
def test_the_timeline_summary_tells_warpgroups_in_step_from_staggered(lag, together):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import gemm_timeline
    t = torch.zeros(1, 2, gemm_timeline.TILES, len(gemm_timeline.EVENTS), dtype=torch.int64)
    for n in range(4):  # tiles of 1000 cycles: mapping 100, a K loop of 600 (waits 150 + 250), an epilogue of 200
        for h in range(2):
            t0 = 1000 * n + 1 + h * lag
            t[0, h, n] = torch.tensor([t0, t0 + 100, t0 + 700, t0 + 900, 150, 250])
    text = gemm_timeline.summarize(t, 1)
    assert f"epilogues at the same time: median {together}" in text and f"median {lag} cycles" in text, text
    assert ("mapping 100, K loop 600, waits for stages 150, waits for MMAs 250, epilogue 200, "
            "to the next tile 100") in text, text
    assert "last tile (a split call's piece): K loop median 600, epilogue median 200, max 200" in text, text


def test_the_ab_tool_names_bench_entries_and_refuses_a_missing_baseline(tmp_path):
    """bench/gemm_ab.py (GPU) times this tree's Hopper GEMMs against earlier generated modules: its default
    cases name bench entries and GEMMs that exist, and a folder without the earlier module is an error."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import gemm_ab
    from quantlay import bench
    cases = gemm_ab.parse_cases(gemm_ab.CASES)
    assert len(cases) >= 5
    for name, entry, shape in cases:
        assert name in GEMMS and len(shape) == 3
        assert name.split("fp8_gemm_")[1] in bench.gemm_entry(entry).name
    with pytest.raises(SystemExit, match="expected one fp8_gemm_fprop__"):
        gemm_ab.baseline(tmp_path, "fp8_gemm_fprop")


def test_the_gpu_suites_planted_bugs_find_their_target_text():
    """Each bug the GPU suite plants in a Hopper GEMM edits text its generated module has (see
    tests/test_cast_hopper.py's test of the same name)."""
    from test_gpu_gemm import HOPPER_MUTATIONS, SPLIT_MUTATIONS
    for name, edits in HOPPER_MUTATIONS.values():
        edited(name, edits)
    for edits in SPLIT_MUTATIONS.values():
        edited("fp8_gemm_grouped_fprop", edits)
