"""`KERNEL[@off]` names of the bench scripts: a shipped kernel with every option on, or off with `@off`."""
from quantlay.generated import find
from quantlay.spec import shipped_kernels


def shipped(name: str):
    """'fp8_1x128_nvte@off' -> (the kernel's spec, its generated module with every option off)."""
    base, _, flags = name.partition("@")
    kernel = shipped_kernels()[base]
    return kernel, find(base, **dict.fromkeys(kernel.options, flags != "off"))
