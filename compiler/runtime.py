"""What generated kernels need at run time: layout descriptors, tagged results and input checks.

Every tensor a generated kernel returns is a `QuantizedTensor`: the buffer plus a `LayoutDescriptor`
that says what it holds (format, block, direction) and how it is stored (layout, padding, fill). A
consumer states the descriptor it expects and `expect_layout` refuses anything else with a
`LayoutMismatchError` naming both layouts, so a layout flag can never be silently ignored downstream.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading
from dataclasses import dataclass
from typing import Dict, Iterator, Mapping, NamedTuple, Tuple

import torch

from .errors import LaunchError, LayoutMismatchError

_IDENTITY_FIELDS = ("direction", "role", "format", "block", "layout", "fill")


@dataclass(frozen=True)
class LayoutDescriptor:
    direction: str               # rowwise | colwise
    role: str                    # data | scale
    format: str                  # e2m1 | e8m0
    block: str                   # e.g. 1x32
    layout: str                  # the pipe, e.g. transpose|packed(low=even)|preshuffle16x16
    fill: object                 # value written into padding (None: no padding)
    shape: Tuple[int, int] = ()           # the quantized input's [M, N]
    logical_shape: Tuple[int, int] = ()   # logical storage matrix (codes packed two per byte)
    padded_shape: Tuple[int, int] = ()    # logical extents after padding
    physical_shape: Tuple[int, ...] = ()  # the buffer's shape

    def same_layout(self, other: "LayoutDescriptor") -> bool:
        return all(getattr(self, f) == getattr(other, f) for f in _IDENTITY_FIELDS)

    def describe(self) -> str:
        return (f"{self.direction} {self.role} {self.format} blocks {self.block} stored as "
                f"'{self.layout}'" + (f" (padding filled with {self.fill})" if self.fill is not None else ""))

    def for_shape(self, M: int, N: int, logical, padded, physical) -> "LayoutDescriptor":
        return LayoutDescriptor(self.direction, self.role, self.format, self.block, self.layout,
                                self.fill, (M, N), tuple(logical), tuple(padded), tuple(physical))


@dataclass(frozen=True)
class QuantizedTensor:
    """A buffer written by a quantlay kernel, tagged with the layout it is stored in."""
    tensor: torch.Tensor
    layout: LayoutDescriptor

    def __repr__(self) -> str:
        return f"QuantizedTensor({self.layout.describe()}, shape={tuple(self.tensor.shape)})"


class QuantizedResult(Mapping[str, QuantizedTensor]):
    """The outputs of one quantize call, by key (rowwise_data, rowwise_scale, colwise_data, ...)."""

    def __init__(self, kernel: str, outputs: Dict[str, QuantizedTensor]):
        self.kernel = kernel
        self._outputs = dict(outputs)
        self.extras: Dict[str, torch.Tensor] = {}  # e.g. padded_offsets of segmented kernels

    def __getitem__(self, key: str) -> QuantizedTensor:
        return self._outputs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._outputs)

    def __len__(self) -> int:
        return len(self._outputs)

    def __getattr__(self, key: str) -> QuantizedTensor:
        try:
            return self.__dict__["_outputs"][key]
        except KeyError:
            raise AttributeError(key) from None

    def tensors(self) -> Dict[str, torch.Tensor]:
        return {k: v.tensor for k, v in self._outputs.items()}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._outputs.items())
        return f"QuantizedResult({self.kernel}: {inner})"


_UNSAFE = threading.local()


@contextlib.contextmanager
def unsafe_skip_layout_check():
    """UNSAFE, for demonstrations only: inside this block (this thread), consumers read a QuantizedTensor
    whatever layout it carries, as a hand-written consumer without descriptors would. What that does to
    a training run is shown in examples/moe_training; never use it to make an error go away."""
    before = getattr(_UNSAFE, "on", False)
    _UNSAFE.on = True
    try:
        yield
    finally:
        _UNSAFE.on = before


def expect_layout(value, expected: LayoutDescriptor, what: str) -> torch.Tensor:
    """The consumer's check: `value` must be a QuantizedTensor stored exactly as `expected`."""
    if isinstance(value, QuantizedTensor) and getattr(_UNSAFE, "on", False):
        return value.tensor
    if not isinstance(value, QuantizedTensor):
        raise LayoutMismatchError(
            f"{what}: expected a QuantizedTensor ({expected.describe()}), got {type(value).__name__}; "
            f"pass the tensor returned by quantize(), which carries its layout")
    got = value.layout
    if not got.same_layout(expected):
        diff = [f for f in _IDENTITY_FIELDS if getattr(got, f) != getattr(expected, f)]
        raise LayoutMismatchError(
            f"{what}: this consumer reads {expected.describe()}, but the tensor is {got.describe()} "
            f"(differs in {', '.join(diff)}); quantize with the matching options or use the consumer "
            f"generated for that layout")
    return value.tensor


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_input(x, dtype: torch.dtype, kernel: str, name: str = "x") -> torch.Tensor:
    """Validate a kernel input; return it viewed as 2-D [M, N] (leading dims flattened into M)."""
    if not isinstance(x, torch.Tensor):
        raise LaunchError(f"{kernel}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != dtype:
        raise LaunchError(f"{kernel}: {name} has dtype {x.dtype}; this kernel was generated for {dtype}. "
                          f"Convert with {name}.to({dtype}) or generate a kernel for {x.dtype}")
    if x.dim() < 2:
        raise LaunchError(f"{kernel}: {name} has shape {tuple(x.shape)}; it needs at least 2 dimensions "
                          f"[..., M, N] (leading dimensions are flattened into M)")
    if x.numel() == 0:
        raise LaunchError(f"{kernel}: {name} has shape {tuple(x.shape)} with no elements; quantlay "
                          f"kernels need M >= 1 and N >= 1, so skip the call for empty tensors")
    if x.device.type != "cuda" and not (x.device.type == "cpu" and interpreting()):
        raise LaunchError(f"{kernel}: {name} is on {x.device}; generated kernels run on CUDA devices "
                          f"(move it with {name}.cuda()), or on the CPU under TRITON_INTERPRET=1")
    if x.stride(-1) != 1:
        raise LaunchError(f"{kernel}: {name} has stride {x.stride(-1)} in its last dimension; it must be "
                          f"1 (call {name}.contiguous())")
    try:
        x2 = x.view(-1, x.shape[-1])
    except RuntimeError:
        raise LaunchError(f"{kernel}: {name} with shape {tuple(x.shape)} and strides {x.stride()} cannot "
                          f"flatten its leading dimensions into M without a copy; call "
                          f"{name}.contiguous()") from None
    return x2


def require_multiple(value: int, k: int, message: str) -> None:
    """A divisibility rule of a layout; `message` names the output, the layout, the value and the fix."""
    if value % k != 0:
        raise LaunchError(message.format(value=value, k=k))


def output_buffers(kernel: str, x: torch.Tensor, shapes: Mapping[str, Tuple[int, ...]], out=None, dtypes=None):
    """Allocate the outputs, or check caller-provided ones (exact shape and dtype, contiguous, same device)."""
    out = dict(out or {})
    unknown = set(out) - set(shapes)
    if unknown:
        raise LaunchError(f"{kernel}: out has unknown key {sorted(unknown)[0]!r}; keys are {sorted(shapes)}")
    bufs = {}
    for k, s in shapes.items():
        t = out.get(k)
        dtype = (dtypes or {}).get(k, torch.uint8)
        if t is None:
            bufs[k] = torch.empty(tuple(s), dtype=dtype, device=x.device)
            continue
        if t.dtype != dtype or tuple(t.shape) != tuple(s) or not t.is_contiguous() or t.device != x.device:
            raise LaunchError(f"{kernel}: out[{k!r}] is {t.dtype} {tuple(t.shape)} on {t.device} "
                              f"(contiguous={t.is_contiguous()}); it must be a contiguous {dtype} tensor of "
                              f"shape {tuple(s)} on {x.device}")
        bufs[k] = t
    given = [(k, bufs[k]) for k in shapes if k in out] + [("x (the input)", x)]
    for i, (ka, a) in enumerate(given):
        for kb, b in given[i + 1:]:
            if _overlap(a, b):
                raise LaunchError(f"{kernel}: out[{ka!r}] and {kb if kb.startswith('x ') else f'out[{kb!r}]'} "
                                  f"share memory; every output needs a buffer of its own (one buffer passed "
                                  f"twice gets both outputs' bytes mixed)")
    return bufs


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors' memory ranges intersect (same device)."""
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    def span(t):  # [first byte, last byte + 1) of a tensor with non-negative strides
        return t.data_ptr(), t.data_ptr() + (sum((n - 1) * st for n, st in zip(t.shape, t.stride())) + 1) * t.element_size()
    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1


def check_consumed(kernel: str, key: str, t: torch.Tensor, shape, dtype, device) -> None:
    """A consumer's operand: exactly the producer's physical shape and dtype, contiguous, on `device`."""
    if tuple(t.shape) != tuple(shape) or t.dtype != dtype:
        raise LaunchError(f"{kernel}: {key} has shape {tuple(t.shape)} and dtype {t.dtype}; it must be "
                          f"{dtype} {tuple(shape)} (the shape the producer writes for this input)")
    if not t.is_contiguous():
        raise LaunchError(f"{kernel}: {key} is not contiguous (strides {t.stride()}); consumers read the "
                          f"producer's buffer as written: pass it unchanged, or call .contiguous()")
    if t.device != device:
        raise LaunchError(f"{kernel}: {key} is on {t.device}, the other operand on {device}; move them "
                          f"to one device")


def compiled_for_gpu(x: torch.Tensor) -> bool:
    """True when kernels are compiled for x's GPU rather than run by Triton's interpreter, and the GPU runs
    the sm_90 instructions the kernels' fast encoders use (the 8-bit convert, bf16x2 arithmetic);
    otherwise they use their portable encoders (same codes)."""
    return x.is_cuda and os.environ.get("TRITON_INTERPRET", "0") in ("", "0") and _sm90(x.device)


@functools.lru_cache(maxsize=None)
def _sm90(device) -> bool:
    """Whether a GPU runs sm_90 instructions (asked once per device: the launcher runs every call)."""
    return torch.cuda.get_device_capability(device) >= (9, 0)


MAX_GRID_Y = 65535  # CUDA's limit on grid axis 1 (axis 0 takes 2^31 - 1)


class HopperConfig(NamedTuple):
    """A cast's Hopper (Gluon) kernel launch: the arguments of a module's _launch_hopper after its buffers and
    sizes (speed settings only; every one gives the same bytes)."""
    num_warps: int
    grid_n_first: bool  # consecutive programs walk along N (launch_grid)
    grid_group: int     # groups of that many column tiles side by side (launch_grid)
    tiles: int          # column tiles a program
    staged: bool        # scales staged whole for the scale pass
    maxnreg: int = 0    # a per-thread register cap (0: the compiler's choice)


def register_cap(maxnreg) -> dict:
    """A kernel launch's keyword for a per-thread register cap, or none (0 or None: the compiler's choice)."""
    return {"maxnreg": maxnreg} if maxnreg else {}


def launch_grid(tiles_m: int, tiles_n: int, n_first: bool, group: int = 0):
    """(grid, n_first, group) for a tiles_m x tiles_n launch; the kernel maps its program ids back.

    M-first (the default): consecutive programs walk down a column of tiles, so a transposed output is
    written along its rows. N-first puts the N tiles on grid axis 0, so consecutive programs walk along
    a row of tiles: a row-major input is read, and row-major outputs are written, in long contiguous
    runs (on the H200 the 128x128 FP8 cast went from 90% to 97% of a copy, the transposing casts lost
    1-2%). group > 1 (M-first only): `group` column tiles side by side, M fastest across groups, a
    middle way for transposing kernels (the colwise transposed cast 85.0 -> 87.2% with groups of 4).
    The order changes speed only: a group that does not divide the column tiles is dropped, and an
    order whose axis-1 tile count passes CUDA's limit gives way to the other."""
    if n_first or tiles_n % max(group, 1):
        group = 0
    if n_first and tiles_m > MAX_GRID_Y:
        n_first = False
    elif not n_first and tiles_n // max(group, 1) > MAX_GRID_Y:
        n_first, group = tiles_m <= MAX_GRID_Y, 0
    if n_first:
        return (tiles_n, tiles_m), True, 0
    if group > 1:
        return (tiles_m * group, tiles_n // group), False, group
    return (tiles_m, tiles_n), False, 0


def pair_run(block_m: int, block_n: int, num_warps: int, block_rows: int) -> int:
    """Consecutive row pairs per thread for a kernel that loads even and odd rows apart (PAIR_RUN).

    Triton lays a [block_m / 2, block_n] int16 load out as 16-byte pieces of a row per thread, the lanes
    along N first: block_n / 8 lanes (at most 32) per row, the rest of the warps' threads along M. Each
    thread then holds block_m / 2 / (threads along M) rows; making those consecutive row pairs lets the
    code bytes transpose in words. The result is a power of two that divides the tile's and a block's
    pairs (speed only: any such value gives the same bytes)."""
    lanes_n = min(32, max(1, block_n // 8))
    threads_m = num_warps * (32 // lanes_n)
    run = max(1, (block_m // 2) // threads_m)
    run = 1 << (run.bit_length() - 1)
    return min(run, max(1, block_rows // 2), max(1, block_m // 2))


def tensor_scale(name: str, x: torch.Tensor, given, divisor: float) -> torch.Tensor:
    """A two-level kernel's given per-tensor fp32 scale (amax / divisor), checked (the kernel module
    computes one itself when none is given)."""
    if not isinstance(given, torch.Tensor) or given.numel() != 1 or given.dtype != torch.float32:
        raise LaunchError(f"{name}: tensor_scale must be a 1-element float32 tensor (amax / {divisor:g}), got "
                          f"{given.dtype if isinstance(given, torch.Tensor) else type(given).__name__}"
                          f"{' of ' + str(given.numel()) + ' elements' if isinstance(given, torch.Tensor) else ''}")
    if given.device != x.device:
        raise LaunchError(f"{name}: tensor_scale is on {given.device}, x on {x.device}; move it to x's device")
    return given.reshape(1).contiguous()


@functools.lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device) -> int:
    """Streaming multiprocessors of a CUDA device (persistent kernels launch one program per SM)."""
    return _sm_count(torch.device(device).index or 0)


def needs_int64(*numels: int) -> bool:
    """64-bit offsets are needed once any buffer reaches 2^31 elements."""
    return max(numels) >= 2 ** 31


# Launch settings that change speed only, never bytes, with their defaults (the tile's come from the module).
LAUNCH_DEFAULTS = {"maxnreg": None, "inplace_rows": False, "grid_n_first": False, "grid_group": 0,
                   "opaque_widen": False, "region_m": 1, "scale_pass": False, "l2_prefetch": 0}


def l2_prefetch(kernel: str, ahead, applies: bool) -> int:
    """The kernel's PREFETCH: each program warms L2 with the input tile of the program `ahead` places later
    in launch order (a hint: the bytes never change). On the H200 the fused 1x128 cast, two programs an
    SM, gained about a point at 8192x8192 and up with 66 ahead (the segmented fused cast, whose tile load
    waits for the group lengths, 4 points with 33) and lost 1-2 at 4096x6144; it applies only
    to a compiled (sm_90) kernel with an N-first or M-first grid of one tile per program, whole tiles or
    segmented rows (`applies`), and is 0 elsewhere."""
    if not isinstance(ahead, int) or isinstance(ahead, bool) or ahead < 0:
        raise LaunchError(f"{kernel}: l2_prefetch must be a non-negative int (programs ahead whose input tile "
                          f"each program prefetches into L2), got {ahead!r}; use 0 for none")
    return ahead if applies else 0


def region_rows(kernel: str, region_m, block_m: int, block_rows: int, even: bool, M: int, scale=None) -> int:
    """Tiles per program along M (the kernel's REGION_M): region_m where it applies, else 1.

    A kernel whose transposed scales are plain bytes ([N, M // block_rows], REGION_BLOCK_ROWS) stores
    the region's bytes of each row as one 2-, 4- or 8-byte word: fewer, fuller L2 writes than
    block_m // block_rows bytes per tile (on the H200 the MXFP4 cast with every option off went from
    64.0 to 66.5% of a copy with 2 tiles). Like the grid order it changes speed only: it is dropped (1)
    where the kernel has no such output (block_rows 0), the grid is not EVEN, the region does not divide
    M, a word would pass 8 bytes, or the scale buffer (e.g. a caller's `out` view; None: not checked)
    is not aligned to the word."""
    if not isinstance(region_m, int) or isinstance(region_m, bool) or region_m < 1:
        raise LaunchError(f"{kernel}: region_m must be a positive int (tiles per program along M), got "
                          f"{region_m!r}; use 1 for one tile per program")
    word = region_m * (block_m // block_rows) if block_rows else 0
    if (region_m == 1 or not even or M % (block_m * region_m) or word not in (2, 4, 8)
            or (scale is not None and scale.data_ptr() % word)):
        return 1
    return region_m


def launch_settings(kernel: str, device: torch.device, numel: int, tile, **given) -> dict:
    """Every launch setting: the caller's where given (not None), else the committed table's for this
    kernel at this size on this GPU and Triton version (`quantlay tune`), else the default (`tile` is the
    template's (block_m, block_n, num_warps)). maxnreg=0 asks for no register cap even where the table
    has one (the tuner times uncapped candidates so)."""
    out = dict(zip(("block_m", "block_n", "num_warps"), tile), **LAUNCH_DEFAULTS)
    if device.type == "cuda":
        from .tune import lookup, size_bucket
        out.update(lookup(kernel, size_bucket(numel), device.index or 0) or {})
    out.update((k, v) for k, v in given.items() if v is not None)
    out["maxnreg"] = out["maxnreg"] or None
    return out


def segment_buffers(kernel: str, group_lens, x: torch.Tensor):
    """(G, lengths, group offsets, padded offsets, error flag) for a segmented kernel, with no host sync
    and no launch: the cast's programs (or, past 32 groups, its row-map kernel) read the lengths, check them
    and write both offset buffers (int64, G + 1 entries) and the flag (int32 [1])."""
    if not isinstance(group_lens, torch.Tensor) or group_lens.dim() != 1 or group_lens.dtype not in (
            torch.int32, torch.int64):
        raise LaunchError(f"{kernel}: group lengths must be a 1-D int32 or int64 tensor, got "
                          f"{type(group_lens).__name__}"
                          + (f" {group_lens.dtype} {tuple(group_lens.shape)}" if isinstance(group_lens, torch.Tensor) else ""))
    if group_lens.device != x.device:
        raise LaunchError(f"{kernel}: group lengths are on {group_lens.device}, x on {x.device}; move them "
                          f"to x's device (they are read by the kernel, never by the host)")
    G = group_lens.numel()
    if G == 0:
        raise LaunchError(f"{kernel}: no groups given; pass at least one group length")
    if group_lens.device.type == "cpu":  # host memory: checking costs no sync (GPU lengths: the kernel)
        check_group_lengths(kernel, group_lens, x.shape[0])
    goffs = torch.empty(G + 1, dtype=torch.int64, device=x.device)
    poffs = torch.empty(G + 1, dtype=torch.int64, device=x.device)
    err = torch.empty(1, dtype=torch.int32, device=x.device)
    return G, group_lens.contiguous(), goffs, poffs, err


def check_group_lengths(kernel: str, group_lens: torch.Tensor, M: int) -> None:
    if bool((group_lens < 0).any()) or int(group_lens.sum()) != M:
        raise LaunchError(f"{kernel}: group lengths {_short(group_lens)} must be >= 0 and sum to the rows "
                          f"of x (M = {M}); they sum to {int(group_lens.sum())}")


def _short(t: torch.Tensor) -> str:
    vals = t.tolist()
    return str(vals) if len(vals) <= 8 else f"[{', '.join(map(str, vals[:8]))}, ...] ({len(vals)} groups)"
