"""What the bench scripts name: `KERNEL[@off]` (a shipped kernel with every option on, or off with
`@off`), an edited copy of a generated module by its path, and a launch configuration as a CSV line."""
import importlib.util

from quantlay.generated import find
from quantlay.spec import shipped_kernels


def shipped(name: str):
    """'fp8_1x128_nvte@off' -> (the kernel's spec, its generated module with every option off)."""
    base, _, flags = name.partition("@")
    kernel = shipped_kernels()[base]
    return kernel, find(base, **dict.fromkeys(kernel.options, flags != "off"))


def module_copy(path: str):
    """An edited copy of a generated module (e.g. exp/v.py), loaded under a name of its own."""
    spec = importlib.util.spec_from_file_location("copy_" + path.replace("/", "_").replace(".", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


LAUNCH_KEYS = ("block_m", "block_n", "num_warps", "maxnreg", "inplace_rows", "grid_n_first", "grid_group",
               "opaque_widen", "region_m", "scale_pass", "l2_prefetch")


def launch_config(text: str) -> dict:
    """'bm,bn,warps,maxnreg,inplace_rows[,grid_n_first,grid_group,opaque_widen,region_m,scale_pass,l2_prefetch]' -> quantize()'s
    keyword arguments (maxnreg 0: no cap; the fields left out take 0; region_m, scale_pass and l2_prefetch only where
    given, so that copies of modules from before them still take the line)."""
    values = ([int(v) for v in text.split(",")] + [0] * len(LAUNCH_KEYS))[:len(LAUNCH_KEYS)]
    cfg = dict(zip(LAUNCH_KEYS, values))
    if not cfg["region_m"]:
        del cfg["region_m"]
    if not cfg["scale_pass"]:
        del cfg["scale_pass"]
    if not cfg["l2_prefetch"]:
        del cfg["l2_prefetch"]
    for k in ("inplace_rows", "grid_n_first", "opaque_widen", "scale_pass"):
        if k in cfg:
            cfg[k] = bool(cfg[k])
    return cfg
