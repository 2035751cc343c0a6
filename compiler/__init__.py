"""quantlay: a compiler from declarative quantization specs to bit-exact Triton kernels.

    import quantlay
    kernel = quantlay.build("dsl/specs/mxfp4_cast_transpose.ql", kernel="mxfp4_cast_transpose_hw",
                            options={"shuffle_rowwise_data": True})
    result = kernel.quantize(x)          # layout-tagged tensors
    y = kernel.dequantize(result, "rowwise")
"""
__version__ = "0.1.0"

from .errors import LaunchError, LayoutMismatchError, QuantlayError, SpecError  # noqa: E402


def build(spec, kernel=None, options=None):
    """Compile one kernel variant of a spec (path or text) at run time; see quantlay.build_cache."""
    from .build_cache import build as _build
    return _build(spec, kernel=kernel, options=options)


__all__ = ["build", "LaunchError", "LayoutMismatchError", "QuantlayError", "SpecError", "__version__"]
