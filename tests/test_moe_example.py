"""examples/moe_training at a tiny size in the interpreter: bf16 and FP8 train; the producer that ignores
the transpose flag is refused at the first step; with the check bypassed it runs and its loss departs."""
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def in_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))


def test_tiny_training_runs_and_the_ignored_flag_is_caught(tmp_path, capsys):
    from examples.moe_training.train import main
    runs = main(["--steps", "2", "--tokens", "128", "--tiny", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert set(runs) == {"bf16", "fp8", "fp8-unsafe"}
    assert "fp8-broken  refused at the first step" in out and "stored as 'segments(128)|transpose'" in out
    assert all(math.isfinite(v) for v in runs["bf16"] + runs["fp8"])
    assert abs(runs["fp8"][-1] - runs["bf16"][-1]) < 0.02 * runs["bf16"][-1]  # FP8 tracks bf16
    assert runs["fp8-unsafe"][-1] != runs["fp8"][-1]  # the same first step, then wrong weight gradients
    assert (tmp_path / "losses.csv").read_text().startswith("step,run,loss")


def test_compare_names_the_ignored_flag_of_that_producer(tmp_path):
    """The producer of the example, run through quantlay compare against the spec it claims to implement
    (a segmented kernel: compare passes it group lengths)."""
    import json
    from quantlay.compare import run
    from quantlay.spec import SPECS_DIR
    out = tmp_path / "r.json"
    rc = run(str(SPECS_DIR / "fp8_blockwise.ql"), "examples.moe_training.train:ignores_transpose_flag",
             str(ROOT / "examples" / "moe_training" / "binding.toml"), ((256, 256),), json_path=str(out),
             classes={"normal": __import__("quantlay").inputs.normal}, time_it=False)
    report = json.loads(out.read_text())
    text = " | ".join(o["diagnosis"] for c in report["classes"] for o in c["outputs"] if not o["exact"])
    assert rc == 1 and "omits the transpose stage" in text and "unexplained" not in text, text
    assert "`segments(128)|row_major`, the spec says `segments(128)|transpose`" in text
