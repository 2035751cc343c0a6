"""Element and scale formats: each format's values, rounding and special cases, defined once.

Two consumers read these definitions: the lowering (which turns them into the constants and rules the
templates emit: rounding constants, exponent-bit constants) and the PyTorch reference, which implements
the same *meaning* by a different method (nearest grid value, log2 via frexp) so that a slip in either
one shows up as a mismatch instead of being copied into both. docs/formats-and-layouts.md sections 1 and 2 are the
ground truth for every rule here.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, fields
from typing import Dict, Optional, Tuple

import torch

TIE_RULES = ("even", "away", "zero")
ZERO_SIGN_RULES = ("sign_bit", "negative_only", "positive")
E8M0_MODES = ("floor", "ceil", "even", "rceil")


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bf16_bits(x: float) -> int:
    """The bf16 pattern of a value that bf16 holds exactly (the top half of its fp32 pattern)."""
    b = f32_bits(x)
    assert b & 0xFFFF == 0, f"{x!r} is not a bf16 value"
    return b >> 16


def f32(x: float) -> float:
    """Round a Python float to the nearest fp32 value."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


@dataclass(frozen=True)
class Minifloat:
    """A small float element format: sign, `ebits` exponent bits (bias `bias`), `mbits` mantissa bits,
    subnormals, saturation to the largest finite magnitude (`max_code`). Subclasses are frozen
    dataclasses whose fields are the spec's rules: `ties`, `zero_sign`, `nan`.

    Every finite magnitude is listed in `GRID` (index = magnitude code), so the reference can round by
    nearest grid value, a method independent of the kernels (integer rounding or an fp32 magic add).
    """
    ties: str = "even"          # rounding at exact midpoints: even | away (from zero) | zero (toward)
    zero_sign: str = "sign_bit"  # sign of a result of magnitude 0: sign_bit | negative_only | positive
    nan: int = 0x7F              # the code written for a NaN input

    name = ""
    ebits = mbits = bias = max_code = bits = 0
    # The GPU's own convert for this format (Triton dtype; cvt.rn.satfinite on sm_89+): round to nearest
    # even, saturate to the largest finite magnitude (Inf too), keep the sign of zero. Kernels use it
    # only where those are this format's rules (hw_convert). Its NaN: the fp32 multiply before it returns
    # the canonical NaN 0x7FFFFFFF for any NaN operand (NVIDIA GPUs do not propagate sign or payload),
    # which the convert writes as HW_NAN; a format whose NaN code differs sets it explicitly.
    HW_DTYPE = None  # class constants, not rules: set by the format's declaration (hw: ...)
    HW_NAN = None
    INF_CODE = None  # the magnitude code of Inf, for formats that have one

    @property
    def hw_convert(self) -> Optional[str]:
        """The Triton dtype whose hardware conversion rounds exactly like this format, or None."""
        if self.HW_DTYPE and self.ties == "even" and self.zero_sign == "sign_bit":
            return self.HW_DTYPE
        return None

    @property
    def bf16x2_rules(self) -> bool:
        """Whether the bf16x2 PTX encoder under a power-of-two multiplier implements these rules: ties to
        even (the bf16 add's own rounding) or away from zero (the same add after setting the lowest bit of
        |q|'s bf16 pattern: an exact tie has it clear and moves just above the tie, and no other value
        crosses a rounding boundary), and NaN written as code 0 (a NaN block's codes are zeroed). The sign:
        4-bit codes (two to a byte) mark every q < 0 (negative_only, by a threshold compare); 6-bit codes
        (one to a byte, packed after) take x's sign bit (sign_bit: q's, under a positive multiplier)."""
        signs = {4: "negative_only", 6: "sign_bit"}
        return self.ties in ("even", "away") and self.zero_sign == signs.get(self.bits) and self.nan == 0

    @property
    def bf16x2_fp32_rules(self) -> bool:
        """Whether the bf16x2 PTX encoder's fp32-multiplier form implements these rules: the product is
        taken in fp32 and narrowed to bf16 by rounding to odd (exact for the second rounding), then ties to
        even; the sign is q's sign bit (sign_bit); a NaN block's codes are set after packing (any NaN code)."""
        return self.bits == 4 and self.ties == "even" and self.zero_sign == "sign_bit"

    @property
    def hw_nan_select(self) -> bool:
        """Whether NaN inputs need an explicit code after the hardware convert."""
        return self.nan != self.HW_NAN

    @classmethod
    def grid(cls) -> Tuple[float, ...]:
        vals = []
        for code in range(cls.max_code + 1):
            e, m = code >> cls.mbits, code & ((1 << cls.mbits) - 1)
            if e == 0:
                vals.append(m * 2.0 ** (1 - cls.bias - cls.mbits))
            else:
                vals.append((1 + m / 2 ** cls.mbits) * 2.0 ** (e - cls.bias))
        return tuple(vals)

    @property
    def max_value(self) -> float:
        return self.grid()[-1]

    @property
    def max_pow2(self) -> int:
        """P: the exponent of the largest power of two <= max (docs/formats-and-layouts.md §2)."""
        import math
        return int(math.floor(math.log2(self.max_value)))

    @property
    def sign_bit(self) -> int:
        return 1 << (self.bits - 1)

    # ---- reference (independent method: nearest grid value) --------------------------------------
    def encode_reference(self, q: torch.Tensor) -> torch.Tensor:
        """fp32 scaled values -> codes (uint8), by nearest grid value and the tie rule; saturating."""
        a = q.double().abs()
        GRID = self.grid()
        top = len(GRID) - 1
        grid = torch.tensor(GRID, dtype=torch.float64, device=q.device)
        lo = (torch.searchsorted(grid, a.clamp(max=GRID[-1]).nan_to_num(0.0), right=True) - 1).clamp(0, top)
        hi = (lo + 1).clamp(max=top)
        d_lo = a - grid[lo]
        d_hi = grid[hi] - a
        if self.ties == "even":
            tie_up = (hi % 2 == 0)
        else:
            tie_up = torch.full_like(lo, self.ties == "away", dtype=torch.bool)
        pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & tie_up)
        mag = torch.where(pick_hi, hi, lo)
        mag = torch.where(a >= GRID[-1], torch.full_like(mag, top), mag)  # saturate overflow and Inf
        neg = torch.signbit(q) if self.zero_sign == "sign_bit" else (q < 0)
        if self.zero_sign == "positive":
            neg = neg & (mag != 0)
        code = mag | (neg.to(mag.dtype) << (self.bits - 1))
        code = torch.where(torch.isnan(q), torch.full_like(code, self.nan), code)
        return code.to(torch.uint8)

    @classmethod
    def decode(cls, codes: torch.Tensor) -> torch.Tensor:
        """Codes -> fp32 values (NaN / Inf codes of formats that have them decode to NaN / Inf)."""
        n = 1 << (cls.bits - 1)
        GRID = cls.grid()
        mags = list(GRID) + [float("nan")] * (n - len(GRID))
        if cls.INF_CODE is not None:
            mags[cls.INF_CODE] = float("inf")
        table = torch.tensor(mags + [-v for v in mags], dtype=torch.float32, device=codes.device)
        return table[codes.long()]


# ---- element formats are declared in the language (dsl/library.ql) -------------------------------
# `format NAME = minifloat(exponent: E, mantissa: M, bias: B, max_code: C[, inf: I][, nan: N][, hw: T])`:
# sign + E exponent bits + M mantissa bits; C the largest finite magnitude code (codes above it are Inf,
# NaN or unused); I the magnitude code of Inf where the format has one; N the NaN code (also the default
# code written for a NaN input; else C); T the Triton fp8 dtype whose hardware convert rounds like it.
MINIFLOAT_ARGS = {"exponent": ("int", (), 1, 8), "mantissa": ("int", (), 0, 7), "bias": ("int", (), 0, 127),
                  "max_code": ("int", (), 1, 255), "inf": ("int", (), 0, 255), "nan": ("int", (), 0, 255),
                  "hw": ("name", ("float8e4nv", "float8e5"))}


_CLASSES: Dict[tuple, type] = {}


def minifloat_class(name: str, exponent: int, mantissa: int, bias: int, max_code: int,
                    inf: Optional[int] = None, nan: Optional[int] = None, hw: Optional[str] = None) -> type:
    """The element format class a `format NAME = minifloat(...)` declaration defines (its instances hold a
    profile's rules: ties, zero_sign, nan); one class per distinct declaration."""
    key = (name, exponent, mantissa, bias, max_code, inf, nan, hw)
    if key not in _CLASSES:
        _CLASSES[key] = _make_minifloat(*key)
    return _CLASSES[key]


def _make_minifloat(name, exponent, mantissa, bias, max_code, inf, nan, hw) -> type:
    from dataclasses import field, make_dataclass
    bits = 1 + exponent + mantissa
    doc = (f"{name.upper()}: sign, {exponent} exponent bits (bias {bias}), {mantissa} mantissa bits; largest "
           f"finite magnitude code {max_code:#x}" + (f", Inf {inf:#x}" if inf is not None else "") +
           (f", NaN {nan:#x}" if nan is not None else ", no NaN code") + ". Saturating.")
    cls = make_dataclass(name.upper(), [("nan", int, field(default=max_code if nan is None else nan))],
                         bases=(Minifloat,), frozen=True,
                         namespace={"name": name, "ebits": exponent, "mbits": mantissa, "bias": bias,
                                    "max_code": max_code, "bits": bits, "INF_CODE": inf, "__doc__": doc,
                                    "HW_DTYPE": f"tl.{hw}" if hw else None,
                                    "HW_NAN": nan if hw else None})
    cls.__module__ = __name__
    return cls


def element_formats() -> Dict[str, type]:
    """The element formats dsl/library.ql declares, by name."""
    from .spec import library_formats
    return library_formats()


def __getattr__(name: str):
    """E2M1, E4M3, E5M2: the library's declarations, for Python callers (tests, the reference)."""
    if name in ("E2M1", "E4M3", "E5M2"):
        return element_formats()[name.lower()]
    raise AttributeError(name)


@dataclass(frozen=True)
class E8M0:
    """Power-of-two block scale: stored byte e means 2^(e-127); 255 is NaN (docs/formats-and-layouts.md §2)."""
    mode: str = "floor"          # floor | ceil | even | rceil (docs/formats-and-layouts.md §2)
    clamp: Tuple[int, int] = (0, 254)
    zero_amax: int = 0           # e written when the block's amax is 0
    inf_amax: int = 255          # e written when the block's amax is +Inf
    nan_amax: int = 255          # e written when the block holds a NaN (propagated into amax)
    nan_in_amax: str = "propagate"  # propagate | ignore: whether NaN elements count toward amax
    e0_multiplier: str = "exact"  # quantize multiplier at e == 0: exact (2^127) | one (1.0)

    name = "e8m0"
    tensor_scale = False  # no per-tensor second level (F32Scale's option)

    def even_add(self, element) -> int:
        """The constant added to amax's bits in EVEN mode: 2^(22 - mbits)."""
        return 1 << (22 - element.mbits)

    def rceil_reciprocal(self, element) -> float:
        """fp32 1/maxpos: RCEIL multiplies by it (docs/formats-and-layouts.md §2), so its rounding is part of the rule."""
        return f32(1.0 / element.max_value)

    # ---- reference (independent method: exact log2 through frexp) --------------------------------
    def select_reference(self, amax: torch.Tensor, element) -> torch.Tensor:
        """Per-block fp32 amax -> biased exponent byte (uint8)."""
        a = amax.float()
        P = element.max_pow2
        if self.mode == "rceil":
            d = (a * torch.tensor(self.rceil_reciprocal(element), dtype=torch.float32, device=a.device)).double()
            s = _ceil_log2(d)
        else:
            a64 = a.double()
            fl = _floor_log2(a64)
            if self.mode == "floor":
                s = fl - P
            elif self.mode == "ceil":
                s = _ceil_log2(a64) - P
            else:  # even: round amax's mantissa to mbits+1 bits, ties up
                frac = a64 / torch.exp2(fl.double())  # in [1, 2)
                up = (frac >= 2.0 - 2.0 ** -(element.mbits + 1)).long()
                s = fl + up - P
        e = (s + 127).clamp(self.clamp[0], self.clamp[1])
        finite_pos = torch.isfinite(a) & (a > 0)
        e = torch.where(finite_pos, e, torch.zeros_like(e))
        e = torch.where(a == 0, torch.full_like(e, self.zero_amax), e)
        e = torch.where(torch.isinf(a), torch.full_like(e, self.inf_amax), e)
        e = torch.where(torch.isnan(a), torch.full_like(e, self.nan_amax), e)
        return e.to(torch.uint8)

    def multiplier_reference(self, e: torch.Tensor) -> torch.Tensor:
        """Quantization multiplier 2^(127-e) in fp32 (e == 0 per `e0_multiplier`, 255 -> NaN)."""
        ei = e.long()
        m = torch.ldexp(torch.ones_like(ei, dtype=torch.float64), (127 - ei)).float()
        if self.e0_multiplier == "one":
            m = torch.where(ei == 0, torch.ones_like(m), m)
        return torch.where(ei == 255, torch.full_like(m, float("nan")), m)

    storage = "e8m0"  # exponent bytes
    stored_name = "e8m0"  # the stored scale's format, as layout descriptors carry it

    def scales_reference(self, amax: torch.Tensor, element):
        """(stored scale tensor, fp32 quantization multiplier) per block."""
        e = self.select_reference(amax, element)
        return e, self.multiplier_reference(e)

    @staticmethod
    def dequant_reference(e: torch.Tensor) -> torch.Tensor:
        """Dequantization scale 2^(e-127) in fp32 (e == 0 -> 2^-127, 255 -> NaN)."""
        ei = e.long()
        m = torch.ldexp(torch.ones_like(ei, dtype=torch.float64), (ei - 127)).float()
        return torch.where(ei == 255, torch.full_like(m, float("nan")), m)


FP32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class F32Scale:
    """Per-block fp32 scaling, DeepSeek style (docs/formats-and-layouts.md §3): multiplier F / max(amax, amax_floor)
    by round-to-nearest division; an amax of 0, Inf or NaN gives multiplier 1 (NVIDIA TE's "bad amax");
    a multiplier that overflows becomes the largest fp32; `pow2` clears its mantissa (rounds it down to
    a power of two). The stored scale is the dequantization multiplier 1 / multiplier (fp32).
    Elements saturate to +-F before the cast (the element format saturates)."""
    amax_floor: float = 0.0
    pow2: bool = False
    # f_over_amax: multiplier = F / amax, stored 1 / multiplier (TE, ROCm TE, Primus).
    # amax_over_f: stored sf = amax / F, multiplier = 1 / sf (DeepGEMM); with pow2, sf is rounded UP
    # to a power of two (DeepGEMM's UE8M0, exponent clamped to 1..254).
    rule: str = "f_over_amax"
    # What the scale tensor holds: f32, the dequantization multiplier itself; ue8m0, its biased exponent
    # byte (fp32 bits >> 23, as DeepGEMM's SM100 path stores it), valid only when pow2 makes it exact;
    # e4m3 (NVFP4's UE4M3), amax / F clamped to [2^-6, 448] and rounded to E4M3, ties to even: an amax of
    # 0 or Inf clamps, NaN stays NaN (byte 0x7F), and the multiplier is 1 / the stored value.
    store: str = "f32"
    # Two-level scaling (NVFP4's): block scales are taken relative to a per-tensor fp32 scale ts =
    # amax(x) / (F * 448), passed in or computed on the device (one more pass over x, no host sync):
    # stored = E4M3(amax / F / ts), multiplier = (1 / ts) / stored. Needs store: e4m3.
    tensor_scale: bool = False

    name = "f32"
    nan_in_amax = "propagate"

    @property
    def storage(self) -> str:
        """Element type of the stored scale tensor: f32 or e8m0 (bytes)."""
        return {"ue8m0": "e8m0", "e4m3": "e4m3"}.get(self.store, "f32")

    @property
    def stored_name(self) -> str:
        """The stored scale's format name, as layout descriptors carry it."""
        return self.store

    def __repr__(self) -> str:
        """As the dataclass writes it, tensor_scale left out when off (kernel names digest this text)."""
        shown = [f for f in fields(self) if f.name != "tensor_scale" or self.tensor_scale]
        return f"F32Scale({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"

    def tensor_scale_divisor(self, element) -> float:
        """ts = amax(x) / this: the largest block scale then maps to the E4M3 maximum."""
        return f32(element.max_value) * E4M3_MAX

    def scales_reference(self, amax: torch.Tensor, element, ts: Optional[torch.Tensor] = None):
        """(stored scale, multiplier) per block, in fp32; `ts`: the per-tensor scale (tensor_scale)."""
        a = amax.float()
        floor = torch.tensor(f32(self.amax_floor), dtype=torch.float32, device=a.device)
        a = torch.where(torch.isnan(a), a, torch.maximum(a, floor))
        F = torch.tensor(f32(element.max_value), dtype=torch.float32, device=a.device)
        bad = (a == 0) | torch.isinf(a) | torch.isnan(a)
        one = torch.ones_like(a)
        if self.store == "e4m3":
            if self.tensor_scale:
                t = ts.float().reshape(()).to(a.device)
                sf = e4m3_round(torch.clamp(a / F / t, min=E4M3_MIN_NORMAL, max=E4M3_MAX))
                return e4m3_code(sf), (1.0 / t) / sf
            sf = e4m3_round(torch.clamp(a / F, min=E4M3_MIN_NORMAL, max=E4M3_MAX))
            return e4m3_code(sf), one / sf
        if self.rule == "amax_over_f":
            sf = torch.where(bad, one, a / F)
            if self.pow2:
                b = sf.view(torch.int32)
                e = ((b >> 23) + ((b & 0x7FFFFF) != 0).int()).clamp(1, 254)
                sf = (e << 23).view(torch.float32)
            return self._stored(sf), one / sf
        m = torch.where(bad, one, F / a)
        m = torch.where(torch.isinf(m), torch.full_like(m, FP32_MAX), m)
        if self.pow2:
            m = (m.view(torch.int32) & 0x7F800000).view(torch.float32)
        return self._stored(one / m), m

    def _stored(self, scale: torch.Tensor) -> torch.Tensor:
        """fp32 power-of-two scale -> what the tensor stores (the scale, or its E8M0 exponent byte)."""
        if self.store == "ue8m0":  # 2^-127 is the fp32 subnormal 0x00400000: bits >> 23 = 0, E8M0's 2^-127
            return scale.view(torch.int32) >> 23
        return scale

    def dequant_reference(self, stored: torch.Tensor) -> torch.Tensor:
        if self.store == "ue8m0":
            return E8M0.dequant_reference(stored)
        if self.store == "e4m3":
            return element_formats()["e4m3"].decode(stored.long())
        return stored.float()


E4M3_MIN_NORMAL, E4M3_MAX = 2.0 ** -6, 448.0


def e4m3_round(v: torch.Tensor) -> torch.Tensor:
    """fp32 in E4M3's normal range (or NaN) -> the nearest E4M3 value (ties to even), as fp32."""
    b = v.float().view(torch.int32)
    r = ((b + 0x7FFFF + ((b >> 20) & 1)) & ~0xFFFFF).view(torch.float32)
    return torch.where(torch.isnan(v), v.float(), r)


def e4m3_code(v: torch.Tensor) -> torch.Tensor:
    """An E4M3 normal value (fp32, exact) or NaN -> its code byte (int32); NaN -> 0x7F."""
    b = v.view(torch.int32)
    code = (((b >> 23) - 120) << 3) | ((b >> 20) & 7)
    return torch.where(torch.isnan(v), torch.full_like(code, 0x7F), code)


def _floor_log2(x: torch.Tensor) -> torch.Tensor:
    """floor(log2 x) for positive finite x, exactly (subnormals included); 0 elsewhere."""
    safe = torch.where(torch.isfinite(x) & (x > 0), x, torch.ones_like(x))
    _, ex = torch.frexp(safe)
    return ex.long() - 1


def _ceil_log2(x: torch.Tensor) -> torch.Tensor:
    safe = torch.where(torch.isfinite(x) & (x > 0), x, torch.ones_like(x))
    m, ex = torch.frexp(safe)
    return torch.where(m == 0.5, ex.long() - 1, ex.long())


SCALE_FORMATS: Dict[str, type] = {"e8m0": E8M0, "f32": F32Scale}
INPUT_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
