"""Compile generated GEMMs' Hopper kernels for sm_90 on a machine without a GPU; print, as JSON, each
kernel's local memory and stack (spills), its consumer's K loop (SASS instructions), its counts of wgmma
instructions and TMA stores, its shared memory, and which of its partitions read the group offsets in their
tile loops. Run without TRITON_INTERPRET (tests/test_gemm_hopper.py starts it in its own process)."""
import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.runtime import driver

from quantlay import runtime
from quantlay.bench import alu_pipe_share
from quantlay.generated import find


class Sm90:
    """Answers 'sm_90' so kernels compile here; nothing launches through it."""

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


def compile_hopper(name, M=1024, N=768, K=1024, G=4, mod=None, lead=(), add_by_tma=False, split=False):
    """The sm_90 compile of `name`'s Hopper kernel (of `mod`, an edited copy of its module, if given, whose
    kernel takes the arguments `lead` first); accumulating, with the add by a TMA reduce-add or not; grouped
    by rows, for a call whose short last wave may be split (split) or not."""
    mod = mod or find(name)
    phys = mod._physical(M, N, K, G)
    bufs = {key: torch.zeros(phys[key], dtype=mod.DTYPES[key]) for key in phys}
    bm, bn = mod.HOPPER_BLOCK
    descs = [TensorDescriptor(bufs[key].view(torch.float8_e4m3fn), list(phys[key]), [phys[key][1], 1], [rows, 128],
                              gl.NVMMASharedLayout.get_default_for([rows, 128], gl.float8e4nv))
             for key, rows in (("a_data", bm // 2), ("b_data", bn))]
    extra = (torch.zeros(G + 1, dtype=torch.int64), G) if mod.GROUPS else ()
    if mod.GROUPS == "rows":  # the split's partial sums and counts, as the launcher sizes them
        extra += (torch.zeros(132 * bm * bn), torch.zeros(2 * 132 + 1, dtype=torch.int32))
    out = torch.zeros((G, M, N) if mod.GROUPS == "contraction" else (M, N), dtype=mod.OUT_DTYPE)
    # the output by TMA, as the launcher chooses for these aligned shapes
    gdt = gl.float32 if out.dtype == torch.float32 else gl.bfloat16
    c_desc = TensorDescriptor(out, [out.numel() // N, N], [N, 1], [bm // 2, bn],
                              gl.NVMMASharedLayout.get_default_for([bm // 2, bn], gdt))
    if mod.GROUPS == "rows":  # and the windows that store a half across its group's end
        c_desc = (c_desc, TensorDescriptor(out, [M, bm // 2, N], [N, N, 1], [1, bm // 2, bn],
                                           gl.NVMMASharedLayout.get_default_for([1, bm // 2, bn], gdt)))
    else:
        c_desc = (c_desc,)
    stages = mod.HOPPER_STAGES_FP32_OUT if out.dtype == torch.float32 else mod.HOPPER_STAGES
    return mod._hopper_kernel.warmup(*lead, *descs, bufs["a_scale"], bufs["b_scale"], out, *c_desc,
                                     M, N, K, K // 128, *mod._sizes(M, N, K, G), *extra,
                                     B_SCALAR=mod.GROUPS != "contraction", C_TMA=True, BLOCK_M=bm, BLOCK_N=bn,
                                     **({"C_ADD": add_by_tma} if mod.ACCUMULATE else {}),
                                     **({"SPLIT": int(split), "MIN_KB": mod.HOPPER_SPLIT_MIN_KB, "GB": 128}
                                        if mod.GROUPS == "rows" else {}),
                                     STAGES=stages, GROUP_M=8, IDX64=False, num_warps=4, maxnreg=168, grid=(132,))


def cast_module(name, **options):
    """Module `name` with `options`, or the one of the only kernel of the spec file `name` ends in .ql."""
    if name.endswith(".ql"):
        import quantlay
        return quantlay.build(Path(name).read_text())
    return find(name, **options)


def default_cap(mod, warps, tiles, staged):
    """The module's register cap where (warps, tiles, staged) is its default launch's form, else 0 (none)."""
    cfg = mod.HOPPER_CONFIG
    return cfg.maxnreg if (warps, tiles, staged) == (cfg.num_warps, cfg.tiles, cfg.staged) else 0


def compile_hopper_cast(name, M=512, N=512, warps=2, tiles=1, staged=False, mod=None, groups=8, inline=True,
                        **options):
    """The sm_90 compile of a cast's Hopper kernel (of `mod`, else cast_module(name, **options); staged: the
    scale outputs are the scale pass's scratch), in the program order of the module's HOPPER_CONFIG, with its
    register cap where the form is its default's; a segmented cast's for `groups` groups, their lengths scanned
    by each program (inline) or its row map read."""
    mod = mod or cast_module(name, **options)
    x = torch.zeros(M, N, dtype=torch.bfloat16)
    sizes = (M, N, groups) if hasattr(mod, "INLINE_MAP_GROUPS") else (M, N)  # a segmented cast: `groups` groups
    bufs = {k: torch.empty(v[2], dtype=mod.DTYPES[k]) for k, v in mod._shapes(*sizes).items()}
    bm, bn = mod._hopper_block(warps, 1)
    cap = default_cap(mod, warps, tiles, staged)
    segs = {}
    if len(sizes) == 3:  # the row map, its lengths, both offset buffers and the flag; scanned inline (G > 0) or not
        segs = {"G": groups if inline else 0}
        seg = (torch.zeros(2 * sizes[0], dtype=torch.int64), torch.zeros(groups, dtype=torch.int64),
               torch.zeros(groups + 1, dtype=torch.int64), torch.zeros(groups + 1, dtype=torch.int64),
               torch.zeros(1, dtype=torch.int32))
    return mod._hopper_kernel.warmup(x.view(torch.int32), *bufs.values(), M, N, N // 2, *mod._sizes(*sizes), N // bn,
                                     *(seg if segs else ()), BM=bm, BN=bn, W=warps, TILES=tiles,
                                     GRID_N_FIRST=mod.HOPPER_CONFIG.grid_n_first,
                                     GRID_GROUP=mod.HOPPER_CONFIG.grid_group, IDX64=False, SCALE_PASS=staged,
                                     **mod._hopper_layouts(warps), **segs, **runtime.register_cap(cap),
                                     num_warps=warps, grid=(1,))


def sass_ops(cubin: bytes):
    """SASS opcode -> count."""
    return collections.Counter(m.group(2) for m in re.finditer(r"/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)",
                                                               cuobjdump(cubin, "-sass")))


def cuobjdump(cubin: bytes, flag: str) -> str:
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([str(tool), flag, f.name], capture_output=True, text=True, check=True).stdout


def resources(cubin: bytes):
    text = cuobjdump(cubin, "-res-usage")
    return {k.lower(): int(re.search(rf"\b{k}:(\d+)", text).group(1)) for k in ("REG", "STACK", "LOCAL")}


def k_loop(cubin: bytes):
    """The innermost SASS loop that holds the MMAs (a consumer's K loop): its instructions, how many move a
    value into a uniform register (R2UR: loop control the compiler could not keep uniform), its MMA
    instructions, its local-memory accesses (spills) and its MMA waits."""
    code = [(int(m.group(1), 16), m.group(2)) for m in
            re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", cuobjdump(cubin, "-sass"))]
    mma = [a for a, op in code if "GMMA" in op]
    back = [(int(j.group(1), 16), src) for src, op in code for j in [re.search(r"\bBRA (0x[0-9a-f]+)", op)]
            if j and int(j.group(1), 16) < src]  # backward branches: (loop head, loop end)
    body = min(([o for a, o in code if head <= a <= end] for head, end in back
                if any(head <= a <= end for a in mma)), key=len)
    # the MMA waits (warpgroup.wait N: N groups may stay in flight); ptxas puts a wait 0 after every MMA
    # where it serializes them
    waits = [int(m.group(1), 16) for o in body for m in [re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", o)] if m]
    return {"k_loop": len(body), "k_loop_r2ur": sum("R2UR" in o for o in body),
            "k_loop_local": sum(bool(re.match(r"(@!?U?P\w+ )?(LDL|STL)\b", o)) for o in body), "mmas": sum("GMMA" in o for o in body),
            "mma_waits": waits}


def offsets_in_loops(ttgir: str):
    """Per region of the warp-specialized kernel (consumer, consumer, loader): whether its tile loop reads
    the group offsets (int64 scalar loads) inside the loop. A compiler that drops a loop-carried offset
    leaves the load before the loop only: Triton 3.6 did so for a token range carried a tile ahead in the
    loader, which then fetched every tile from its program's first group."""
    regions = re.split(r"\n\s*partition\d+\(", ttgir[ttgir.index("ttg.warp_specialize"):])
    loops = [r[r.find("scf.for"):] if "scf.for" in r else "" for r in regions]
    return [re.search(r"tt\.load [^\n]*: !tt\.ptr<i64>", loop) is not None for loop in loops]


def cast_report(name, options, warps=2, tiles=1, staged=False, inline=True):
    """A cast's Hopper kernel compiled for sm_90: registers, spills, its global stores by width, and its
    instructions per element of a thread's tile, all and those of the ALU pipe."""
    mod = cast_module(name, **options)
    k = compile_hopper_cast(name, warps=warps, tiles=tiles, staged=staged, mod=mod, inline=inline)
    ops = sass_ops(k.asm["cubin"])
    bm, bn = mod._hopper_block(warps, tiles)
    per_element = 32 * warps / (bm * bn)
    return {**resources(k.asm["cubin"]), "shared": k.metadata.shared,
            "maxnreg": default_cap(mod, warps, tiles, staged),
            "stores": {op: n for op, n in ops.items() if op.startswith("STG")},
            "lane_instructions_per_element": sum(ops.values()) * per_element,
            "alu_per_element": alu_pipe_share(ops) * per_element}


if __name__ == "__main__":
    driver.set_active(Sm90())
    report = {}
    if sys.argv[1] == "--casts":  # NAME:FLAGS:WARPS:TILES:STAGED[:map], FLAGS 0 or 1 for every layout option;
        for arg in sys.argv[2:]:  # NAME may be a spec file (.ql) of one kernel without options; map: a segmented
            name, flags, warps, tiles, staged, *row_map = arg.split(":")  # cast reading its row map (else 8 groups
            options = {} if name.endswith(".ql") else dict.fromkeys(find(name).OPTIONS, flags == "1")  # scanned)
            report[arg] = cast_report(name, options, int(warps), int(tiles), staged == "1", inline=row_map != ["map"])
        print(json.dumps(report))
        sys.exit(0)
    for name in sys.argv[1:]:  # NAME+add: an accumulating GEMM with its add by a TMA reduce-add; NAME+split
        base, _, variant = name.partition("+")
        k = compile_hopper(base, add_by_tma=variant == "add", split=variant == "split")
        ptx = k.asm["ptx"]
        report[name] = {**resources(k.asm["cubin"]), **k_loop(k.asm["cubin"]), "wgmma": ptx.count("wgmma.mma_async"),
                        "offsets_in_loops": offsets_in_loops(k.asm["ttgir"]), "shared": k.metadata.shared,
                        "tma_stores": ptx.count("cp.async.bulk.tensor.2d.global.shared"),
                        "tma_window_stores": ptx.count("cp.async.bulk.tensor.3d.global.shared"),
                        "tma_adds": ptx.count("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add")}
    print(json.dumps(report))
