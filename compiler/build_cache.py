"""`quantlay.build`: compile a kernel variant at run time into a content-addressed cache.

The cache key is the sha256 of the rendered source plus the quantlay and Triton versions, never a
timestamp, so an edited spec or template can never be served a stale kernel. The module is written to
`$QUANTLAY_CACHE` (default ~/.cache/quantlay) because Triton needs real source files.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Dict, Optional

from quantlay.errors import QuantlayError, SpecError, did_you_mean

from . import __version__
from . import spec as specmod
from .generate import compile_variant


def cache_dir() -> Path:
    """$QUANTLAY_CACHE, or ~/.cache/quantlay when it is unset or empty."""
    return Path(os.environ.get("QUANTLAY_CACHE") or Path.home() / ".cache" / "quantlay")


def build(spec, kernel: Optional[str] = None, options: Optional[Dict[str, bool]] = None):
    """Compile `kernel` (a kernel or gemm of the spec; default: its only one) with `options`; return its
    module."""
    kernels = specmod.load(spec)
    gemms = {g.name: g for g in specmod.load_gemms(spec)}
    if kernel in gemms or (kernel is None and not kernels and len(gemms) == 1):
        if options:
            raise SpecError("a gemm has no options: its operands name the producers' option settings")
        return build_gemm(gemms[kernel] if kernel else next(iter(gemms.values())))
    if not kernels:
        raise SpecError("the spec declares no kernel", hint="add 'kernel NAME(x: bf16[M, N]) { ... }'")
    names = [k.name for k in kernels] + list(gemms)
    if kernel is None:
        if len(kernels) > 1:
            raise SpecError(f"the spec declares {len(kernels)} kernels ({', '.join(names)}); "
                            f"pick one with kernel=...")
        k = kernels[0]
    else:
        if kernel not in names:
            raise SpecError(f"the spec has no kernel '{kernel}'",
                            hint=did_you_mean(kernel, names) or f"kernels: {', '.join(names)}")
        k = kernels[names.index(kernel)]
    variant = k.variant(**(options or {}))
    src = compile_variant(variant)
    return _load(variant.name, src)


def _load(name: str, src: str):
    """The module of `src`, written to the content-addressed cache and imported once per process."""
    import triton
    key = hashlib.sha256(f"{__version__}\0{triton.__version__}\0{src}".encode()).hexdigest()[:32]
    mod_name = f"quantlay_cache_{name}_{key[:12]}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    path = cache_dir() / key / f"{name}.py"
    try:
        current = path.read_text() if path.is_file() else None
    except (OSError, UnicodeDecodeError):  # an unreadable or corrupt entry is written anew
        current = None
    if current != src:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(src)
            os.replace(tmp, path)
        except OSError as exc:
            raise QuantlayError(f"cannot write the kernel cache entry {path}: {exc.strerror or exc}; set "
                                f"QUANTLAY_CACHE to a writable folder (default ~/.cache/quantlay)") from None
    spec_ = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec_)
    sys.modules[mod_name] = module
    spec_.loader.exec_module(module)
    return module

def build_gemm(g):
    """Compile a GEMM of any spec (its GemmIR) into the cache; return its module."""
    from .render import render_gemm
    return _load(g.module_name, render_gemm(g))
