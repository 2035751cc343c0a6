"""The PyTorch reference: an interpreter of the IR, written for clarity, not speed.

It reads the same IR as the lowering but shares no code with the templates: numerics come from the
formats' reference methods (nearest grid value, exact log2) and layouts from the layout algebra's torch
transform (pad, view, permute). Tests, `quantlay verify` and `quantlay compare` judge generated kernels
against it, bit for bit.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F

from .ir import DirectionIR, OutputIR, VariantIR
from .layout import COLS, ROWS


def block_amax(x: torch.Tensor, d: DirectionIR) -> Tuple[torch.Tensor, torch.Tensor]:
    """(amax per block, padded x) for a 2-D fp32 input; partial blocks are padded with zeros."""
    M, N = x.shape
    B = d.block_size
    if d.block2d:
        xp = F.pad(x, (0, (-N) % B, 0, (-M) % B))
        blocks = xp.reshape(xp.shape[0] // B, B, xp.shape[1] // B, B).permute(0, 2, 1, 3).reshape(
            xp.shape[0] // B, xp.shape[1] // B, B * B)
        red = 2
    elif d.block_axis == COLS:
        xp = F.pad(x, (0, (-N) % B))
        blocks = xp.reshape(M, -1, B)
        red = 2
    else:
        xp = F.pad(x, (0, 0, 0, (-M) % B))
        blocks = xp.reshape(-1, B, N)
        red = 1
    nan = torch.isnan(blocks)
    amax = torch.where(nan, torch.zeros_like(blocks), blocks.abs()).amax(dim=red)
    if d.scale.nan_in_amax == "propagate":
        amax = torch.where(nan.any(dim=red), torch.full_like(amax, float("nan")), amax)
    return amax, xp


def tensor_scale_of(variant: VariantIR, x: torch.Tensor, given=None) -> Optional[torch.Tensor]:
    """The per-tensor fp32 scale (1 element) of a two-level kernel: `given`, else amax(x) / divisor; None
    for kernels without one."""
    d = next((d for d in variant.directions if d.scale.tensor_scale), None)
    if d is None:
        return None
    if given is not None:
        return given.float().reshape(1)
    return (x.abs().amax().float() / d.scale.tensor_scale_divisor(d.element)).reshape(1)


def quantize_direction(x: torch.Tensor, d: DirectionIR, ts=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Logical codes [M, N] (uint8, one code per element) and stored scales for one direction."""
    M, N = x.shape
    amax, xp = block_amax(x, d)
    e, mult = d.scale.scales_reference(amax, d.element, *((ts,) if d.scale.tensor_scale else ()))
    B = d.block_size
    full = mult
    if d.block[1] > 1:
        full = full.repeat_interleave(B, dim=1)
    if d.block[0] > 1:
        full = full.repeat_interleave(B, dim=0)
    q = xp * full  # fp32 * power of two: the kernel's exact product
    codes = d.element.encode_reference(q)[:M, :N]
    return codes, e


def pack(codes: torch.Tensor, axis: int, low: str, bits: int = 4) -> torch.Tensor:
    """Packed codes along `axis`. 4-bit: two per byte, `low` says whether the even element is the low
    nibble. 6-bit: four in three bytes, one little-endian 24-bit word per group with the first code
    (low: first) or the last (low: last) in its lowest bits."""
    if bits == 4:
        a, b = (codes[0::2], codes[1::2]) if axis == ROWS else (codes[:, 0::2], codes[:, 1::2])
        if low == "odd":
            a, b = b, a
        return (a | (b << 4)).to(torch.uint8)
    c = (codes.t() if axis == ROWS else codes).to(torch.int32)
    g = c.reshape(c.shape[0], -1, 4)
    if low == "last":
        g = g.flip(-1)
    w = g[..., 0] | (g[..., 1] << 6) | (g[..., 2] << 12) | (g[..., 3] << 18)
    out = torch.stack((w & 0xFF, (w >> 8) & 0xFF, w >> 16), dim=-1).reshape(c.shape[0], -1).to(torch.uint8)
    return out.t() if axis == ROWS else out


def unpack(packed: torch.Tensor, axis: int, low: str, bits: int = 4) -> torch.Tensor:
    if bits == 4:
        lo, hi = packed & 0xF, packed >> 4
        if low == "odd":
            lo, hi = hi, lo
        st = torch.stack((lo, hi), dim=axis + 1)
        shape = list(packed.shape)
        shape[axis] *= 2
        return st.reshape(shape)
    b = (packed.t() if axis == ROWS else packed).to(torch.int32)
    b = b.reshape(b.shape[0], -1, 3)
    w = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16)
    g = torch.stack([(w >> (6 * j)) & 0x3F for j in range(4)], dim=-1)
    if low == "last":
        g = g.flip(-1)
    out = g.reshape(b.shape[0], -1).to(torch.uint8)
    return out.t() if axis == ROWS else out


def segment_rows(x2: torch.Tensor, group_lens, B: int):
    """docs/formats-and-layouts.md §4: each group's rows padded with zero rows to a multiple of B, in an upper-bound
    buffer of (cdiv(M, B) + G) * B rows; returns (padded rows, padded offsets [G+1])."""
    lens = [int(v) for v in torch.as_tensor(group_lens).cpu().tolist()]
    rows = (-(-x2.shape[0] // B) + len(lens)) * B
    out = torch.zeros(rows, x2.shape[1], dtype=x2.dtype, device=x2.device)
    offs, src, dst = [0], 0, 0
    for n in lens:
        out[dst:dst + n] = x2[src:src + n]
        src += n
        dst += -(-n // B) * B
        offs.append(dst)
    return out, torch.tensor(offs, dtype=torch.int64)


def quantize(variant: VariantIR, x: torch.Tensor, groups=None, tensor_scale=None) -> Dict[str, torch.Tensor]:
    """Reference outputs of `variant` for input `x` (and group lengths, for segmented kernels; the given
    per-tensor scale, for two-level kernels: else computed from x)."""
    x2 = x.reshape(-1, x.shape[-1]).float()  # stays on x's device: the GPU tests check big shapes
    ts = tensor_scale_of(variant, x.reshape(-1, x.shape[-1]), tensor_scale)  # as the kernel's launcher computes it
    out: Dict[str, torch.Tensor] = {}
    for d in variant.directions:
        if d.segmented:
            xs, offs = segment_rows(x2, groups, d.block[0])
            codes, e = quantize_direction(xs, d, ts)
            e[int(offs[-1]) // d.block[0]:] = 0  # blocks past the last group hold zero scales
        else:
            codes, e = quantize_direction(x2, d, ts)
        data = variant.output(f"{d.name}_data")
        scale = variant.output(f"{d.name}_scale")
        logical = (pack(codes, data.pack_axis, data.pack_low, data.pack_bits) if data.pack_axis is not None
                   else codes)
        out[data.key] = data.chain.apply(logical.to(torch.uint8))
        out[scale.key] = scale.chain.apply(e if d.scale.storage == "f32" else e.to(torch.uint8))
    if ts is not None:
        out["tensor_scale"] = ts
    return out


def logical_view(o: OutputIR, physical: torch.Tensor, M: int, N: int, G: int = 0) -> torch.Tensor:
    """Undo an output's layout: its logical matrix (codes unpacked for data, bytes for scales); G: the
    group count of a segmented output."""
    rows, cols = (int(v.evaluate({"M": M, "N": N, "G": G})) for v in o.logical)
    t = o.chain.invert(physical, rows, cols)
    if o.pack_axis is not None:
        t = unpack(t, o.pack_axis, o.pack_low, o.pack_bits)
    return t


def dequantize(variant: VariantIR, direction: str, outputs: Dict[str, torch.Tensor], M: int, N: int):
    """fp32 [M, N] from one direction's data and scales (and outputs["tensor_scale"], for two-level
    kernels: every block scale times it) (the reference for dequantize kernels)."""
    d = variant.direction(direction)
    codes = logical_view(variant.output(f"{direction}_data"), outputs[f"{direction}_data"], M, N)
    e = logical_view(variant.output(f"{direction}_scale"), outputs[f"{direction}_scale"], M, N)
    scale = d.scale.dequant_reference(e)
    if d.scale.tensor_scale:
        scale = scale * outputs["tensor_scale"].float().reshape(()).to(scale.device)
    full = scale
    if d.block[1] > 1:
        full = full.repeat_interleave(d.block[1], dim=1)
    if d.block[0] > 1:
        full = full.repeat_interleave(d.block[0], dim=0)
    full = full[:M, :N]
    return d.element.decode(codes[:M, :N]) * full


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (same shape and dtype); for floats any NaN equals any NaN (payloads are not
    defined). Integer tensors (codes, E8M0 bytes) compare exactly."""
    a, b = a.cpu(), b.cpu()
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    na, nb = torch.isnan(a), torch.isnan(b)
    if not torch.equal(na, nb):
        return False
    ia = torch.where(na, torch.zeros_like(a), a).view(torch.int32)
    ib = torch.where(nb, torch.zeros_like(b), b).view(torch.int32)
    return torch.equal(ia, ib)


# ---- GEMMs ---------------------------------------------------------------------------------------
def operand_matrix(op, data: torch.Tensor, scale: torch.Tensor, shape, G: int = 1) -> torch.Tensor:
    """A GEMM operand dequantized through its producer's layouts: fp32 [free, contraction] (the
    producer's logical matrix, transposed for a colwise operand; segment padding rows included)."""
    env = {"M": shape[0], "N": shape[1], "G": G}
    d = op.direction

    def logical(o, physical):
        rows, cols = (int(v.evaluate(env)) for v in o.logical)
        return o.chain.invert(physical, rows, cols)
    codes = logical(op.data, data)
    s = d.scale.dequant_reference(logical(op.scale, scale))
    if d.block[0] > 1:
        s = s.repeat_interleave(d.block[0], dim=0)
    if d.block[1] > 1:
        s = s.repeat_interleave(d.block[1], dim=1)
    x = d.element.decode(codes) * s[:codes.shape[0], :codes.shape[1]]
    return x if op.contraction_axis == COLS else x.t()


def gemm(g, a, b, offsets=None) -> torch.Tensor:
    """The reference of a generated GEMM: each operand dequantized through its layouts, then an
    fp64 matmul (exact for exact inputs), returned as fp32. `a`, `b`: the producers' QuantizedResults."""
    G = offsets.numel() - 1 if offsets is not None else 1

    def matrix(op, res):
        data, scale = res[op.data.key], res[op.scale.key]
        return operand_matrix(op, data.tensor, scale.tensor, data.layout.shape, G).double()
    A, B = matrix(g.a, a), matrix(g.b, b)
    if g.groups is None:
        return (A @ B.t()).float()
    offs = [int(v) for v in offsets.cpu().tolist()]
    if g.groups == "contraction":  # A [M, T], B [N, T]: each group's tokens
        return torch.stack([A[:, offs[i]:offs[i + 1]] @ B[:, offs[i]:offs[i + 1]].t() for i in range(G)]).float()
    # rows: b's G matrices are stacked along its producer's rows (its free axis, or its contraction axis)
    y = torch.zeros(A.shape[0], B.shape[0] // G if g.b.contraction_axis == COLS else B.shape[0],
                    dtype=torch.float64, device=A.device)
    K = A.shape[1]
    for i in range(G):
        Bg = B.reshape(G, -1, K)[i] if g.b.contraction_axis == COLS else B[:, i * K:(i + 1) * K]
        y[offs[i]:offs[i + 1]] = A[offs[i]:offs[i + 1]] @ Bg.t()
    return y.float()
