"""A small model of the PTX instructions the generated bf16x2 encoders use, to run their asm on the CPU.

Triton's interpreter cannot run inline PTX, so CPU tests execute the generated asm text with this model
instead: bf16 arithmetic is exact in float64 and rounded to bf16 (nearest, ties to even, subnormals
kept, NaN results canonical 0x7FFF), f16 likewise; an fma rounds once (its operands' product and sum are
exact in float64 for the encoders' operands: powers of two, small integers, codes), .relu makes a negative
result +0; abs clears the sign bit; min/max return the non-NaN operand; compares are ordered; fp32
products are IEEE's (NaN canonical 0x7FFFFFFF). These are the PTX ISA's rules
for sm_90 bf16x2 arithmetic; the GPU test of the same encoders checks that the hardware agrees.
"""
import re

import torch

BF16_MAX = 3.3895313892515355e38


def _val(h: torch.Tensor) -> torch.Tensor:
    """16-bit patterns (int64) -> float64 values."""
    return (h.to(torch.int32) << 16).view(torch.float32).to(torch.float64)


def _round(v: torch.Tensor) -> torch.Tensor:
    """float64 -> bf16 pattern (int64): nearest, ties to even, subnormals; NaN -> 0x7FFF."""
    r = _nearest(v, 7, -126, BF16_MAX)
    bits = (r.to(torch.float32).view(torch.int32).to(torch.int64) >> 16) & 0xFFFF  # exact: r is a bf16 value
    return torch.where(torch.isnan(v), torch.full_like(bits, 0x7FFF), bits)


def _nearest(v: torch.Tensor, mbits: int, emin: int, vmax: float) -> torch.Tensor:
    """float64 -> the nearest value with mbits mantissa bits and exponent at least emin (ties to even,
    subnormals, overflow to Inf), as float64."""
    a = v.abs()
    e = torch.floor(torch.log2(torch.where(a > 0, a, torch.ones_like(a)))).clamp(min=emin)
    quantum = torch.pow(2.0, e - mbits)
    r = torch.round(v / quantum) * quantum  # torch.round: half to even
    r = torch.where(r.abs() > vmax, torch.copysign(torch.full_like(r, float("inf")), r), r)
    r = torch.where(torch.isfinite(v), r, v)
    return torch.where(v == 0, v, r)  # keeps the sign of zero


def _hval(h: torch.Tensor) -> torch.Tensor:
    """fp16 patterns (int64) -> float64 values."""
    return (h & 0xFFFF).to(torch.int16).view(torch.float16).to(torch.float64)


def _hround(v: torch.Tensor) -> torch.Tensor:
    """float64 -> fp16 pattern (int64): nearest, ties to even, subnormals; NaN -> 0x7FFF."""
    r = _nearest(v, 10, -14, 65504.0)
    bits = r.to(torch.float16).view(torch.int16).to(torch.int64) & 0xFFFF  # exact: r is an fp16 value
    return torch.where(torch.isnan(v), torch.full_like(bits, 0x7FFF), bits)


def _harith(fn):
    return lambda *xs: _hround(fn(*[_hval(x) for x in xs]))


def _halves3(op, a, b, c):
    out = 0
    for sh in (0, 16):
        out = out | (op((a >> sh) & 0xFFFF, (b >> sh) & 0xFFFF, (c >> sh) & 0xFFFF) << sh)
    return out


def _halves(op, a, b):
    out = 0
    for sh in (0, 16):
        out = out | (op((a >> sh) & 0xFFFF, (b >> sh) & 0xFFFF) << sh)
    return out


def _arith(fn):
    return lambda x, y: _round(fn(_val(x), _val(y)))


def _minmax(pick):
    def op(x, y):
        vx, vy = _val(x), _val(y)
        r = torch.where(pick(vx, vy), x, y)
        r = torch.where(torch.isnan(vx), y, r)
        return torch.where(torch.isnan(vy), x, r)
    return op


def _abs(x):
    """abs.bf16x2: the sign bit cleared (NaN stays NaN)."""
    return x & 0x7FFF


def _fma(relu):
    """fma.rn{.relu}.bf16x2: x * y + z rounded once; .relu: a negative result is +0 (NaN stays NaN)."""
    def op(x, y, z):
        r = _round(_val(x) * _val(y) + _val(z))
        if relu:
            r = torch.where((r & 0x8000).bool() & ((r & 0x7FFF) <= 0x7F80), 0, r)
        return r
    return op


def _set_lt(x, y):
    """set.lt.u32: 0xFFFF where x < y (ordered: false with a NaN; -0 equals +0)."""
    return torch.where(_val(x) < _val(y), 0xFFFF, 0)


def _set_eq(x, y):
    """set.eq.u32: 0xFFFF where x == y (ordered: false with a NaN; -0 equals +0)."""
    return torch.where(_val(x) == _val(y), 0xFFFF, 0)


def _lop3(a, b, c, lut):
    out = torch.zeros_like(a)
    for i in range(8):
        if lut >> i & 1:
            ta = a if i & 4 else ~a
            tb = b if i & 2 else ~b
            tc = c if i & 1 else ~c
            out = out | (ta & tb & tc)
    return out & 0xFFFFFFFF


def _prmt(a, b, sel):
    """Default mode: selector nibble i picks result byte i from the 8 bytes of (b, a); its bit 3 set
    replicates the picked byte's sign bit over the byte."""
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for i in range(4):
        nib = (sel >> (4 * i)) & 0xF
        byte = src[nib & 7]
        if nib & 8:
            byte = torch.where(byte >= 0x80, 0xFF, 0) if isinstance(byte, torch.Tensor) else (0xFF if byte >= 0x80 else 0)
        out = out | (byte << (8 * i))
    return out


def _f32(a):
    return (a & 0xFFFFFFFF).to(torch.int64).to(torch.int32).view(torch.float32)


def _mul_f32(a, b):
    """mul.rn.f32: IEEE fp32 product (subnormals kept); NaN results canonical 0x7FFFFFFF, as NVIDIA GPUs write."""
    p = _f32(a) * _f32(b)
    bits = p.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    return torch.where(torch.isnan(p), 0x7FFFFFFF, bits)




OPS = {
    "mul.rn.bf16x2": lambda a, b: _halves(_arith(torch.mul), a, b),
    "add.rn.bf16x2": lambda a, b: _halves(_arith(torch.add), a, b),
    "sub.rn.bf16x2": lambda a, b: _halves(_arith(torch.sub), a, b),
    "abs.bf16x2": lambda a: _halves(lambda x, _: _abs(x), a, a),
    "fma.rn.bf16x2": lambda a, b, c: _halves3(_fma(False), a, b, c),
    "fma.rn.relu.bf16x2": lambda a, b, c: _halves3(_fma(True), a, b, c),
    "min.bf16x2": lambda a, b: _halves(_minmax(torch.lt), a, b),
    "max.bf16x2": lambda a, b: _halves(_minmax(torch.gt), a, b),
    "set.lt.u32.bf16x2": lambda a, b: _halves(_set_lt, a, b),
    "set.eq.u32.bf16x2": lambda a, b: _halves(_set_eq, a, b),
    "and.b32": lambda a, b: a & b,
    "shl.b32": lambda a, b: (a << b) & 0xFFFFFFFF,
    "mul.rn.f32": _mul_f32,
    "min.u16x2": lambda a, b: _halves(torch.minimum, a, b),
    "max.u16x2": lambda a, b: _halves(torch.maximum, a, b),
    "max.s16x2": lambda a, b: _halves(lambda x, y: torch.where(_s16(x) >= _s16(y), x, y), a, b),
    "or.b32": lambda a, b: a | b,
    "mul.rn.f16x2": lambda a, b: _halves(_harith(torch.mul), a, b),
    "sub.rn.f16x2": lambda a, b: _halves(_harith(torch.sub), a, b),
    "fma.rn.f16x2": lambda a, b, c: _halves3(_harith(lambda x, y, z: x * y + z), a, b, c),  # exact in float64
    "add.u32": lambda a, b: (a + b) & 0xFFFFFFFF,
    "shr.u32": lambda a, b: a >> b,
    "mad.lo.u32": lambda a, b, c: (a * b + c) & 0xFFFFFFFF,
    "lop3.b32": _lop3,
    "prmt.b32": _prmt,
}


def _s16(h):
    """16-bit patterns -> their signed values."""
    return torch.where(h >= 0x8000, h - 0x10000, h)


def run(asm: str, operands, out="$0"):
    """Run an asm block; operands are int64 tensors of 32-bit register values ($0, $1, ...; the outputs'
    entries are ignored). Returns register `out` (a tuple of names: a list of those registers)."""
    regs = {f"${i}": v for i, v in enumerate(operands)}
    like = next(v for v in operands if v is not None)
    for line in asm.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        m = re.match(r"([a-z0-9.]+)\s+(.*)", line)
        op, args = m.group(1), [t.strip() for t in m.group(2).split(",")]
        vals = [regs[t] if not re.match(r"^(0x[0-9A-Fa-f]+|\d+)$", t) else int(t, 0) for t in args[1:]]
        if op == "mov.b32":
            regs[args[0]] = torch.full_like(like, vals[0]) if isinstance(vals[0], int) else vals[0]
            continue
        if op not in OPS:
            raise NotImplementedError(f"PTX model: no {op}")
        regs[args[0]] = OPS[op](*vals)
    return [regs[o] for o in out] if isinstance(out, tuple) else regs[out]


def pack_bf16(h: torch.Tensor) -> list:
    """Four-element groups of 16-bit patterns [n, 4] -> two registers (elements 0|1, 2|3)."""
    return [h[:, 0] | (h[:, 1] << 16), h[:, 2] | (h[:, 3] << 16)]
