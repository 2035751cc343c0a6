"""Input classes that exercise every rule: random normals, exact E2M1 midpoints, special values.

Shared by `quantlay verify`, the tests and `quantlay compare`, so each sees the same hard cases.
"""
from __future__ import annotations

from typing import Callable, Dict

import torch

MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def normal(M: int, N: int, dtype=torch.bfloat16, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scale = torch.exp2(torch.randint(-8, 9, (M, 1), generator=g).float())
    return (torch.randn(M, N, generator=g) * scale).to(dtype)


def ties(M: int, N: int, dtype=torch.bfloat16, seed: int = 0) -> torch.Tensor:
    """Values that land exactly on E2M1 midpoints after power-of-two scaling, in both directions.

    Each 32x32 tile has one power of two 2^k; its diagonal holds 6 * 2^k (so every row block and
    every column block has amax 6 * 2^k, giving scale 2^k under floor, even and rceil), and every
    other element is +-midpoint * 2^k or a small integer times 2^k.
    """
    g = torch.Generator().manual_seed(seed)
    mids = torch.tensor(MIDPOINTS + (0.5, 1.0, 2.0, 3.0, 0.0))
    x = mids[torch.randint(0, len(mids), (M, N), generator=g)]
    x = torch.where((torch.rand(M, N, generator=g) < 0.5) & (x != 0), -x, x)  # no -0.0 here: specials has them
    r = torch.arange(M)[:, None]
    c = torch.arange(N)[None, :]
    x = torch.where((r % 32) == (c % 32), torch.full_like(x, 6.0), x)
    k = torch.randint(-6, 7, ((M + 31) // 32, (N + 31) // 32), generator=g).float()
    k = k.repeat_interleave(32, 0)[:M].repeat_interleave(32, 1)[:, :N]
    return (x * torch.exp2(k)).to(dtype)


def specials(M: int, N: int, dtype=torch.bfloat16, seed: int = 0) -> torch.Tensor:
    """Zero blocks, subnormal blocks, signed zeros, Inf, NaN and the largest finite values."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, N, generator=g)
    tiny = torch.finfo(dtype).tiny
    r = torch.arange(M)[:, None] // 32
    c = torch.arange(N)[None, :] // 32
    kind = (r * 7 + c * 3) % 8
    x = torch.where(kind == 0, torch.zeros_like(x), x)                       # all-zero blocks
    x = torch.where(kind == 1, x * tiny / 8, x)                               # subnormal blocks
    x = torch.where(kind == 2, -torch.zeros_like(x) * torch.sign(x).abs(), x)  # negative zeros
    x = torch.where(kind == 3, x * 1e-3, x)
    x = torch.where(kind == 4, x * torch.finfo(dtype).max / 4, x)              # huge amax
    special = torch.rand(M, N, generator=g)
    x = torch.where((kind == 5) & (special < 0.05), torch.full_like(x, float("inf")), x)
    x = torch.where((kind == 5) & (special > 0.95), torch.full_like(x, float("-inf")), x)
    return _signed_nans(x.to(dtype), (kind == 6) & (special < 0.03), special < 0.015)


def _blocks_of(M: int, N: int, value_fn, seed: int, dtype) -> torch.Tensor:
    """Random normals with every third 32x32 block replaced by `value_fn(block)`."""
    x = normal(M, N, dtype=torch.float32, seed=seed)
    r = torch.arange(M)[:, None] // 32
    c = torch.arange(N)[None, :] // 32
    return torch.where((r + c) % 3 == 0, value_fn(x), x).to(dtype)


def zeros(M, N, dtype=torch.bfloat16, seed=0):
    return _blocks_of(M, N, lambda x: torch.zeros_like(x), seed, dtype)


def subnormals(M, N, dtype=torch.bfloat16, seed=0):
    return _blocks_of(M, N, lambda x: x * torch.finfo(dtype).tiny / 16, seed, dtype)


def infs(M, N, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed + 1)
    return _blocks_of(M, N, lambda x: torch.where(torch.rand(x.shape, generator=g) < 0.05,
                                                   torch.sign(x) * float("inf"), x), seed, dtype)


_NAN_BITS = {2: (0x7FC1, -0x3F), 4: (0x7FC00001, -0x3FFFFF)}  # quiet NaNs with a payload: + and - (sign bit)


def _signed_nans(x: torch.Tensor, where: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """NaN where `where` (sign bit set where also `negative`), written as bits: torch's conversions and
    negation may canonicalize a NaN, and kernels must not depend on the input NaN's sign or payload."""
    pos, neg = _NAN_BITS[x.element_size()]
    bits = x.view({2: torch.int16, 4: torch.int32}[x.element_size()])
    bits = torch.where(where, torch.where(negative, neg, pos), bits).to(bits.dtype)
    return bits.view(x.dtype)


def nans(M, N, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed + 2)
    u = torch.rand(M, N, generator=g)
    block = ((torch.arange(M)[:, None] // 32 + torch.arange(N)[None, :] // 32) % 3 == 0)
    return _signed_nans(normal(M, N, dtype=dtype, seed=seed), block & (u < 0.05), u < 0.025)


def equal_groups(M: int, device, G: int = 8) -> torch.Tensor:
    """Group lengths for timing a grouped kernel: G equal groups of M // G rows (int64, on `device`)."""
    return torch.full((G,), M // G, dtype=torch.int64, device=device)


CLASSES: Dict[str, Callable[..., torch.Tensor]] = {"normal": normal, "ties": ties, "specials": specials}
# compare reports each special class on its own, so a difference is attributed to its cause
COMPARE_CLASSES: Dict[str, Callable[..., torch.Tensor]] = {
    "normal": normal, "ties": ties, "zero_blocks": zeros, "subnormals": subnormals, "inf": infs, "nan": nans}


def exact_operand(op, shape, device="cpu", G: int = 1, lens=None, seed: int = 0, code: int = 3, exp: int = 2):
    """A GEMM operand (`op`: compiler.gemm.OperandIR) whose products and sums are exact in fp32: the
    producer's QuantizedResult for an input of `shape`, its bytes replaced by codes of small integers
    (-code..code) and scales 2^-exp..2^exp that differ from block to block (exact while
    2 * code^2 * K * 4^exp < 2^24). Segment padding rows stay zero codes."""
    from quantlay.generated import find
    g = torch.Generator().manual_seed(seed)
    mod = find(op.variant.kernel.name, **{n: v for n, v in op.variant.options if v})
    x = torch.zeros(shape, dtype=torch.bfloat16, device=device)
    res = mod.quantize(x, lens) if lens is not None else mod.quantize(x)
    env = {"M": shape[0], "N": shape[1], "G": G}
    rows, cols = (int(v.evaluate(env)) for v in op.data.logical)
    vals = torch.randint(-code, code + 1, (rows, cols), generator=g).float()
    if op.direction.segmented:  # the padding rows of each group hold zero codes, as the cast writes them
        from .reference import segment_rows
        real = segment_rows(torch.ones(shape[0], 1), lens, op.direction.block[0])[0][:, 0] != 0
        vals[~real] = 0
    codes = vals.to(torch.float8_e4m3fn if op.direction.element.name == "e4m3" else torch.float8_e5m2)
    srows, scols = (int(v.evaluate(env)) for v in op.scale.logical)
    e = torch.randint(-exp, exp + 1, (srows, scols), generator=g).float()
    scale = (e + 127).to(torch.uint8) if op.scale.format == "ue8m0" else torch.exp2(e)
    res[op.data.key].tensor.copy_(op.data.chain.apply(codes.view(torch.uint8)).to(device))
    res[op.scale.key].tensor.copy_(op.scale.chain.apply(scale).to(device))
    return res
