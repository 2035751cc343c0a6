"""Blockwise FP8 training layers built from the generated casts and GEMMs.

    import quantlay.nn as qnn
    recipe = qnn.Recipe(pow2=True)                       # NVIDIA TE's power-of-two scales in every cast
    layer = qnn.FP8Linear(4096, 4096, recipe=recipe)     # y = x @ W^T in blockwise FP8
    experts = qnn.FP8GroupedLinear(8, 4096, 1024, recipe=recipe)
    y = experts(x_sorted_by_expert, tokens_per_expert)   # lengths on the device: no host sync

Forward: the 1x128 activation cast and the (grouped) fprop GEMM. Backward: the gradient's 1x128 cast
and the dgrad GEMM against the weight's transposed copy, and the weight gradient over the tokens of
each group from the segment-padded transposed casts of the gradient and the input (written, or added
into `weight.main_grad` when it exists). The weight is cast once per step: the cache key holds the
weight's identity and version and the layout of every buffer the cast writes, so two recipes (two
layouts) never share an entry. Every consumer checks the layout descriptors of what it is given
(`LayoutMismatchError`), so a recipe's casts and GEMMs cannot disagree.

No host sync: group lengths stay on the device. To capture a training step in a CUDA graph, call
`clear_cache()` before the capture, so the weight casts are part of the graph and every replay casts
the weights as they are then.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import torch

from .runtime import QuantizedResult

BLOCK = 128


@dataclass(frozen=True)
class Recipe:
    """Which generated kernels a layer uses; one object threads the scale rule into every cast.

    pow2=True: NVIDIA TE's Float8BlockScaling (power-of-two scales, GEMM_READY layouts); False: ROCm TE's
    (fp32 scales 448 / max(amax, 1e-4), row-major layouts). `accumulate`: add weight gradients into
    `weight.main_grad` where the weight has one (the grad returned for the weight is then None); otherwise
    the gradient is returned in the weight's dtype (a bf16 weight's written by a bf16-output GEMM)."""
    pow2: bool = False
    accumulate: bool = True
    # a role's module replaced by another object with the same entry points (a hand-written producer
    # under test: examples/moe_training); None: the generated kernels
    overrides: Optional[Dict[str, object]] = field(default=None, compare=False, hash=False)
    # UNSAFE, for demonstrations only: the layer's GEMMs read operands whatever layout they carry
    # (runtime.unsafe_skip_layout_check around each call, in whichever thread autograd runs it)
    unsafe_skip_layout_check: bool = False

    def guard(self):
        """The context every GEMM call of a layer runs in."""
        import contextlib
        from .runtime import unsafe_skip_layout_check
        return unsafe_skip_layout_check() if self.unsafe_skip_layout_check else contextlib.nullcontext()

    def kernels(self) -> Dict[str, Tuple[str, dict]]:
        if self.pow2:
            return {"act": ("fp8_1x128_nvte", {"gemm_ready": True}), "weight": ("fp8_128x128_nvte", {}),
                    "fprop": ("fp8_gemm_fprop_nvte", {}), "dgrad": ("fp8_gemm_dgrad_nvte", {}),
                    "grouped_fprop": ("fp8_gemm_grouped_fprop_nvte", {}),
                    "grouped_dgrad": ("fp8_gemm_grouped_dgrad_nvte", {}),
                    "segment": ("fp8_segment_m_transposed_pow2", {}),
                    "wgrad": ("fp8_gemm_grouped_wgrad_t_pow2", {}), "wgrad_acc": ("fp8_gemm_grouped_wgrad_t_pow2_acc", {}),
                    "wgrad_bf16": ("fp8_gemm_grouped_wgrad_t_pow2_bf16", {})}
        return {"act": ("fp8_1x128_rocm_te", {}), "weight": ("fp8_128x128_rocm_te", {}),
                "fprop": ("fp8_gemm_fprop", {}), "dgrad": ("fp8_gemm_fprop", {}),  # against W^T's cast
                "grouped_fprop": ("fp8_gemm_grouped_fprop", {}), "grouped_dgrad": ("fp8_gemm_grouped_fprop", {}),
                "segment": ("fp8_segment_m_transposed", {}),
                "wgrad": ("fp8_gemm_grouped_wgrad_t", {}), "wgrad_acc": ("fp8_gemm_grouped_wgrad_t_acc", {}),
                "wgrad_bf16": ("fp8_gemm_grouped_wgrad_t_bf16", {})}

    def module(self, role: str):
        from quantlay.generated import find
        if self.overrides and role in self.overrides:
            return self.overrides[role]
        name, opts = self.kernels()[role]
        return find(name, **opts)

    @property
    def dgrad_reads_weight_columns(self) -> bool:
        """The dgrad GEMM reads the weight's colwise (transposed) output of the same cast; otherwise
        W^T gets a cast of its own."""
        return self.pow2


# ---- the weight cache --------------------------------------------------------------------------------
_CACHE: Dict[tuple, QuantizedResult] = {}


def cached_weight_cast(weight: torch.Tensor, mod, transposed: bool = False) -> QuantizedResult:
    """`weight` (2-D [N, K] or stacked [G, N, K]) cast by `mod`, once per weight version and layout."""
    layouts = tuple(sorted((k, d.layout, d.format, d.block) for k, d in mod.LAYOUTS.items()))
    key = (id(weight), weight._version, weight.data_ptr(), transposed, mod.NAME, layouts)
    hit = _CACHE.get(key)
    if hit is None:
        w = weight.detach()
        if transposed:  # [.., N, K] -> [.., K, N]: the rowwise cast of W^T is the dgrad operand
            w = w.transpose(-1, -2).contiguous()
        stale = [k for k in _CACHE if k[0] == id(weight) and k[3:] == key[3:]]
        for k in stale:  # an older version of the same weight in the same layout
            del _CACHE[k]
        hit = _CACHE[key] = mod.quantize(w)  # stacked [G, N, K]: square blocks must not straddle two experts
    return hit


def clear_cache() -> None:
    _CACHE.clear()


# ---- autograd ----------------------------------------------------------------------------------------
def _offsets(lens: torch.Tensor) -> torch.Tensor:
    return torch.cat([lens.new_zeros(1), lens.cumsum(0)]).to(torch.int64)


class _FP8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, lens, recipe: Recipe):
        K = x.shape[-1]
        x2 = x.reshape(-1, K)
        G = 1 if lens is None else lens.numel()
        N = weight.shape[-2]
        xq = recipe.module("act").quantize(x2)
        wq = cached_weight_cast(weight, recipe.module("weight"))
        with recipe.guard():
            if lens is None:
                y = recipe.module("fprop").gemm(xq, wq)
            else:
                y = recipe.module("grouped_fprop").gemm(xq, wq, _offsets(lens))
        ctx.save_for_backward(x2, weight, lens)
        ctx.recipe, ctx.shape, ctx.G, ctx.N = recipe, x.shape, G, N
        return y.reshape(*x.shape[:-1], N)

    @staticmethod
    def backward(ctx, dy):
        x2, weight, lens = ctx.saved_tensors
        recipe, G, N = ctx.recipe, ctx.G, ctx.N
        M, K = x2.shape
        dy2 = dy.reshape(-1, N).to(torch.bfloat16).contiguous()
        dyq = recipe.module("act").quantize(dy2)
        offs = None if lens is None else _offsets(lens)
        if recipe.dgrad_reads_weight_columns:
            wq = cached_weight_cast(weight, recipe.module("weight"))
        else:
            wq = cached_weight_cast(weight, recipe.module("weight"), transposed=True)
        with recipe.guard():
            if lens is None:
                dx = recipe.module("dgrad").gemm(dyq, wq)
            else:
                dx = recipe.module("grouped_dgrad").gemm(dyq, wq, offs)
        # the weight gradient over each group's tokens (one group for a dense layer)
        group_lens = lens if lens is not None else torch.full((1,), M, dtype=torch.int64, device=x2.device)
        seg = recipe.module("segment")
        a, b = seg.quantize(dy2, group_lens), seg.quantize(x2, group_lens)
        poffs = a.extras["padded_offsets"]
        main_grad = getattr(weight, "main_grad", None)
        with recipe.guard():
            if recipe.accumulate and main_grad is not None:
                recipe.module("wgrad_acc").gemm(a, b, poffs, out=main_grad.view(G, N, K))
                dw = None
            elif weight.dtype == torch.bfloat16:  # written in bf16 by the kernel: half the bytes of fp32
                dw = recipe.module("wgrad_bf16").gemm(a, b, poffs).view(weight.shape)
            else:
                dw = recipe.module("wgrad").gemm(a, b, poffs).view(weight.shape).to(weight.dtype)
        return dx.reshape(ctx.shape), dw, None, None


class FP8Linear(torch.nn.Module):
    """y = x @ W^T with blockwise FP8 operands (1x128 activations and gradients, 128x128 weights)."""

    def __init__(self, in_features: int, out_features: int, recipe: Recipe = Recipe(), device=None):
        super().__init__()
        self.recipe = recipe
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features, dtype=torch.bfloat16, device=device))
        torch.nn.init.normal_(self.weight, std=in_features ** -0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _FP8Linear.apply(x.to(torch.bfloat16), self.weight, None, self.recipe)


class FP8GroupedLinear(torch.nn.Module):
    """MoE experts: y[rows of group g] = x[rows of group g] @ W[g]^T, the rows sorted by group and the
    group lengths on the device."""

    def __init__(self, groups: int, in_features: int, out_features: int, recipe: Recipe = Recipe(), device=None):
        super().__init__()
        self.recipe = recipe
        self.weight = torch.nn.Parameter(torch.empty(groups, out_features, in_features, dtype=torch.bfloat16,
                                                     device=device))
        torch.nn.init.normal_(self.weight, std=in_features ** -0.5)

    def forward(self, x: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
        return _FP8Linear.apply(x.to(torch.bfloat16), self.weight, lens, self.recipe)
