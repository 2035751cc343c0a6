"""Loading specs: text or path -> AST -> IR, with the shipped library always in scope."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from quantlay.dsl import ast
from quantlay.dsl.parser import parse
from quantlay.errors import SpecError, did_you_mean

from . import ir
from .paths import DSL_DIR
LIBRARY_PATH = DSL_DIR / "library.ql"
SPECS_DIR = DSL_DIR / "specs"


@functools.lru_cache(maxsize=1)
def library() -> ast.SpecFile:
    return parse(LIBRARY_PATH.read_text(), "dsl/library.ql")


@functools.lru_cache(maxsize=1)
def library_formats() -> Dict[str, type]:
    """The element formats dsl/library.ql declares (format NAME = minifloat(...)), by name."""
    return ir.declared_formats(library())


def read(spec: Union[str, Path]) -> Tuple[str, Optional[str]]:
    """A spec path or spec text -> (text, display path)."""
    if isinstance(spec, str) and spec in shipped_names():  # a shipped spec by name, e.g. "mxfp8"
        spec = SPECS_DIR / f"{spec}.ql"
    elif isinstance(spec, str) and spec.isidentifier() and not Path(spec).exists():
        raise SpecError(f"no spec file and no shipped spec is called {spec!r}",
                        hint=did_you_mean(spec, shipped_names()) or
                        f"pass a path to a .ql file, or a shipped spec: {', '.join(shipped_names())}")
    if isinstance(spec, Path) or (isinstance(spec, str) and "\n" not in spec and spec.endswith(".ql")):
        p = Path(spec)
        if not p.is_file():
            raise SpecError(f"spec file {str(p)!r} does not exist",
                            hint="pass a path to a .ql file, the spec text itself, or a shipped spec's "
                                 f"name ({', '.join(shipped_names())})")
        try:
            return p.read_bytes().decode("utf-8"), display_path(p)
        except UnicodeDecodeError as exc:
            raise SpecError(f"spec file {str(p)!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                            f"offset {exc.start})", hint="save the spec as UTF-8") from None
        except OSError as exc:
            raise SpecError(f"spec file {str(p)!r} cannot be read: {exc.strerror}") from None
    return str(spec), None


def display_path(p: Path) -> str:
    p = Path(p).resolve()
    root = DSL_DIR.parent
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return p.name


def load(spec: Union[str, Path]) -> List[ir.KernelIR]:
    """Parse and validate a spec: every rule of the IR, and every variant lowered to its template
    context (what `build` and `generate` need), so `show` reports every error they would."""
    text, path = read(spec)
    kernels = ir.build(parse(text, path), library())
    from .lower import lower
    try:
        for k in kernels:
            for v in k.variants():
                lower(v)
    except SpecError as exc:
        raise exc.with_source(text, path) from None
    return kernels


def load_gemms(spec: Union[str, Path]):
    """The spec's GEMMs: operands resolve against its own kernels and every shipped spec's."""
    from . import gemm
    text, path = read(spec)
    tree = parse(text, path)
    if not tree.gemms:
        return []
    own = {k.name: k for k in ir.build(tree, library())}
    producers = {**shipped_kernels(), **own}
    return gemm.build(tree, producers, content_hash(library().source + "\0" + text))


def shipped_specs() -> List[Path]:
    return sorted(SPECS_DIR.glob("*.ql"))


def shipped_names() -> List[str]:
    """The shipped specs' names (file names without .ql): `quantlay show mxfp8` works anywhere."""
    return [p.stem for p in shipped_specs()]


@functools.lru_cache(maxsize=1)
def shipped_kernels() -> Dict[str, ir.KernelIR]:
    """Every kernel of the shipped specs by name (each spec loaded once)."""
    return {k.name: k for p in shipped_specs() for k in load(p)}


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
