"""When each consumer warpgroup of a Hopper GEMM enters a tile, has mapped it, ends its K loop and has issued
the tile's store (clock64 on its SM), and how long it waited in that tile for its stages (the loader) and
for its MMAs, for the first tiles of every program. It answers whether a program's two warpgroups run in
step (whether their epilogues coincide, the tensor cores idle then) and where a tile's time goes.

    python3 bench/gemm_timeline.py fp8_gemm_grouped_wgrad_t --shape 4096x7168x2048 [--groups 8] [--random] [--csv t.csv]
    python3 bench/gemm_timeline.py fp8_gemm_grouped_wgrad_t --compile-only    # sm_90 compile, no GPU
    python3 bench/gemm_timeline.py fp8_gemm_grouped_wgrad_t --module edited_copy.py   # a variant's timeline

The kernel is an edited copy of the generated module: stamps inserted at anchors of its consumer (an
anchor the template no longer has is an error, not a silent no-op). The GEMM runs through the bench's
entry for that name (its operands and group sizes), on the copy's launcher. The clocks around every wait
add instructions to the K loop: compare stamped runs with each other, not with the shipped kernel's speed.
"""
import argparse
import re
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import named  # noqa: E402  (bench/named.py: edited copies of generated modules)

TILES = 64  # tiles stamped per program and warpgroup
EVENTS = ("top", "start", "loop_end", "stored", "ready_wait", "mma_wait")  # the last two: cycles summed over the tile
WAITS = {"ready_wait": r"mbarrier\.wait\(ready\.", "mma_wait": r"\w+ = warpgroup_mma_wait\("}  # the timed waits
CLOCK = "gl.inline_asm_elementwise('mov.u64 $0, %clock64;', '=l', [], dtype=gl.int64, is_pure=False, pack=1)"


def _record(event: int, value: str, indent: int) -> str:
    return (f"{' ' * indent}gl.store(tl_ptr + ((gl.program_id(0) * 2 + HALF) * {TILES} + n_t) * {len(EVENTS)} + {event}, "
            f"{value}, mask=n_t < {TILES})\n")


def _stamp(event: int, indent: int) -> str:
    return f"{' ' * indent}ts = {CLOCK}\n" + _record(event, "ts", indent)


def _timed(pattern: str, total: str, text: str) -> str:
    """Every line matching `pattern` (a wait) with its cycles added to `total`."""
    def wrap(m):
        pad = m.group(1)
        return f"{pad}w0 = {CLOCK}\n{pad}{m.group(2)}\n{pad}{total} += {CLOCK} - w0\n"
    new, n = re.subn(rf"(?m)^( +)({pattern}[^\n]*)\n", wrap, text)
    if n == 0:
        raise SystemExit(f"gemm_timeline: no wait {pattern!r} in the consumer: the template changed; "
                         f"update bench/gemm_timeline.py")
    return new


def _sub(pattern: str, repl, text: str, count: int = 1) -> str:
    new, n = re.subn(pattern, repl, text, count=count)
    if n != count:
        raise SystemExit(f"gemm_timeline: anchor {pattern!r} found {n} times, expected {count}: "
                         f"the template changed; update bench/gemm_timeline.py")
    return new


def instrument(source: str) -> str:
    """The module's text with the timeline: a buffer `TIMELINE` [programs, 2, TILES, 3] (int64) that the
    launcher passes to the kernel and the consumers write."""
    s = _sub(r"def _hopper_kernel\(", "def _hopper_kernel(tl_ptr, ", source)
    s = _sub(r"\(_hopper_consumer, \(", "(_hopper_consumer, (tl_ptr, ", s, count=2)
    s = _sub(r"_hopper_kernel\[grid\]\(", "_hopper_kernel[grid](TIMELINE, ", s)
    s = _sub(r"\ndef _launch_hopper\(", "\nTIMELINE = None\n\n\ndef _launch_hopper(", s)
    # the consumer (the loader has an `if found:` too): its tile counter, and in each copy of its tile code
    # (the tile loop's; grouped by rows, a split call's piece after it) stamps at the tile's start, after the
    # K loop and after the store
    head, rest = s.split("def _hopper_consumer(", 1)
    body, tail = rest.split("\n@gluon.jit\n", 1)
    body = "def _hopper_consumer(tl_ptr, " + body
    body = _sub(r"(\n    it = 0\n)", r"\1    n_t = 0\n", body)
    for total, pattern in WAITS.items():
        body = _timed(pattern, total, body)
    top = "        ready_wait = ts * 0\n        mma_wait = ts * 0\n"
    loop, end = re.split(r"(?=\n    if C_TMA:\n        tma\.store_wait\(0\)\n)", body)
    loop, piece = (re.split(r"(?=\n    if SPLIT:\n        if pieces > 0:\n)", loop) + [""])[:2]
    loop = _sub(r"(\n    for t in range\([^\n]*\n)", lambda m: m.group(1) + _stamp(0, 8) + top, loop)
    loop = _tile(loop, 12)
    if piece:
        piece = _tile(_sub(r"(\n        if pieces > 0:\n)", lambda m: m.group(1) + _stamp(0, 12) + textwrap.indent(top, "    "),
                           piece), 16)
    return head + loop + piece + end + "\n@gluon.jit\n" + tail


def _tile(text: str, pad: int) -> str:
    """One copy of the consumer's tile code (its `if found:` body indented by `pad`) with its stamps: the
    tile mapped, the K loop's end (before the tile's last `if C_TMA:`, its epilogue; accumulating, an earlier
    one loads the tile it adds into; or, a split call's piece, before its partial sums), the store."""
    sp = " " * pad
    text = _sub(rf"(\n{sp[4:]}if found:\n)", lambda m: m.group(1) + _stamp(1, pad), text)
    text = _sub(rf"(?s)(.*\n)({sp}(?:if C_TMA:|wr = gl\.arange)[^\n]*\n)", lambda m: m.group(1) + _stamp(2, pad) + m.group(2),
                text)
    return (text.rstrip("\n") + "\n" + _stamp(3, pad) + _record(4, "ready_wait", pad) + _record(5, "mma_wait", pad)
            + f"{sp}n_t += 1\n")


def load_copy(name: str, source=None):
    """(the generated module of `name`, a stamped copy of it or of the module file `source`)."""
    from quantlay.generated import find
    mod = find(name)
    path = Path(tempfile.mkdtemp()) / f"{name}_timeline.py"
    path.write_text(instrument(Path(source or mod.__file__).read_text()))
    return mod, named.module_copy(str(path))


def summarize(t: torch.Tensor, programs: int) -> str:
    """Per program, tile and warpgroup: the tile's mapping, K loop (and its waits for stages and MMAs),
    epilogue and way to the next tile, in cycles; how much of one warpgroup's epilogue the other's overlaps;
    the lag between their tile starts."""
    top, start, end, stored, ready, mma = range(len(EVENTS))
    parts = {k: [] for k in ("mapping", "K loop", "waits for stages", "waits for MMAs", "epilogue",
                             "to the next tile")}
    overlap, lag = [], []
    # each program's tiles and its span, its first tile's entry to its last store (its SM's clock): where the
    # programs' tile counts differ, the span of those with most tiles is the kernel's
    spans, last_loop, last_epilogue = {}, [], []
    for p in range(programs):
        done = 0
        for n in range(TILES):
            ev = t[p, :, n]
            if (ev[:, :stored + 1] == 0).any():
                continue
            done += 1
            last = int(ev[:, stored].max())
            for h in range(2):
                parts["mapping"].append(int(ev[h, start] - ev[h, top]))
                parts["K loop"].append(int(ev[h, end] - ev[h, start]))
                parts["waits for stages"].append(int(ev[h, ready]))
                parts["waits for MMAs"].append(int(ev[h, mma]))
                parts["epilogue"].append(int(ev[h, stored] - ev[h, end]))
                if n + 1 < TILES and t[p, h, n + 1, top] != 0:
                    parts["to the next tile"].append(int(t[p, h, n + 1, top] - ev[h, stored]))
            lo = max(int(ev[0, end]), int(ev[1, end]))
            hi = min(int(ev[0, stored]), int(ev[1, stored]))
            span = max(int(ev[0, stored] - ev[0, end]), 1)
            overlap.append(max(hi - lo, 0) / span)
            lag.append(int(ev[1, start] - ev[0, start]))
        if done:
            spans.setdefault(done, []).append(last - int(t[p, :, 0, top].min()))
            ev = t[p, :, done - 1]  # the program's last tile (in a split call, its piece of the tail)
            last_loop += [int(ev[h, end] - ev[h, start]) for h in range(2)]
            last_epilogue += [int(ev[h, stored] - ev[h, end]) for h in range(2)]
    if not lag:
        return "no complete tile was stamped"
    med = statistics.median
    per_count = "; ".join(f"{k} tiles: {len(v)} programs, median {med(v):.0f}, max {max(v)}" for k, v in sorted(spans.items()))
    return (f"tiles stamped: {len(lag)} (both warpgroups)\n"
            "median cycles a tile: " + ", ".join(f"{k} {med(v):.0f}" for k, v in parts.items() if v) + "\n"
            f"epilogues at the same time: median {med(overlap):.0%} of warpgroup 0's epilogue\n"
            f"warpgroup 1's tile start after warpgroup 0's: median {med(lag):.0f} cycles (in step when this is "
            f"small against the K loop)\n"
            f"program spans (cycles), by tiles a program ran: {per_count}\n"
            f"each program's last tile (a split call's piece): K loop median {med(last_loop):.0f}, epilogue median "
            f"{med(last_epilogue):.0f}, max {max(last_epilogue)} (the last piece of a tail tile adds the pieces)")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("gemm", nargs="?", default="fp8_gemm_grouped_wgrad_t")
    p.add_argument("--shape", default="4096x7168x2048", help="M x N x K as the bench takes it")
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--random", action="store_true", help="the bench's random-length groups (grouped fprop)")
    p.add_argument("--module", help="stamp this edited copy of the GEMM's generated module instead (a variant)")
    p.add_argument("--csv", help="write every stamp: program, warpgroup, tile, event, cycles")
    p.add_argument("--compile-only", action="store_true", help="compile the stamped kernel for sm_90 (no GPU)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=INT",
                   help="set a launch constant of the copy first, e.g. HOPPER_STAGES=4 (repeatable)")
    a = p.parse_args()
    if a.compile_only:  # run without TRITON_INTERPRET
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        import hopper_compile  # the sm_90 compile of tests/test_gemm_hopper.py
        from triton.runtime import driver
        driver.set_active(hopper_compile.Sm90())
        _, copy = load_copy(a.gemm, a.module)
        k = hopper_compile.compile_hopper(a.gemm, mod=copy, lead=(torch.zeros(1, dtype=torch.int64),))
        print(a.gemm, "stamped, sm_90:", hopper_compile.resources(k.asm["cubin"]), hopper_compile.k_loop(k.asm["cubin"]))
        return
    from quantlay import bench
    orig, copy = load_copy(a.gemm, a.module)
    orig._launch_hopper = copy._launch_hopper  # the module's gemm() launches the stamped kernel
    for kv in a.set:
        key, _, value = kv.partition("=")
        if not key.startswith("HOPPER_") or not hasattr(copy, key):
            raise SystemExit(f"gemm_timeline: --set {kv}: the module has no launch constant {key!r}")
        setattr(copy, key, int(value))
    lengths = "random" if a.random else "equal"
    entry = bench.gemm_entry(f"{a.gemm}_G={a.groups}_{lengths}" if "grouped" in a.gemm else f"quantlay_{a.gemm}")
    run = entry.make(*(int(v) for v in a.shape.split("x")))[0]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    copy.TIMELINE = torch.zeros(sms, 2, TILES, len(EVENTS), dtype=torch.int64, device="cuda")
    run()  # compiles
    copy.TIMELINE.zero_()
    run()
    torch.cuda.synchronize()
    t = copy.TIMELINE.cpu()
    print(f"{entry.name} {a.shape}{' ' + ' '.join(a.set) if a.set else ''}:")
    print(summarize(t, sms))
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("program,warpgroup,tile,event,cycles\n")
            for (prog, h, n, e) in (t != 0).nonzero().tolist():
                f.write(f"{prog},{h},{n},{EVENTS[e]},{int(t[prog, h, n, e])}\n")


if __name__ == "__main__":
    main()
