"""A small mixture-of-experts MLP trained in bf16 and in blockwise FP8 (quantlay.nn), and the failure
quantlay exists to prevent: a producer that ignores a layout flag the consumer relies on.

    python -m examples.moe_training.train --steps 300 --out runs/       # on a GPU
    TRITON_INTERPRET=1 python -m examples.moe_training.train --steps 3 --tokens 128 --tiny   # on a CPU

Task: regress the output of a fixed random teacher MoE (top-1 routing) from random tokens. Each run
trains the same student from the same initialisation (--router teacher: the student routes with the
teacher's router, frozen, so every run sends each token to the same expert and the curves differ only
by the experts' arithmetic; --router learned: the router trains too):
  bf16            experts as plain bf16 matmuls;
  bf16-control    (--control) bf16 again from an initialisation one bf16 rounding step away: how far
                  two bf16 runs drift apart on this task by themselves;
  fp8             experts as quantlay.nn.FP8GroupedLinear;
  fp8-broken      the same, but the weight-gradient operands come from a producer that writes the
                  columnwise operand untransposed where the recipe asks for the transposed (K-major)
                  layout. Its tensors carry the layout it really writes, so the wgrad GEMM refuses
                  them at the first step (LayoutMismatchError);
  fp8-unsafe      the same producer with the check bypassed (Recipe(unsafe_skip_layout_check=True)):
                  the GEMM reads the bytes in the wrong order and the loss departs from bf16.
Writes losses.csv (step, run, loss) and, where matplotlib is installed, losses.png.
"""
from __future__ import annotations

import argparse
import csv
import os

import torch

import quantlay.nn as qnn
from quantlay import LayoutMismatchError
from quantlay.runtime import QuantizedResult, QuantizedTensor


class IgnoresTransposeFlag:
    """A stand-in for a hand-written segment-padded cast that allocates the transposed buffers the
    recipe asks for but writes them in the untransposed order (the flag ignored). Its results carry
    the layout it really writes."""

    SPEC = """
kernel segment_untransposed_pow2(x: bf16[M, N], group_lens: groups[G]) {
    colwise blocks 128x1 segmented profile fp8_block_nvte {
        store data  as row_major
        store scale as row_major
    }
}
"""

    def __init__(self, recipe: qnn.Recipe):
        import quantlay
        self.expected = recipe.module("segment")
        self.actual = quantlay.build(self.SPEC)  # the same scales, the columnwise operand untransposed

    def quantize(self, x, lens):
        res = self.actual.quantize(x, lens)
        right = self.expected.quantize(x, lens)  # only for the buffer shapes the recipe expects
        out = {k: QuantizedTensor(res[k].tensor.reshape(right[k].tensor.shape), res[k].layout) for k in res}
        q = QuantizedResult(res.kernel, out)
        q.extras.update(res.extras)
        return q


def ignores_transpose_flag(x, group_lens):
    """The same producer as a hand-written function returning plain tensors (data, scales), for
    `quantlay compare` (examples/moe_training/binding.toml)."""
    res = IgnoresTransposeFlag(qnn.Recipe(pow2=True)).quantize(x, group_lens)
    return res["colwise_data"].tensor, res["colwise_scale"].tensor


class MoE(torch.nn.Module):
    def __init__(self, d: int, hidden: int, experts: int, mode: str, recipe: qnn.Recipe, device):
        super().__init__()
        self.mode = mode
        self.router = torch.nn.Linear(d, experts, bias=False, device=device, dtype=torch.bfloat16)
        if mode == "bf16":
            self.up = torch.nn.Parameter(torch.randn(experts, hidden, d, device=device).to(torch.bfloat16) * d ** -0.5)
            self.down = torch.nn.Parameter(torch.randn(experts, d, hidden, device=device).to(torch.bfloat16) * hidden ** -0.5)
        else:
            self.up_l = qnn.FP8GroupedLinear(experts, d, hidden, recipe=recipe, device=device)
            self.down_l = qnn.FP8GroupedLinear(experts, hidden, d, recipe=recipe, device=device)

    def forward(self, x):
        logits = self.router(x)
        expert = logits.argmax(-1)
        gate = torch.softmax(logits.float(), -1).gather(-1, expert[:, None]).to(x.dtype)
        order = torch.argsort(expert, stable=True)
        lens = torch.bincount(expert, minlength=self.router.out_features)
        xs = x[order]
        if self.mode == "bf16":
            offs = [0] + torch.cumsum(lens, 0).tolist()
            h = torch.cat([torch.nn.functional.gelu(xs[offs[g]:offs[g + 1]] @ self.up[g].t()) @ self.down[g].t()
                           for g in range(len(lens))])
        else:
            h = self.down_l(torch.nn.functional.gelu(self.up_l(xs, lens)), lens)
        y = torch.empty_like(h)
        y[order] = h
        return y * gate


def train(mode: str, steps: int, tokens: int, d: int, hidden: int, experts: int, seed: int, device,
          router: str = "teacher"):
    torch.manual_seed(seed)
    teacher = MoE(d, hidden, experts, "bf16", None, device)
    recipe = qnn.Recipe(pow2=True)
    if mode in ("fp8-broken", "fp8-unsafe"):
        recipe = qnn.Recipe(pow2=True, overrides={"segment": IgnoresTransposeFlag(recipe)},
                            unsafe_skip_layout_check=mode == "fp8-unsafe")
    torch.manual_seed(seed + 1)
    student = MoE(d, hidden, experts, "bf16" if mode.startswith("bf16") else "fp8", recipe, device)
    if mode == "bf16-control":  # each weight moved by one rounding step of bf16 (2^-7 relative), up or down
        with torch.no_grad():
            for w in student.parameters():
                w.add_(w * (2.0 ** -7) * torch.randint(0, 2, w.shape, device=device).mul(2).sub(1))
    elif not mode.startswith("bf16"):  # the same initialisation in every run
        torch.manual_seed(seed + 1)
        ref = MoE(d, hidden, experts, "bf16", None, device)
        with torch.no_grad():
            student.router.weight.copy_(ref.router.weight)
            student.up_l.weight.copy_(ref.up)
            student.down_l.weight.copy_(ref.down)
    if router == "teacher":
        with torch.no_grad():
            student.router.weight.copy_(teacher.router.weight)
        student.router.weight.requires_grad_(False)
    opt = torch.optim.Adam([w for w in student.parameters() if w.requires_grad], lr=1e-3)
    gen = torch.Generator(device="cpu").manual_seed(seed + 2)
    losses = []
    for step in range(steps):
        x = torch.randn(tokens, d, generator=gen).to(device).to(torch.bfloat16)
        with torch.no_grad():
            target = teacher(x)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(student(x).float(), target.float())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--tiny", action="store_true", help="d = hidden = 128, 2 experts (CPU)")
    p.add_argument("--out", default=".")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--router", choices=("teacher", "learned"), default="teacher",
                   help="teacher: route with the teacher's router, frozen; learned: train the router too")
    p.add_argument("--control", action="store_true", help="also run bf16 from a perturbed initialisation")
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    d, hidden, experts = (128, 128, 2) if args.tiny else (1024, 2048, 8)
    os.makedirs(args.out, exist_ok=True)
    runs = {}
    modes = ("bf16",) + (("bf16-control",) if args.control else ()) + ("fp8", "fp8-broken", "fp8-unsafe")
    for mode in modes:
        try:
            runs[mode] = train(mode, args.steps, args.tokens, d, hidden, experts, args.seed, device, args.router)
            print(f"{mode:11s} loss {runs[mode][0]:.4f} -> {runs[mode][-1]:.4f}", flush=True)
        except LayoutMismatchError as exc:
            print(f"{mode:11s} refused at the first step: {str(exc).splitlines()[0][:200]}", flush=True)
    for other in ("fp8", "bf16-control"):
        if "bf16" in runs and other in runs:
            gap = max(abs(f - b) / b for b, f in zip(runs["bf16"], runs[other]))
            print(f"{other} against bf16: at most {100 * gap:.2f}% apart over {len(runs[other])} steps", flush=True)
    with open(os.path.join(args.out, "losses.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "run", "loss"])
        for mode, losses in runs.items():
            w.writerows((i, mode, f"{v:.6f}") for i, v in enumerate(losses))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return runs
    plt.figure(figsize=(7, 4))
    for mode, losses in runs.items():
        plt.plot(losses, label=mode)
    plt.yscale("log")
    plt.xlabel("step")
    plt.ylabel("MSE to the teacher")
    plt.legend()
    plt.tight_layout()
    plt.savefig(os.path.join(args.out, "losses.png"), dpi=120)
    return runs


if __name__ == "__main__":
    main()
