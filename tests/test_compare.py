"""`quantlay compare` against three buggy hand-written kernels and a correct one (interpreter on CPU)."""
import json
from pathlib import Path

import pytest
import torch

from quantlay import inputs
from quantlay.cli import main

from conftest import MXFP4_SPEC

ROOT = Path(__file__).resolve().parents[1]
BINDING = ROOT / "examples" / "compare" / "binding.toml"
MOD = "examples.compare.handwritten_mxfp4"
CLASSES = {k: inputs.COMPARE_CLASSES[k] for k in ("normal", "ties")}


@pytest.fixture(autouse=True)
def in_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


_GENERATED = {}  # (module, input bytes) -> its outputs: many tests compare hand-written kernels on the same inputs


class _Remembered:
    """A generated module whose quantize runs once per input in this process (the interpreter's time is the
    suite's; the hand-written kernels, the subject of these tests, still run every time)."""

    def __init__(self, mod):
        self._mod = mod

    def __getattr__(self, name):
        return getattr(self._mod, name)

    def quantize(self, x, *args, **kw):
        key = (self._mod.NAME, x.dtype, tuple(x.shape), x.cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes(),
               tuple(a.cpu().numpy().tobytes() for a in args), tuple(sorted(kw.items())))
        if key not in _GENERATED:
            _GENERATED[key] = self._mod.quantize(x, *args, **kw)
        return _GENERATED[key]


@pytest.fixture(autouse=True)
def remembered_generated_outputs(monkeypatch):
    import quantlay.generated as generated
    find = generated.find
    monkeypatch.setattr(generated, "find", lambda *a, **kw: _Remembered(find(*a, **kw)))


def run_compare(fn, tmp_path, classes=CLASSES):
    from quantlay.compare import run
    out = tmp_path / "report.json"
    rc = run(str(MXFP4_SPEC), f"{MOD}:{fn}", str(BINDING), ((128, 256),), json_path=str(out), classes=classes)
    return rc, json.loads(out.read_text())


def diagnoses(report):
    return {o["key"]: o["diagnosis"] for c in report["classes"] for o in c["outputs"] if not o["exact"]}


def test_correct_kernel_is_bit_exact_on_every_input_class(tmp_path):
    rc, report = run_compare("cast_transpose_mxfp4", tmp_path, classes=inputs.COMPARE_CLASSES)
    assert rc == 0
    assert {c["class"] for c in report["classes"]} == set(inputs.COMPARE_CLASSES)
    assert all(o["exact"] for c in report["classes"] for o in c["outputs"])


def test_ignored_data_shuffle_is_diagnosed_as_a_layout_flag(tmp_path):
    rc, report = run_compare("cast_transpose_ignores_colwise_shuffle", tmp_path)
    assert rc == 1
    d = diagnoses(report)
    assert set(d) == {"colwise_data"}  # the scale swizzle was applied, so scales match
    assert d["colwise_data"].startswith(
        "colwise data is in `transpose|packed(low=even)`, the spec with shuffle_columnwise_data=true says "
        "`transpose|packed(low=even)|preshuffle16x16`: the hand-written kernel ignores shuffle_columnwise_data")
    assert "unexplained" not in d["colwise_data"]


def test_tie_rounding_is_diagnosed(tmp_path):
    rc, report = run_compare("cast_transpose_ties_away", tmp_path)
    assert rc == 1
    d = diagnoses(report)
    assert set(d) == {"rowwise_data", "colwise_data"}
    assert "rowwise data: the hand-written kernel rounds exact midpoints away from zero (the spec: to even)" \
        in d["rowwise_data"] and "unexplained" not in d["rowwise_data"]
    first = [o["first"] for c in report["classes"] for o in c["outputs"] if o["key"] == "rowwise_data"][0]
    assert first and all(len(t) == 4 for t in first)  # (row, col, generated, hand-written)


def test_scale_mode_is_diagnosed(tmp_path):
    rc, report = run_compare("cast_transpose_rceil_scales", tmp_path, classes={"normal": inputs.normal})
    assert rc == 1
    d = diagnoses(report)
    assert "rowwise scale: the hand-written kernel selects exponents in `rceil` mode (the spec: `even`)" \
        in d["rowwise_scale"]
    assert "follows from the scale difference" in d["rowwise_data"]  # the data differ because the scales do
    assert "unexplained" not in d["rowwise_data"] + d["rowwise_scale"]


def test_usage_errors_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('kernel = "mxfp4_cast_transpose_hv"\n[outputs]\nrowwise_data = 0\n')
    args = ["compare", str(MXFP4_SPEC), "--against", f"{MOD}:cast_transpose_mxfp4", "--binding"]
    assert main(args + [str(bad)]) == 2
    assert "did you mean 'mxfp4_cast_transpose_hw'?" in capsys.readouterr().err
    assert main(["compare", str(MXFP4_SPEC), "--against", "nope.module:fn", "--binding", str(BINDING)]) == 2
    assert "cannot import 'nope.module'" in capsys.readouterr().err
    bad.write_text('kernel = "mxfp4_cast_transpose_hw"\n[outputs]\nrowwise_dat = 0\n')
    assert main(args + [str(bad)]) == 2
    assert "did you mean 'rowwise_data'?" in capsys.readouterr().err


# ---- a battery of kernels wrong in several ways at once -------------------------------------------------
CAUSES = {  # the defect each switch plants -> what the diagnosis must say
    "honour_col_shuffle": "ignores shuffle_columnwise_data",
    "honour_row_shuffle": "ignores shuffle_rowwise_data",
    "honour_swizzle": "ignores with_gemm_swizzled_scales",
    "ties_away": "rounds exact midpoints away from zero",
    "rceil": "selects exponents in `rceil` mode",
    "floor": "selects exponents in `floor` mode",
    "log2": "an approximate log2/exp2",
    "nan_ignored": "ignores NaN in the block maximum",
    "signed_zero": "encodes the sign of zero results as `sign_bit`",
    "fill_padding": "padding left unwritten",
}
BATTERY_CLASSES = {"ties": inputs.ties, "nan": inputs.nans, "specials": inputs.specials}


def _battery():
    from examples.compare.handwritten_mxfp4 import BATTERY
    return BATTERY


@pytest.mark.parametrize("name", sorted(_battery()))
def test_every_planted_cause_is_named_and_nothing_is_unexplained(name, tmp_path):
    from quantlay.compare import run
    defects = _battery()[name]
    assert 2 <= len(defects) <= 4
    binding = ROOT / "examples" / "compare" / ("binding_buffers.toml" if "fill_padding" in defects else "binding.toml")
    out = tmp_path / "report.json"
    rc = run(str(MXFP4_SPEC), f"{MOD}:battery_{name}", str(binding), ((64, 128),), json_path=str(out),
             classes=BATTERY_CLASSES, time_it=False)
    report = json.loads(out.read_text())
    text = " | ".join(o["diagnosis"] for c in report["classes"] for o in c["outputs"] if not o["exact"])
    assert rc == 1
    for switch in defects:
        assert CAUSES[switch] in text, f"{name}: {switch} not named in: {text}"
    assert "unexplained" not in text, text
    for key, tally in report["summary"].items():  # the summary accounts for every differing value
        assert tally["unexplained"] == 0 and sum(tally["causes"].values()) == tally["differing"], key


def test_an_mxfp8_kernel_that_does_not_saturate(tmp_path):
    """E5M2 codes past the largest finite value: a kernel that writes Inf there (a plain conversion on
    the GPU) is named, beside its FLOOR exponents and its ignored scale swizzle; its correct sibling is
    bit-exact on every input class."""
    from quantlay.compare import run
    from quantlay.spec import SPECS_DIR
    binding = ROOT / "examples" / "compare" / "binding_mxfp8.toml"
    mod = "examples.compare.handwritten_mxfp8"
    out = tmp_path / "r.json"
    assert run(str(SPECS_DIR / "mxfp8.ql"), f"{mod}:cast_mxfp8_e5m2", str(binding), ((64, 128),),
               json_path=str(out), time_it=False) == 0
    rc = run(str(SPECS_DIR / "mxfp8.ql"), f"{mod}:cast_mxfp8_e5m2_unsaturated_floor_plain", str(binding),
             ((64, 128),), json_path=str(out), classes={"normal": inputs.normal, "inf": inputs.infs},
             time_it=False)
    report = json.loads(out.read_text())
    text = " | ".join(o["diagnosis"] for c in report["classes"] for o in c["outputs"] if not o["exact"])
    assert rc == 1 and "unexplained" not in text, text
    for cause in ("does not saturate: values past 57344 and Inf become Inf", "selects exponents in `floor` mode",
                  "ignores with_gemm_swizzled_scales"):
        assert cause in text, text
