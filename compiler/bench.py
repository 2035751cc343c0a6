"""`quantlay bench`: memory-bound kernels timed against a copy measured in the same run.

A registry of benchmark entries (kernel, runner, peers, shapes, validator). Each measurement is the
median of CUDA-graph replays (`triton.testing.do_bench_cudagraph`, with p20/p80; plain launches for a
callable that cannot be captured), reported as GB/s counting every input byte read
once and every output byte written once, and as a ratio to a device-to-device copy timed in the same
process. Shapes a validator rejects are reported as skipped with the reason. Results go to a table on
the terminal and one CSV row per measurement.
"""
from __future__ import annotations

import csv
import hashlib
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from . import inputs, reference
from . import spec as specmod

SHAPES = ((4096, 6144), (8192, 8192), (16384, 8192), (32768, 4096))  # the shapes of issue 5's targets
# SASS opcodes that sm_90 issues to its ALU pipe (logic, shifts, integer compares and min/max, the 16-bit float
# compares and min/max), which runs a warp instruction every second cycle: the limit of the MXFP4 casts (ncu)
ALU_PIPE_OPS = frozenset({"LOP3", "SHF", "LEA", "SEL", "PRMT", "ISETP", "IADD3", "IMNMX", "VIMNMX", "VIMNMX3",
                          "HMNMX2", "HSET2", "HSETP2", "FSETP", "FMNMX", "FSEL", "SGXT", "MOV", "PLOP3", "BMSK",
                          "FLO", "POPC", "BREV"})


def alu_pipe_share(ops) -> int:
    """How many of a SASS opcode count ({opcode with modifiers: n}) run on the ALU pipe."""
    return sum(n for op, n in ops.items() if op.split(".")[0] in ALU_PIPE_OPS)


@dataclass(frozen=True)
class Entry:
    name: str
    # (M, N) -> (run, bytes moved); GEMMs (M, N, K) -> (run, FLOPs) or (run, FLOPs, check): check() runs
    # after the timing and returns what is wrong with the output, or None
    make: Callable[..., Tuple]
    validate: Callable[..., Optional[str]] = lambda *shape: None  # reason to skip, or None
    kernel_hash: str = ""
    group: str = ""


@dataclass
class Row:
    name: str
    group: str
    shape: str
    median_ms: float = float("nan")
    p20_ms: float = float("nan")
    p80_ms: float = float("nan")
    gbps: float = float("nan")
    pct_copy: float = float("nan")
    tflops: float = float("nan")
    pct_peak: float = float("nan")
    kernel_hash: str = ""
    note: str = ""


def time_call(fn) -> Tuple[float, float, float]:
    """(median, p20, p80) ms of one call, replayed from a CUDA graph: the Python launcher's host time
    (tens of microseconds, more than a small kernel's) stays out, as in a captured training step.
    Callables that cannot be captured are timed by plain launches."""
    import triton
    fn()
    torch.cuda.synchronize()
    try:
        q = triton.testing.do_bench_cudagraph(fn, rep=200, quantiles=[0.5, 0.2, 0.8])
    except Exception:  # not capturable (a host sync in a peer): launches, host time included
        torch.cuda.synchronize()
        q = triton.testing.do_bench(fn, warmup=25, rep=200, quantiles=[0.5, 0.2, 0.8])
    return tuple(q)


def copy_gbps(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth (read + write), by plain launches: 2 GiB take ~1 ms, far above
    host time, and a copy captured in a CUDA graph becomes a memcpy node that may run on a copy engine
    (measured 2775 GB/s that way on the H200 against 4273 GB/s by launches)."""
    import triton
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    med = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * nbytes / (med * 1e-3) / 1e9


def fastest_in_turn(calls: Sequence[Callable], rounds: int = 2) -> List[float]:
    """Each call's fastest median ms (time_call) over `rounds` rounds that time the calls in turn, so a GPU's
    drift within the process falls on every call alike (A/Bs and setting sweeps)."""
    best = [float("inf")] * len(calls)
    for _ in range(rounds):
        for i, fn in enumerate(calls):
            best[i] = min(best[i], time_call(fn)[0])
    return best


def pct_of_copy(nbytes: int, ms: float, copy: float) -> float:
    """nbytes moved in ms, as % of a copy's GB/s."""
    return 100 * nbytes / (ms * 1e-3) / 1e9 / copy


def same_bytes(results) -> bool:
    """Whether every result (a mapping of outputs, tensors or QuantizedTensors) has the first one's bytes."""
    def raw(t):
        return getattr(t, "tensor", t).contiguous().view(torch.uint8)
    return all(torch.equal(raw(r[k]), raw(results[0][k])) for r in results[1:] for k in results[0])


def bytes_moved(x: torch.Tensor, outputs) -> int:
    """What GB/s counts: the input read once and every output (tensors or QuantizedTensors) written once."""
    outs = [getattr(t, "tensor", t) for t in outputs]
    return x.numel() * x.element_size() + sum(t.numel() * t.element_size() for t in outs)


def mxfp4_entries() -> List[Entry]:
    """Generated MXFP4 cast-transpose kernels (every profile, flags on and off) and their peers."""
    from quantlay.generated import find
    kernels = specmod.load(specmod.SPECS_DIR / "mxfp4_cast_transpose.ql")
    flags = kernels[0].options  # the profiles share their layout options
    out = []
    # what users get (on sm_90 the Hopper kernel, on whole tiles), and the Triton kernel beside it
    for kernel, on, backend in ((k, on, b) for k in kernels for on in (True, False) for b in (None, "triton")):
        opts = dict.fromkeys(flags, on)
        mod = find(kernel.name, **opts)
        src = open(mod.__file__).read()

        def make(M, N, mod=mod, backend=backend):
            x = inputs.normal(M, N, seed=0).cuda()
            res = mod.quantize(x, backend=backend)
            return (lambda: mod.quantize(x, backend=backend)), bytes_moved(x, res.values())

        def validate(M, N, on=on):
            if on and (M % 64 or N % 64):
                return "the preshuffle layouts need M and N to be multiples of 64"
            return None

        out.append(Entry(f"quantlay {kernel.name} flags={'on' if on else 'off'}{' [triton]' if backend else ''}", make, validate,
                         hashlib.sha256(src.encode()).hexdigest()[:12], "mxfp4"))
    return (out + _generated_entries("mxfp4_2d.ql", "mxfp4")
            + reference_entries(kernels[0].variant(**dict.fromkeys(flags, True)), "flags on", "mxfp4"))


def reference_entries(variant, label: str, group: str) -> List[Entry]:
    """The PyTorch reference of `variant`, eager and under torch.compile: the floor any kernel must beat."""
    def make(compiled: bool):
        def run_maker(M, N):
            x = inputs.normal(M, N, seed=0).cuda()
            fn = (lambda t: reference.quantize(variant, t))
            fn = torch.compile(fn) if compiled else fn
            return (lambda: fn(x)), bytes_moved(x, fn(x).values())
        return run_maker

    return [Entry(f"torch eager reference ({label})", make(False), group=group),
            Entry(f"torch.compile of the reference ({label})", make(True), group=group)]


def _generated_entries(spec_name: str, group: str) -> List[Entry]:
    """Every kernel of a shipped spec with all its options off and all on."""
    from quantlay.generated import find
    out = []
    for kernel in specmod.load(specmod.SPECS_DIR / spec_name):
        settings = [{}] if not kernel.options else [dict.fromkeys(kernel.options, v) for v in (False, True)]
        two_level = any(d.scale.tensor_scale for d in kernel.directions)
        for opts in settings:
            mod = find(kernel.name, **opts)
            # two-level kernels: the tensor scale computed (x read twice, both reads counted) or given
            for given in ((False, True) if two_level else (False,)):
                def make(M, N, mod=mod, kernel=kernel, given=given, two_level=two_level):
                    x = inputs.normal(M, N, seed=0).cuda()
                    args = ()
                    if kernel.groups:
                        args = (inputs.equal_groups(M, "cuda"),)
                    if given:
                        args = (torch.ones(1, device="cuda"),)
                    res = mod.quantize(x, *args)
                    moved = bytes_moved(x, [v for k, v in res.items() if k != "tensor_scale"])
                    if two_level and not given:
                        moved += x.numel() * x.element_size()  # the amax pass
                    return (lambda: mod.quantize(x, *args)), moved

                tag = ",".join(f"{k}={int(v)}" for k, v in opts.items())
                tag += (" " if tag else "") + ("tensor scale given" if given else "tensor scale computed") if two_level else ""
                out.append(Entry(f"quantlay {kernel.name}" + (f" {tag}" if tag else ""), make,
                                 lambda M, N: None if M % 128 == 0 and N % 128 == 0 else "needs M, N % 128",
                                 hashlib.sha256(open(mod.__file__).read().encode()).hexdigest()[:12], group))
    return out


TORCHAO_KERNELS = (  # torchao 0.18 prototype.blockwise_fp8_training.kernels: (function, what it writes)
    ("triton_fp8_blockwise_act_quant_lhs", "1x128 rowwise"),
    ("triton_fp8_blockwise_act_quant_transposed_lhs", "1x128 colwise transposed"),
    ("triton_fp8_blockwise_weight_quant_rhs", "128x128"),
    ("triton_fp8_blockwise_weight_quant_transposed_rhs", "128x128 transposed"),
)


def torchao_entries() -> List[Entry]:
    """torchao 0.18's blockwise FP8 Triton kernels, when torchao is installed (issue 5's peers). Its C++
    extension is skipped (TORCHAO_FORCE_SKIP_LOADING_SO_FILES): these kernels are pure Triton."""
    out = []
    for fn_name, what in TORCHAO_KERNELS:
        def make(M, N, fn_name=fn_name):
            os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")
            from torchao.prototype.blockwise_fp8_training import kernels as k  # optional peer
            fn = getattr(k, fn_name)
            x = inputs.normal(M, N, seed=0).cuda()
            q, s = fn(x, 128)  # first call autotunes
            return (lambda: fn(x, 128)), bytes_moved(x, (q, s))

        out.append(Entry(f"torchao {what} ({fn_name})", make, group="fp8"))
    return out


# ---- GEMMs: TFLOP/s beside the peers, measured in the same run ---------------------------------------
GEMM_SHAPES = ((8192, 8192, 8192), (4096, 7168, 7168), (4096, 2048, 7168), (4096, 7168, 2048), (16384, 4096, 4096),
               (32768, 4096, 4096))  # the last: 512 rows per group with 64 groups
FP8_PEAK_TFLOPS = 1979.0  # the H200's dense FP8 peak


DEVICE = "cuda"  # the GEMM entries' device (the tests build them on the CPU, in Triton's interpreter)
GEMM_BOUND = 1e-6  # the GEMMs' random-input bound against the reference of their dequantized operands


def _randn(*shape):
    return torch.randn(*shape, device=DEVICE).to(torch.bfloat16)


def _gemm_decl(name: str):
    """The shipped declaration of GEMM `name` (what the reference computes)."""
    return next(g for g in specmod.load_gemms(specmod.SPECS_DIR / "fp8_gemm.ql") if g.name == name)


def relative_error(y: torch.Tensor, r: torch.Tensor) -> float:
    """1 - 2 <y, r> / (|y|^2 + |r|^2) in fp64, taken in row blocks (a weight gradient's outputs are GiBs);
    0 for two zero tensors."""
    dot = norms = 0.0
    for yc, rc in zip(y.reshape(-1, y.shape[-1]).split(4096), r.reshape(-1, r.shape[-1]).split(4096)):
        yd, rd = yc.double(), rc.double()
        dot += float((yd * rd).sum())
        norms += float((yd * yd).sum() + (rd * rd).sum())
    return 1 - 2 * dot / norms if norms else 0.0


def _gemm_check(g, a, b, offs, output: Callable[[], torch.Tensor]):
    """check() of a quantlay GEMM entry: its output against the fp64 reference of its own quantized
    operands, as the tests bound random inputs. A kernel that is fast and wrong is reported, not ranked."""
    def check():
        y = output()
        err = relative_error(y, reference.gemm(g, a, b, offs).to(y.dtype))
        if not err < GEMM_BOUND:  # NaN fails too
            return f"WRONG: relative error {err:.2e} against the reference of its operands (bound {GEMM_BOUND:g})"
        return None
    return check


# the GEMM entries the targets' ratios pair (see gemm_ratios)
DENSE_GEMM, GROUPED_GEMM = "quantlay fp8_gemm_fprop", "quantlay fp8_gemm_grouped_fprop"
GEMM_PEERS = {"torchao": "torchao triton_fp8_gemm_1x128_128x128",
              "cuBLAS": "cuBLAS blockwise (torchao _scaled_mm, 1x128 x 128x128)"}


def _quantlay_dense(name: str, backend: Optional[str] = None):
    """A shipped dense GEMM; backend None is what users get (on the H200 the Gluon kernel), "triton" the
    portable kernel."""
    from quantlay.generated import find
    g = _gemm_decl(name)
    mod = find(name)

    def make(M, N, K):
        from .gemm import producer_shape
        pa = find(g.a.variant.kernel.name, **{n: v for n, v in g.a.variant.options if v})
        pb = find(g.b.variant.kernel.name, **{n: v for n, v in g.b.variant.options if v})
        a = pa.quantize(_randn(*producer_shape(g.a, None, M, N, K)))
        b = pb.quantize(_randn(*producer_shape(g.b, None, M, N, K)))
        out = torch.empty(M, N, dtype=torch.bfloat16, device=DEVICE)
        return (lambda: mod.gemm(a, b, out=out, backend=backend)), 2 * M * N * K, _gemm_check(g, a, b, None, lambda: out)
    return Entry(f"quantlay {name}{f' [{backend}]' if backend else ''}", make, kernel_hash=_hash(mod), group="gemm")


def _hash(mod) -> str:
    return hashlib.sha256(open(mod.__file__).read().encode()).hexdigest()[:12]


def _lens(M: int, G: int, random: bool):
    if not random:
        return [M // G] * (G - 1) + [M - (M // G) * (G - 1)]
    g = torch.Generator().manual_seed(G)
    w = torch.rand(G, generator=g) + 0.25
    lens = (w / w.sum() * M).long()
    lens[-1] += M - int(lens.sum())
    return lens.tolist()


def _quantlay_grouped(G: int, random: bool):
    from quantlay.generated import find
    mod = find("fp8_gemm_grouped_fprop")
    g = _gemm_decl("fp8_gemm_grouped_fprop")

    def make(M, N, K):
        lens = _lens(M, G, random)
        offs = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int64, device=DEVICE)
        a = find("fp8_1x128_rocm_te").quantize(_randn(M, K))
        b = find("fp8_128x128_rocm_te").quantize(_randn(G * N, K))
        out = torch.empty(M, N, dtype=torch.bfloat16, device=DEVICE)
        return (lambda: mod.gemm(a, b, offs, out=out)), 2 * M * N * K, _gemm_check(g, a, b, offs, lambda: out)
    return Entry(f"{GROUPED_GEMM} G={G} {'random' if random else 'equal'}", make,
                 _rows_per_group(G), kernel_hash=_hash(mod), group="gemm")


def _rows_per_group(G: int):
    """Grouped GEMMs are measured where groups hold 512 rows or more on average (MoE training)."""
    return lambda M, N, K: None if M >= 512 * G else f"fewer than 512 rows per group ({M} rows, {G} groups)"


def _quantlay_wgrad(G: int, name: str = "fp8_gemm_grouped_wgrad_acc", backend: Optional[str] = None):
    from quantlay.generated import find
    mod = find(name)
    g = _gemm_decl(name)
    cast = find(g.a.variant.kernel.name)

    def make(M, N, K):  # tokens M; dW[g] = dY_g^T [N, tokens] @ X_g [tokens, K], written or added into main_grad
        lens = torch.tensor(_lens(M, G, False), device=DEVICE)
        a, b = cast.quantize(_randn(M, N), lens), cast.quantize(_randn(M, K), lens)
        grad = torch.zeros(G, N, K, device=DEVICE, dtype=mod.OUT_DTYPE)
        offs = a.extras["padded_offsets"]

        def run():
            return mod.gemm(a, b, offs, out=grad, backend=backend)

        def once():  # the timed runs added into grad many times: one run into zeros
            grad.zero_()
            return run()
        return run, 2 * M * N * K, _gemm_check(g, a, b, offs, once)
    return Entry(f"quantlay {name} G={G} equal{f' [{backend}]' if backend else ''}", make, _rows_per_group(G),
                 kernel_hash=_hash(mod), group="gemm")


def _torchao():
    os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")
    from torchao.prototype.blockwise_fp8_training import kernels, linear  # optional peer
    return kernels, linear


def gemm_peer_entries() -> List[Entry]:
    """torchao 0.18's Triton blockwise GEMMs and cuBLAS's blockwise GEMM (through torchao, as its
    training layer calls it), bf16 matmul and per-tensor FP8 `_scaled_mm`."""
    def torchao_operands(M, N, K):
        k, _ = _torchao()
        xq, xs = k.triton_fp8_blockwise_act_quant_lhs(_randn(M, K), 128)
        wq, ws = k.triton_fp8_blockwise_weight_quant_transposed_rhs(_randn(N, K), block_size=128)
        return xq, xs, wq, ws

    def triton_gemm(M, N, K):
        k, _ = _torchao()
        xq, xs, wq, ws = torchao_operands(M, N, K)
        return (lambda: k.triton_fp8_gemm_1x128_128x128(xq, wq, xs, ws, out_dtype=torch.bfloat16)), 2 * M * N * K

    def cublas_gemm(M, N, K):
        k, lin = _torchao()
        xq, xs, wq, ws = torchao_operands(M, N, K)
        return (lambda: lin._scaled_mm(xq, wq, xs, k.BLOCKWISE_1X128_SCALING_TYPE, ws,
                                       k.BLOCKWISE_128X128_SCALING_TYPE, torch.bfloat16)), 2 * M * N * K

    def triton_wgrad(M, N, K):  # dW = dY^T X, torchao's 1x128 x 128x1 kernel
        k, _ = _torchao()
        dy, x = _randn(M, N), _randn(M, K)
        gq, gs = k.triton_fp8_blockwise_act_quant_transposed_lhs(dy, 128)
        xq, xs = k.triton_fp8_blockwise_act_quant_rhs(x, 128)
        return (lambda: k.triton_fp8_gemm_1x128_128x1(gq, xq, gs, xs, out_dtype=torch.float32)), 2 * M * N * K

    def bf16(M, N, K):
        a, b = _randn(M, K), _randn(N, K)
        return (lambda: a @ b.t()), 2 * M * N * K

    def per_tensor(M, N, K):
        a = _randn(M, K).to(torch.float8_e4m3fn)
        b = _randn(N, K).to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        return (lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), 2 * M * N * K

    return [Entry(GEMM_PEERS["torchao"], triton_gemm, group="gemm"),
            Entry(GEMM_PEERS["cuBLAS"], cublas_gemm, group="gemm"),
            Entry("torchao triton_fp8_gemm_1x128_128x1 (wgrad)", triton_wgrad, group="gemm"),
            Entry("torch bf16 matmul", bf16, group="gemm"),
            Entry("torch per-tensor FP8 _scaled_mm", per_tensor, group="gemm")]


def gemm_entries() -> List[Entry]:
    return ([_quantlay_dense(n) for n in ("fp8_gemm_fprop", "fp8_gemm_fprop_nvte", "fp8_gemm_dgrad_nvte")]
            + [_quantlay_dense("fp8_gemm_fprop", "triton")]
            + [_quantlay_grouped(G, r) for G in (8, 64) for r in (False, True)]
            + [_quantlay_wgrad(G, n) for n in ("fp8_gemm_grouped_wgrad_acc", "fp8_gemm_grouped_wgrad_t_acc")
               for G in (8, 64)]
            + [_quantlay_wgrad(G, n, "gluon") for n in ("fp8_gemm_grouped_wgrad_t_acc", "fp8_gemm_grouped_wgrad_t",
                                                        "fp8_gemm_grouped_wgrad_t_bf16")
               for G in (8, 64)] + gemm_peer_entries())


REGISTRY: Dict[str, Callable[[], List[Entry]]] = {
    "gemm": gemm_entries,
    "mxfp4": mxfp4_entries,
    "mxfp8": lambda: _generated_entries("mxfp8.ql", "mxfp8") + reference_entries(
        specmod.shipped_kernels()["mxfp8_nvte"].variant(with_gemm_swizzled_scales=True), "mxfp8_nvte", "mxfp8"),
    "mxfp6": lambda: _generated_entries("mxfp6.ql", "mxfp6") + reference_entries(
        specmod.shipped_kernels()["mxfp6_e2m3"].variant(), "mxfp6_e2m3", "mxfp6"),
    "nvfp4": lambda: _generated_entries("nvfp4.ql", "nvfp4") + reference_entries(
        specmod.shipped_kernels()["nvfp4"].variant(), "nvfp4", "nvfp4"),
    "fp8": lambda: _generated_entries("fp8_blockwise.ql", "fp8") + torchao_entries() + reference_entries(
        specmod.shipped_kernels()["fp8_1x128_rocm_te"].variant(), "fp8_1x128_rocm_te", "fp8"),
}


def gemm_entry(text: str) -> Entry:
    """The first GEMM entry whose name holds `text`, where `_` also matches a space (one shell word for a
    profiler's command line, e.g. `wgrad_t_G=8_equal_[gluon]`)."""
    for e in gemm_entries():
        if text in e.name or text in e.name.replace(" ", "_"):
            return e
    raise ValueError(f"no GEMM entry of the bench holds {text!r}; the entries are {[e.name for e in gemm_entries()]}")


def select(groups: Sequence[str], match: Optional[Sequence[str]] = None) -> List[Tuple[str, Entry]]:
    """(group, entry) for each registered entry of `groups` whose name contains one of `match` (all
    when None), or is one of them where the part starts with `=`: e.g. ("quantlay", "torchao") leaves out
    the torch reference peers, whose compilation takes most of a group's time; "=quantlay fp8_gemm_fprop"
    is that GEMM alone, not its variants. A part that selects nothing is an error."""
    def hit(m: str, name: str) -> bool:
        return name == m[1:] if m.startswith("=") else m in name

    out, names = [], []
    for g in groups:
        if g not in REGISTRY:
            raise ValueError(f"unknown bench group {g!r}; the groups are {sorted(REGISTRY)}")
        entries = REGISTRY[g]()
        names += [e.name for e in entries]
        out += [(g, e) for e in entries if match is None or any(hit(m, e.name) for m in match)]
    for m in match or ():
        if not any(hit(m, e.name) for _, e in out):
            raise ValueError(f"--match {m!r} selects no entry of the groups {list(groups)}; their entries are "
                             f"{names} (a part matches a name it is in, or, after '=', the whole name)")
    return out


CSV_FIELDS = ["kernel", "group", "shape", "kernel_hash", "median_ms", "p20_ms", "p80_ms", "gbps", "pct_of_copy",
              "tflops", "pct_of_fp8_peak", "note"]


def gemm_ratios(rows: Sequence[Row]) -> List[str]:
    """The GEMM targets' ratios among rows of one run, a line per shape where both sides were timed: the
    dense kernel over torchao's Triton kernel and over cuBLAS's blockwise GEMM, each grouped fprop over the
    dense kernel (same total M, N, K), each weight gradient over the grouped fprop with its groups."""
    tf = {(r.name, r.shape): r.tflops for r in rows if r.group == "gemm" and r.tflops == r.tflops}
    out = []
    for shape in dict.fromkeys(r.shape for r in rows if r.group == "gemm"):
        parts = []
        d = tf.get((DENSE_GEMM, shape))
        for label, peer in GEMM_PEERS.items():
            if d and tf.get((peer, shape)):
                parts.append(f"dense / {label} {d / tf[(peer, shape)]:.2f}x")
        for (name, s), v in tf.items():
            if s != shape or " G=" not in name:
                continue
            groups = name[name.index(" G="):].replace(" [gluon]", "")
            fprop = tf.get((GROUPED_GEMM + groups, shape))
            if name.startswith(GROUPED_GEMM) and d:
                parts.append(f"grouped{groups} / dense {100 * v / d:.1f}%")
            elif "wgrad" in name and fprop:
                parts.append(f"{name.split()[1]}{groups} / grouped fprop {100 * v / fprop:.1f}%")
        if parts:
            out.append(f"{shape:>16s}: " + "; ".join(parts))
    return out


def run(groups=("mxfp4",), shapes=SHAPES, csv_path: Optional[str] = None,
        match: Optional[Sequence[str]] = None, gemm_shapes=GEMM_SHAPES) -> List[Row]:
    """Time every selected entry at every shape; the CSV gets each row as it is measured (a run cut
    short keeps what it measured)."""
    import triton
    entries = select(groups, match)
    copy = copy_gbps()
    meta = {
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
        "commit": os.environ.get("QUANTLAY_COMMIT", "unknown"), "copy_gbps": f"{copy:.0f}",
    }
    out = open(csv_path, "w", newline="") if csv_path else None
    writer = csv.writer(out) if out else None
    if writer:
        writer.writerow(list(meta) + CSV_FIELDS)
        out.flush()
    rows: List[Row] = []
    try:
        for g, entry in entries:
            for shape in (gemm_shapes if g == "gemm" else shapes):
                row = Row(entry.name, g, "x".join(map(str, shape)), kernel_hash=entry.kernel_hash)
                reason = entry.validate(*shape)
                if reason:
                    row.note = f"skipped: {reason}"
                else:
                    try:
                        fn, work, *check = entry.make(*shape)
                        row.median_ms, row.p20_ms, row.p80_ms = time_call(fn)
                        if g == "gemm":  # work is FLOPs
                            row.tflops = work / (row.median_ms * 1e-3) / 1e12
                            row.pct_peak = 100 * row.tflops / FP8_PEAK_TFLOPS
                        else:  # work is bytes moved
                            row.gbps = work / (row.median_ms * 1e-3) / 1e9
                            row.pct_copy = 100 * row.gbps / copy
                    except Exception as exc:  # a peer that cannot run is reported, not fatal
                        row.note = f"skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
                    else:
                        try:
                            row.note = (check[0]() if check else None) or ""
                        except Exception as exc:  # the timing stands; the check's failure is reported
                            row.note = f"check failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
                    torch.cuda.empty_cache()
                rows.append(row)
                if writer:
                    writer.writerow(list(meta.values()) + [
                        row.name, row.group, row.shape, row.kernel_hash, f"{row.median_ms:.4f}", f"{row.p20_ms:.4f}",
                        f"{row.p80_ms:.4f}", f"{row.gbps:.0f}", f"{row.pct_copy:.1f}", f"{row.tflops:.0f}",
                        f"{row.pct_peak:.1f}", row.note])
                    out.flush()
    finally:
        if out:
            out.close()
    print(f"{meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}, commit {meta['commit'][:12]}; "
          f"copy {copy:.0f} GB/s (read + write)")
    print(f"{'kernel':56s} {'shape':>16s} {'median ms':>10s} {'GB/s or TFLOP/s':>16s} {'% copy / peak':>13s}")
    for r in rows:
        if r.note.startswith("skipped"):
            print(f"{r.name:56s} {r.shape:>16s} {r.note}")
        elif r.group == "gemm":
            print(f"{r.name:56s} {r.shape:>16s} {r.median_ms:10.4f} {r.tflops:10.0f} TF/s {r.pct_peak:12.1f}% {r.note}")
        else:
            print(f"{r.name:56s} {r.shape:>16s} {r.median_ms:10.4f} {r.gbps:11.0f} GB/s {r.pct_copy:12.1f}%")
    ratios = gemm_ratios(rows)
    if ratios:
        print("GEMM ratios (same run):")
        print("\n".join(ratios))
    return rows
