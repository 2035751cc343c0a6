"""E2M1 and E8M0 reference numerics against docs/formats-and-layouts.md sections 1 and 2."""
import math

import pytest
import torch

from quantlay.formats import E2M1, E8M0, element_formats

GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # docs/formats-and-layouts.md §1: magnitudes of codes 0..7
MIDS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
# docs/formats-and-layouts.md §1: result of each midpoint under each tie rule
TIE_TABLE = {
    "even": [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0],
    "away": [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0],
    "zero": [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0],
}


@pytest.mark.parametrize("ties", ["even", "away", "zero"])
def test_every_representable_value_round_trips(ties):
    fmt = E2M1(ties=ties, zero_sign="sign_bit")
    for code, v in enumerate(GRID):
        for sign in (1.0, -1.0):
            c = int(fmt.encode_reference(torch.tensor([sign * v]))[0])
            assert c == code | (8 if sign < 0 else 0), (v, sign, c)
            assert float(E2M1.decode(torch.tensor([c]))[0]) == sign * v


@pytest.mark.parametrize("ties", ["even", "away", "zero"])
def test_every_midpoint_under_each_tie_rule(ties):
    fmt = E2M1(ties=ties, zero_sign="sign_bit")
    got = E2M1.decode(fmt.encode_reference(torch.tensor(MIDS))).tolist()
    assert got == TIE_TABLE[ties]
    neg = E2M1.decode(fmt.encode_reference(-torch.tensor(MIDS))).tolist()
    assert neg == [-v for v in TIE_TABLE[ties]]


def test_between_midpoints_all_rules_agree():
    x = torch.tensor([0.1, 0.3, 0.6, 0.9, 1.1, 1.4, 1.6, 1.9, 2.2, 2.7, 3.2, 3.8, 4.4, 5.5, 5.99])
    codes = [E2M1(ties=t).encode_reference(x) for t in ("even", "away", "zero")]
    assert torch.equal(codes[0], codes[1]) and torch.equal(codes[1], codes[2])


def test_saturation_inf_nan_and_sign_of_zero():
    x = torch.tensor([7.0, 100.0, float("inf"), -float("inf"), float("nan"), -0.0, -0.1, 0.0])
    assert E2M1(zero_sign="sign_bit", nan=0x7).encode_reference(x).tolist() == [7, 7, 7, 15, 7, 8, 8, 0]
    assert E2M1(zero_sign="negative_only", nan=0).encode_reference(x).tolist() == [7, 7, 7, 15, 0, 0, 8, 0]
    assert E2M1(zero_sign="positive", nan=0).encode_reference(x).tolist() == [7, 7, 7, 15, 0, 0, 0, 0]


# docs/formats-and-layouts.md §2, FP4 columns: amax -> e under floor, ceil, even, rceil
E8M0_TABLE = [
    (1.0, 125, 125, 125, 125), (1.5, 125, 126, 125, 125), (1.74, 125, 126, 125, 126),
    (1.75, 125, 126, 126, 126), (2.0, 126, 126, 126, 126), (3.0, 126, 127, 126, 126),
    (6.0, 127, 128, 127, 127), (7.0, 127, 128, 128, 128), (448, 133, 134, 134, 134),
    (500, 133, 134, 134, 134),
]


@pytest.mark.parametrize("col,mode", list(enumerate(["floor", "ceil", "even", "rceil"], start=1)))
def test_e8m0_worked_examples(col, mode):
    amax = torch.tensor([row[0] for row in E8M0_TABLE], dtype=torch.float32)
    got = E8M0(mode=mode).select_reference(amax, E2M1()).tolist()
    assert got == [row[col] for row in E8M0_TABLE]


@pytest.mark.parametrize("mode", ["floor", "ceil", "even", "rceil"])
def test_e8m0_special_amax(mode):
    fmt = E8M0(mode=mode, zero_amax=127, inf_amax=254, nan_amax=255)
    sub = torch.tensor([1e-40], dtype=torch.float32)  # fp32 subnormal
    amax = torch.tensor([0.0, float("inf"), float("nan")], dtype=torch.float32)
    assert fmt.select_reference(amax, E2M1()).tolist() == [127, 254, 255]
    assert fmt.select_reference(sub, E2M1()).tolist() == [0]  # clamps at the low end
    assert E8M0(mode=mode).select_reference(torch.tensor([0.0]), E2M1()).tolist() == [0]


def test_e8m0_clamp_and_multiplier():
    fmt = E8M0(mode="floor", clamp=(0, 254))
    big = torch.tensor([3.0e38], dtype=torch.float32)
    assert fmt.select_reference(big, E2M1()).tolist() == [min(254, 127 + math.floor(math.log2(3e38)) - 2)]
    e = torch.tensor([0, 1, 127, 253, 254, 255], dtype=torch.uint8)
    m = fmt.multiplier_reference(e)
    assert m[:5].tolist() == [2.0 ** 127, 2.0 ** 126, 1.0, 2.0 ** -126, 2.0 ** -127]
    assert math.isnan(m[5])
    assert E8M0(e0_multiplier="one").multiplier_reference(e)[0] == 1.0
    d = E8M0.dequant_reference(e)
    assert d[:5].tolist() == [2.0 ** -127, 2.0 ** -126, 1.0, 2.0 ** 126, 2.0 ** 127]


def test_worked_block_example():
    """docs/formats-and-layouts.md §1: [3.0, -0.7, 12.9, 0.05] under EVEN -> bytes 0x93, 0x07; under RCEIL -> 0x82, 0x05."""
    x = torch.tensor([3.0, -0.7, 12.9, 0.05])
    amax = x.abs().max().reshape(1)
    for mode, e_want, bytes_want in (("even", 128, [0x93, 0x07]), ("rceil", 129, [0x82, 0x05])):
        sc = E8M0(mode=mode)
        e = sc.select_reference(amax, E2M1())
        assert int(e) == e_want
        codes = E2M1(ties="even", zero_sign="sign_bit").encode_reference(x * sc.multiplier_reference(e))
        assert [int(codes[0] | codes[1] << 4), int(codes[2] | codes[3] << 4)] == bytes_want


def test_bf16x2_encoder_only_where_its_rules_hold():
    """The bf16x2 PTX encoder implements these rule sets on bf16 input: E2M1 ties to even or away under a
    power of two (a sign for every q < 0, NaN as code 0, NaN by block; square blocks too), E2M3 and E3M2 the
    same with x's sign bit (MXFP6) and, from an fp32 multiplier, E2M1 ties to even with the sign bit under an
    E4M3 block scale (NVFP4); every other kernel keeps the fp32 encoders."""
    from quantlay.lower import lower
    from quantlay.spec import load, shipped_kernels
    kernels = shipped_kernels()

    def flags(k):
        return {c["name"]: c["bf16x2"] for c in lower(k.variants()[0])["directions"]}

    assert flags(kernels["mxfp4_cast_transpose_hw"]) == {"rowwise": True, "colwise": True}
    assert flags(kernels["mxfp4_cast_transpose_te"]) == {"rowwise": True, "colwise": True}  # ties away: the tie lift
    assert flags(kernels["nvfp4"]) == flags(kernels["nvfp4_block_only"]) == {"rowwise": True, "colwise": True}
    assert flags(kernels["mxfp6_e2m3"]) == flags(kernels["mxfp6_e3m2"]) == {"rowwise": True, "colwise": True}
    assert not any(v for n, k in kernels.items() if not n.startswith(("mxfp4", "nvfp4", "mxfp6")) for v in flags(k).values())
    fp16 = load("""kernel fp4_fp16(x: fp16[M, N]) {
        rowwise blocks 1x32 profile mxfp4_hw {
            store data  as packed(low: even)
            store scale as row_major
        }
    }""")[0]
    assert flags(fp16) == {"rowwise": False}  # x * 2^k is exact in bf16 only for bf16 input
    assert flags(kernels["mxfp4_32x32_hw"]) == {"rowwise": True, "colwise": True}  # square blocks' element pairs
    six_square = load("""kernel fp6_square(x: bf16[M, N]) {
        rowwise blocks 32x32 profile mxfp6_e2m3_floor {
            store data  as packed(low: first)
            store scale as row_major
        }
    }""")[0]
    assert flags(six_square) == {"rowwise": False}  # 6-bit square blocks: the fp32 encoder (no GPU test runs them)
    assert E2M1(ties="even", zero_sign="negative_only", nan=0).bf16x2_rules
    assert E2M1(ties="away", zero_sign="negative_only", nan=0).bf16x2_rules
    for other in (dict(zero_sign="sign_bit"), dict(nan=7), dict(ties="zero")):
        assert not E2M1(**{"ties": "even", "zero_sign": "negative_only", "nan": 0, **other}).bf16x2_rules
    for six in (element_formats()["e2m3"], element_formats()["e3m2"]):  # 6-bit codes: x's sign bit, NaN as code 0
        assert six(ties="even", zero_sign="sign_bit", nan=0).bf16x2_rules
        for other in (dict(zero_sign="negative_only"), dict(nan=0x20), dict(ties="zero")):
            assert not six(**{"ties": "even", "zero_sign": "sign_bit", "nan": 0, **other}).bf16x2_rules
    assert E2M1(ties="even", zero_sign="sign_bit", nan=4).bf16x2_fp32_rules
    assert not E2M1(ties="away", zero_sign="sign_bit").bf16x2_fp32_rules
    assert not E2M1(ties="even", zero_sign="negative_only").bf16x2_fp32_rules


def test_the_declared_e2m1_has_the_documented_grid():
    assert E2M1.grid() == GRID and E2M1.bits == 4 and E2M1().nan == 0x7
