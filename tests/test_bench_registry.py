"""The benchmark registry (issue 5): every generated variant, its PyTorch reference (eager and compiled)
and the peers are registered per group; building the registry needs no GPU."""
import pytest

from quantlay import bench
from quantlay.generated import find
from quantlay.spec import SPECS_DIR, load

SPECS = {"mxfp8": "mxfp8.ql", "mxfp6": "mxfp6.ql", "fp8": "fp8_blockwise.ql"}


def test_every_group_has_its_kernels_reference_and_peers():
    for group, make in bench.REGISTRY.items():
        names = [e.name for e in make()]
        assert len(names) == len(set(names)), group
        if group == "gemm":  # the peers of a GEMM are other GEMMs, not a reference
            assert {"torchao triton_fp8_gemm_1x128_128x128", "torch bf16 matmul"} <= set(names)
            assert any(n.startswith("cuBLAS blockwise") for n in names)
            continue
        assert any(n.startswith("torch eager reference") for n in names), group
        assert any(n.startswith("torch.compile of the reference") for n in names), group
    fp8 = [e.name for e in bench.REGISTRY["fp8"]()]
    assert sum(n.startswith("torchao ") for n in fp8) == len(bench.TORCHAO_KERNELS)


def test_generated_entries_cover_every_variant_with_its_hash():
    for group, spec in SPECS.items():
        entries = {e.name: e for e in bench.REGISTRY[group]() if e.name.startswith("quantlay ")}
        for kernel in load(SPECS_DIR / spec):
            for v in kernel.variants():
                tag = ",".join(f"{k}={int(b)}" for k, b in v.options)
                name = f"quantlay {kernel.name}" + (f" {tag}" if tag else "")
                assert name in entries, name
                assert len(entries[name].kernel_hash) == 12 and entries[name].group == group
                assert entries[name].validate(4096, 6144) is None
                assert entries[name].validate(100, 6144)  # a shape the blocks do not divide is skipped
                find(kernel.name, **dict(v.options))  # the module the entry times exists


def test_match_selects_entries_and_unknown_groups_are_refused():
    picked = bench.select(["fp8"], ["quantlay", "torchao"])
    assert picked and all(e.name.startswith(("quantlay ", "torchao ")) for _, e in picked)
    assert not any("reference" in e.name for _, e in picked)
    assert len(bench.select(["fp8"])) == len(bench.REGISTRY["fp8"]())
    import pytest
    with pytest.raises(ValueError, match="unknown bench group 'fp9'"):
        bench.select(["fp9"])
    # '=NAME' is one entry, not every name holding it; a part that selects nothing is refused
    whole = [e.name for _, e in bench.select(["gemm"], ["=quantlay fp8_gemm_fprop"])]
    assert whole == ["quantlay fp8_gemm_fprop"], whole
    assert len(bench.select(["gemm"], ["quantlay fp8_gemm_fprop"])) > 1
    with pytest.raises(ValueError, match=r"--match 'fp8_gemm_fprop G' selects no entry .*'quantlay fp8_gemm_fprop'"):
        bench.select(["gemm"], ["quantlay", "fp8_gemm_fprop G"])


def test_csv_rows_are_written_as_they_are_measured(tmp_path, monkeypatch):
    """A run cut short keeps its rows: the second entry fails hard, the first row is already on disk."""
    import csv
    import torch

    def boom(M, N):
        raise KeyboardInterrupt  # like a timeout killing the run

    monkeypatch.setitem(bench.REGISTRY, "fake", lambda: [
        bench.Entry("quantlay fast", lambda M, N: ((lambda: None), 10 ** 9), group="fake"),
        bench.Entry("quantlay killed", boom, group="fake")])
    monkeypatch.setattr(bench, "copy_gbps", lambda: 2000.0)
    monkeypatch.setattr(bench, "time_call", lambda fn: (0.5, 0.4, 0.6))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU X")
    path = tmp_path / "b.csv"
    import pytest
    with pytest.raises(KeyboardInterrupt):
        bench.run(groups=["fake"], shapes=[(128, 128)], csv_path=str(path))
    rows = list(csv.DictReader(path.open()))
    assert [r["kernel"] for r in rows] == ["quantlay fast"]
    assert rows[0]["gpu"] == "GPU X" and rows[0]["median_ms"] == "0.5000" and rows[0]["pct_of_copy"] == "100.0"


def test_gemm_rows_report_tflops(tmp_path, monkeypatch):
    import csv
    import torch
    monkeypatch.setitem(bench.REGISTRY, "gemm", lambda: [
        bench.Entry("quantlay g", lambda M, N, K: ((lambda: None), 2 * M * N * K), group="gemm")])
    monkeypatch.setattr(bench, "copy_gbps", lambda: 2000.0)
    monkeypatch.setattr(bench, "time_call", lambda fn: (1.0, 0.9, 1.1))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU X")
    path = tmp_path / "g.csv"
    bench.run(groups=["gemm"], csv_path=str(path), gemm_shapes=[(1000, 1000, 500)])
    (row,) = list(csv.DictReader(path.open()))
    assert row["shape"] == "1000x1000x500" and row["tflops"] == "1" and row["pct_of_fp8_peak"] == "0.1"


def test_mxfp4_group_measures_every_profile_with_flags_on_and_off():
    names = {e.name for e in bench.REGISTRY["mxfp4"]()}
    for kernel in ("mxfp4_cast_transpose_hw", "mxfp4_cast_transpose_te"):
        assert {f"quantlay {kernel} flags={f}{b}" for f in ("on", "off") for b in ("", " [triton]")} <= names


def test_gemm_entries_check_their_output_against_the_reference(monkeypatch):
    """A quantlay GEMM entry returns check(): None for the kernel's output, a WRONG note for an output with
    a wrong tile (the weight gradient's check runs once into zeros, whatever the timed runs added)."""
    import torch
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    entries = {e.name: e for e in bench.gemm_entries()}
    for name in ("quantlay fp8_gemm_fprop", "quantlay fp8_gemm_grouped_fprop G=8 random",
                 "quantlay fp8_gemm_grouped_wgrad_t_acc G=8 equal"):
        torch.manual_seed(0)
        run, flops, check = entries[name].make(256, 192, 256)
        run()
        run()  # timed runs; the accumulating weight gradient has now added twice
        assert check() is None, name
    mod = find("fp8_gemm_grouped_wgrad_t_acc")
    real = mod.gemm

    def one_tile_zeroed(*args, **kwargs):
        y = real(*args, **kwargs)
        y[-1, :64, :64] = 0
        return y
    monkeypatch.setattr(mod, "gemm", one_tile_zeroed)
    note = check()
    assert note.startswith("WRONG: relative error") and "bound 1e-06" in note, note
    monkeypatch.setattr(mod, "gemm", real)
    run, flops, check = entries["quantlay fp8_gemm_grouped_fprop G=8 random"].make(256, 192, 256)
    run()
    out = run()
    out[:64, :64] = 0
    assert check().startswith("WRONG"), "a tile of the grouped output zeroed"


def test_a_profiler_names_a_gemm_entry_in_one_word():
    """bench/ncu_launch.py's `gemm:TEXT`: `_` also matches a space; an unknown name lists the entries."""
    assert bench.gemm_entry("wgrad_t_G=8_equal_[gluon]").name == "quantlay fp8_gemm_grouped_wgrad_t G=8 equal [gluon]"
    assert bench.gemm_entry("quantlay fp8_gemm_fprop").name == "quantlay fp8_gemm_fprop"
    with pytest.raises(ValueError, match="the entries are"):
        bench.gemm_entry("no such gemm")


def test_gemm_ratios_pair_rows_of_one_shape():
    """The bench's closing lines: the GEMM targets' ratios, from rows of the same run and shape only."""
    R = bench.Row
    rows = [R("quantlay fp8_gemm_fprop", "gemm", "64x64x64", tflops=1000.0),
            R("quantlay fp8_gemm_grouped_fprop G=8 random", "gemm", "64x64x64", tflops=850.0),
            R("quantlay fp8_gemm_grouped_wgrad_t_bf16 G=8 random [gluon]", "gemm", "64x64x64", tflops=595.0),
            R("torchao triton_fp8_gemm_1x128_128x128", "gemm", "64x64x64", tflops=500.0),
            R("quantlay fp8_gemm_grouped_fprop G=8 random", "gemm", "32x32x32", tflops=900.0),  # no dense there
            R("mxfp8_nvte", "mxfp8", "64x64", gbps=3000.0)]
    assert bench.gemm_ratios(rows) == [
        "        64x64x64: dense / torchao 2.00x; grouped G=8 random / dense 85.0%; "
        "fp8_gemm_grouped_wgrad_t_bf16 G=8 random / grouped fprop 70.0%"]
