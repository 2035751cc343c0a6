"""Compile a generated kernel for sm_90 without a GPU and count its SASS instructions.

    python bench/sass.py KERNEL [--flags on|off | --opt NAME=0|1 ...] [--bm 64 --bn 64 --warps 4] [--lines]

Reads what costs no GPU time: registers, spills, instruction mix (loads/stores and their widths), and how
many instructions run on the ALU pipe (the MXFP4 casts' limit on the H200).
"""
import argparse
import collections
import os
import re
import subprocess
import tempfile

os.environ.pop("TRITON_INTERPRET", None)
import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from quantlay import runtime  # noqa: E402
from quantlay.bench import alu_pipe_share  # noqa: E402
from quantlay.generated import find  # noqa: E402

import named  # noqa: E402  (bench/named.py: edited copies of generated modules)

p = argparse.ArgumentParser()
p.add_argument("kernel", nargs="?", default="mxfp4_cast_transpose_hw")
p.add_argument("--flags", default="on", help="every option of the kernel on or off")
p.add_argument("--opt", action="append", default=[], help="NAME=0|1, overrides --flags for one option")
p.add_argument("--bm", type=int, default=64)
p.add_argument("--bn", type=int, default=64)
p.add_argument("--warps", type=int, default=4)
p.add_argument("--dump", action="store_true")
p.add_argument("--lines", action="store_true", help="SASS instructions per source line (nvdisasm -g), with "
               "the shared-memory, shuffle and barrier ones named")
p.add_argument("--ragged", action="store_true", help="compile the masked (EVEN=False) path")
p.add_argument("--inplace-rows", action="store_true", help="rowwise scale math in place, not on a spread")
p.add_argument("--maxnreg", type=int, default=0, help="register cap (ptxas .maxnreg), 0 for none")
p.add_argument("--grid-group", type=int, default=0, help="GRID_GROUP (column tiles per group; 0: plain M-first)")
p.add_argument("--opaque-widen", action="store_true", help="OPAQUE_WIDEN (the second direction widens anew)")
p.add_argument("--region-m", type=int, default=1, help="REGION_M (tiles per program along M; kernels with REGION_BLOCK_ROWS)")
p.add_argument("--scale-pass", action="store_true", help="SCALE_PASS (each tile's scales staged whole in a scratch buffer)")
p.add_argument("--prefetch", type=int, default=0, help="PREFETCH (programs ahead whose x tile each program asks L2 for)")
p.add_argument("--file", help="compile this module (an edited copy of a generated kernel) instead")
p.add_argument("--ttgir", help="write the kernel's TritonGPU IR (its layouts and layout conversions) to this file")
p.add_argument("--const", action="append", default=[], help="NAME=INT, a constexpr an edited copy adds")
p.add_argument("--ptr", action="append", default=[], help="NAME=TYPE (e.g. scr_ptr=*i16), a pointer an edited copy adds")
a = p.parse_args()
from quantlay.spec import shipped_kernels  # noqa: E402
kernel = shipped_kernels()[a.kernel]
opts = dict.fromkeys(kernel.options, a.flags == "on")
opts.update({kv.split("=")[0]: kv.split("=")[1] == "1" for kv in a.opt})
if a.file:  # experiments: an edited copy of a generated module
    mod = named.module_copy(a.file)
else:
    mod = find(a.kernel, **opts)
fn = mod._quantize_kernel
sig = {}
consts = {k: v for k, v in {"BLOCK_M": a.bm, "BLOCK_N": a.bn, "IDX64": False, "EVEN": not kernel.groups and not a.ragged,
                             "HW_CVT": True, "INPLACE_ROWS": a.inplace_rows,
                             "GRID_N_FIRST": False, "GRID_GROUP": a.grid_group,
                             "OPAQUE_WIDEN": a.opaque_widen, "REGION_M": a.region_m, "SCALE_PASS": a.scale_pass,
                             "PREFETCH": a.prefetch,
                             "PAIR_RUN": runtime.pair_run(a.bm, a.bn, a.warps, 32), "WORDS6": True, "VEC6": True,
                             "G": 8, "GP": 16,  # segmented: 8 groups, each program scanning them
                             **{kv.split("=")[0]: int(kv.split("=")[1]) for kv in a.const}}.items() if k in fn.arg_names}
ptrs = dict(kv.split("=") for kv in a.ptr)
for name in fn.arg_names:
    if name in consts:
        sig[name] = "constexpr"
    elif name in ptrs:
        sig[name] = ptrs[name]
    elif name in ("map_ptr", "lens_ptr", "goffs_ptr", "poffs_ptr"):  # a segmented kernel's row map and offsets
        sig[name] = "*i64"
    elif name == "err_ptr":
        sig[name] = "*i32"
    elif name.endswith("_ptr"):
        key = name[:-len("_ptr")]
        sig[name] = "*i16" if name == "x_ptr" else ("*fp32" if mod.DTYPES.get(key) == torch.float32 else "*u8")
    else:
        sig[name] = "i32"
attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names) if n not in consts}
src = ASTSource(fn, sig, constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()}, attrs=attrs)
opts_c = {"num_warps": a.warps}
if a.maxnreg:
    opts_c["maxnreg"] = a.maxnreg
k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts_c)
if a.ttgir:
    open(a.ttgir, "w").write(k.asm["ttgir"])
cubin = os.path.join(tempfile.mkdtemp(), "k.cubin")
open(cubin, "wb").write(k.asm["cubin"])
tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
sass = subprocess.run([tool, "-sass", cubin], capture_output=True, text=True).stdout
ops = collections.Counter()
for line in sass.splitlines():
    m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", line)
    if m:
        ops[m.group(2)] += 1
total = sum(ops.values())
elems = a.bm * a.bn
usage = subprocess.run([tool, "-res-usage", cubin], capture_output=True, text=True).stdout
regs = re.search(r"REG:(\d+)", usage)
stack = re.search(r"STACK:(\d+)", usage)
print(f"{mod.NAME} tile {a.bm}x{a.bn} warps {a.warps}: regs {regs.group(1) if regs else '?'} "
      f"stack {stack.group(1) if stack else '?'} shared {k.metadata.shared} bytes; {total} SASS instructions "
      f"= {total * 32 * a.warps / elems:.1f} lane-instructions per element, "
      f"{alu_pipe_share(ops) * 32 * a.warps / elems:.1f} of them on the ALU pipe")
for op, n in ops.most_common(25):
    print(f"  {op:24s} {n}")
if a.lines:
    nv = os.path.join(os.path.dirname(tool), "nvdisasm")
    listing = subprocess.run([nv, "-g", "-c", cubin], capture_output=True, text=True).stdout
    where, per_line, named = None, collections.Counter(), collections.defaultdict(collections.Counter)
    for line in listing.splitlines():
        m = re.search(r'//## File "(.*)", line (\d+)', line)
        if m:
            where = (m.group(1), int(m.group(2)))
            continue
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", line)
        if m and where:
            per_line[where] += 1
            if re.match(r"(STS|LDS|SHFL|BAR)", m.group(2)):
                named[where][m.group(2)] += 1
    for (path, ln), n in sorted(per_line.items(), key=lambda kv: -kv[1]):
        text = open(path).read().splitlines()[ln - 1].strip() if os.path.exists(path) else ""
        print(f"{n:5d} {dict(named[(path, ln)]) or ''} {os.path.basename(path)}:{ln}: {text[:80]}")
if a.dump:
    open("/tmp/kernel.sass", "w").write(sass)
    open("/tmp/kernel.ttgir", "w").write(k.asm["ttgir"])
    open("/tmp/kernel.cubin", "wb").write(k.asm["cubin"])
    open("/tmp/kernel.ptx", "w").write(k.asm["ptx"])
