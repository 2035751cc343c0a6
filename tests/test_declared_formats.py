"""Element formats are declarations in the language (dsl/library.ql): a spec can declare its own
minifloat and use it with no Python change; the declarations' rules are checked with positioned errors."""
import pytest
import torch

import quantlay
from quantlay import inputs, reference
from quantlay import spec as specmod
from quantlay.errors import SpecError

from conftest import DEVICE

E3M4_SPEC = """
format e3m4 = minifloat(exponent: 3, mantissa: 4, bias: 3, max_code: 0x7F)

profile fp8_e3m4 {
    element e3m4(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale e8m0(mode: rceil, clamp: 0..254, zero_amax: 0, inf_amax: 254, nan_amax: 255)
}

kernel mx_e3m4(x: bf16[M, N]) {
    rowwise blocks 1x32 profile fp8_e3m4 {
        store data  as row_major
        store scale as row_major
    }
    colwise blocks 32x1 profile fp8_e3m4 {
        store data  as row_major
        store scale as transpose
    }
}
"""


def test_the_library_declares_the_shipped_formats():
    lib = specmod.library_formats()
    assert {"e2m1", "e4m3", "e5m2"} <= set(lib)
    e4m3, e5m2 = lib["e4m3"](), lib["e5m2"]()
    assert e4m3.max_value == 448.0 and e5m2.max_value == 57344.0 and e4m3.hw_convert == "tl.float8e4nv"
    assert torch.isinf(lib["e5m2"].decode(torch.tensor([0x7C])))[0]


def test_a_format_declared_in_a_spec_compiles_and_matches_the_reference():
    """E3M4 (bias 3, max 31) is no shipped format: declared in the spec, the kernel is bit-exact."""
    mod = quantlay.build(E3M4_SPEC)
    variant = specmod.load(E3M4_SPEC)[0].variant()
    assert variant.directions[0].element.max_value == 31.0
    for cls in ("normal", "ties", "specials"):
        x = getattr(inputs, cls)(64, 96, seed=1).to(DEVICE)
        res, ref = mod.quantize(x), reference.quantize(variant, x)
        for key in ref:
            assert reference.same_values(res[key].tensor, ref[key]), (cls, key)


@pytest.mark.parametrize("decl,message", [
    ("format e9 = minifloat(exponent: 5, mantissa: 3, bias: 15, max_code: 0x7F)", r"9 bits; codes are at most 8"),
    ("format f6 = minifloat(exponent: 2, mantissa: 3, bias: 1, max_code: 0x3F)", r"max_code 0x3f is not a 6-bit magnitude code"),
    ("format f = minifloat(exponent: 2, mantissa: 1, bias: 1)", r"does not say its max_code"),
    ("format f = minifloat(exponent: 2, mantisa: 1, bias: 1, max_code: 7)", r"minifloat has no setting 'mantisa'"),
    ("format f = posit(bits: 8)", r"formats are declared as minifloat"),
    ("format e4m3 = minifloat(exponent: 4, mantissa: 3, bias: 7, max_code: 0x7E)", r"format 'e4m3' is already declared"),
])
def test_bad_declarations_are_refused_with_their_position(decl, message):
    with pytest.raises(SpecError, match=message) as exc:
        specmod.load(decl + "\n")
    assert exc.value.line == 1 and "^" in str(exc.value)


def test_a_six_bit_format_declared_in_a_spec_is_stored_packed():
    """A 6-bit minifloat the library does not ship: four codes in three bytes, bit-exact with the reference."""
    spec = """
format e1m4 = minifloat(exponent: 1, mantissa: 4, bias: 1, max_code: 0x1F)
kernel mx_e1m4(x: bf16[M, N]) {
    rowwise blocks 1x32 {
        element e1m4(ties: even, zero_sign: sign_bit, nan: 0x0)
        scale e8m0(mode: floor, clamp: 0..255, zero_amax: 0, inf_amax: 255, nan_amax: 255)
        store data as packed(low: first)
        store scale as row_major
    }
}
"""
    import quantlay
    mod = quantlay.build(spec)
    for cls in ("normal", "ties", "subnormals", "nans"):
        x = getattr(inputs, cls)(32, 64, seed=2)
        res = mod.quantize(x)
        ref = reference.quantize(specmod.load(spec)[0].variant(), x)
        assert all(reference.same_values(res[k].tensor, ref[k]) for k in ref), cls
    with pytest.raises(SpecError, match=r"needs exactly one 'packed\(...\)' step \(four 6-bit codes") as exc:
        specmod.load(spec.replace("packed(low: first)", "row_major"))
    assert exc.value.line == 7
