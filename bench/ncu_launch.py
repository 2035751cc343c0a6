"""Launch named generated kernels once each (after warm-up launches) at one shape, for a profiler.

    ncu --clock-control none --profile-from-start off --kernel-name regex:'_quantize_kernel|triton_fp8' \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \\
        python3 bench/ncu_launch.py fp8_1x128_rocm_te fp8_1x128_colwise_transposed@off --shape 16384x8192

Each kernel runs with its tuned configuration (compiler/tuning.json), options all on (`NAME@off`: all
off). A name `torchao:FUNCTION` runs that torchao 0.18 blockwise FP8 kernel instead (the peer to compare
stall reasons with); its autotuned config is printed. A name `gemm:TEXT` runs the first GEMM of
`quantlay bench --groups gemm` whose name holds TEXT (ours or a peer's; `_` in TEXT also matches a space, e.g.
`gemm:wgrad_t_G=8_equal_[gluon]`) at --gemm-shape; the Hopper kernel
is `_hopper_kernel` to ncu's --kernel-name, e.g. regex:'_hopper_kernel|gemm|xmma'. Warm-up launches
(compilation, torchao's autotuning) run with the profiler stopped: ncu (with --profile-from-start off) sees exactly one launch per name.
"""
import os
import argparse

import torch

from quantlay import inputs

import named  # bench/named.py: KERNEL[@off] names

p = argparse.ArgumentParser()
p.add_argument("kernels", nargs="+")
p.add_argument("--shape", default="16384x8192")
p.add_argument("--gemm-shape", default="8192x8192x8192")
a = p.parse_args()
M, N = (int(v) for v in a.shape.split("x"))
x = inputs.normal(M, N, seed=0).cuda()
cudart = torch.cuda.cudart()


def profile_one(label, launch):
    for _ in range(2):  # compile (and autotune) outside the profiled range
        launch()
    torch.cuda.synchronize()
    cudart.cudaProfilerStart()
    launch()
    torch.cuda.synchronize()
    cudart.cudaProfilerStop()
    print(f"profiled {label}")


for name in a.kernels:
    if name.startswith("gemm:"):
        from quantlay.bench import gemm_entry
        entry = gemm_entry(name.split(":", 1)[1])
        run = entry.make(*(int(v) for v in a.gemm_shape.split("x")))[0]  # ours also return flops and a check
        profile_one(f"{entry.name} {a.gemm_shape}", run)
        continue
    if ".py" in name:  # an edited copy of a generated module: PATH[:bm,bn,warps,maxnreg,inplace,n_first,group,opaque]
        path, _, cfg_text = name.partition(":")
        mod = named.module_copy(path)
        cfg = named.launch_config(cfg_text) if cfg_text else {}
        profile_one(name, lambda: mod.quantize(x, **cfg))
        continue
    if name.startswith("torchao:"):
        os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")
        from torchao.prototype.blockwise_fp8_training import kernels as tk  # optional peer
        fn_name = name.split(":", 1)[1]
        fn = getattr(tk, fn_name)
        profile_one(name, lambda: fn(x, 128))
        print(f"  {fn_name} autotuned config: {getattr(getattr(tk, fn_name + '_kernel', None), 'best_config', '?')}")
        continue
    k, mod = named.shipped(name)
    args = (inputs.equal_groups(M, "cuda"),) if k.groups else ()
    profile_one(mod.NAME, lambda: mod.quantize(x, *args))
