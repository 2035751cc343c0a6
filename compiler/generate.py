"""`quantlay generate`: every shipped spec -> one module per kernel variant under generated/.

Output is byte-for-byte deterministic (sorted, no timestamps), each file is written only when its
content changed, and `MANIFEST.json` lists every file with its sha256. `--check` regenerates in
memory and fails on any stale, missing or unlisted file with the exact command that fixes it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from quantlay.errors import SpecError

from . import spec as specmod
from .ir import KernelIR, VariantIR
from .render import render_gemm, render_variant

MANIFEST = "MANIFEST.json"
INIT = "__init__.py"
FIX = "quantlay generate"
HEADER = b"# GENERATED FILE, DO NOT EDIT"


def compile_kernel(kernel: KernelIR) -> List[Tuple[VariantIR, str]]:
    """Render every variant (what `generate` writes); an option whose two settings render the same code
    is an error."""
    rendered = [(v, render_variant(v)) for v in kernel.variants()]
    _check_options_matter(kernel, {v.options: src for v, src in rendered}.__getitem__)
    return rendered


def compile_variant(variant: VariantIR) -> str:
    """Render one variant, and the few more (every option off, each one alone on) that prove every
    option changes the code: n + 1 renders for n options, not 2^n."""
    kernel = variant.kernel
    memo: Dict[tuple, str] = {}

    def source(options: tuple) -> str:
        if options not in memo:
            memo[options] = render_variant(kernel.variant(**dict(options)))
        return memo[options]
    _check_options_matter(kernel, source)
    return source(variant.options)


def _check_options_matter(kernel: KernelIR, source) -> None:
    for opt, span in zip(kernel.options, kernel.option_spans):
        off = tuple((n, False) for n in kernel.options)
        on = tuple((n, n == opt) for n in kernel.options)
        if _strip_identity(source(off)) == _strip_identity(source(on)):
            raise SpecError(f"option '{opt}' does not change the generated code of kernel {kernel.name}",
                            line=span.line, column=span.column,
                            hint="an option must select a different layout; remove it or use it")


def _strip_identity(src: str) -> str:
    """The code that computes: no header, docstring, name, options or layout descriptors.

    An option that only renames the layout tag, without changing a single computed byte, is an error.
    """
    body = src[src.index("\nimport "):]
    return "\n".join(l for l in body.splitlines()
                     if not l.startswith(("NAME = ", "OPTIONS = ")) and "LayoutDescriptor(" not in l
                     and not l.strip().startswith(('"""', "#")))


def render_all(spec_paths: Optional[List[Path]] = None) -> Dict[str, str]:
    """{file name: content} for everything generate writes (the manifest included)."""
    files: Dict[str, str] = {}
    entries = []
    for path in spec_paths or specmod.shipped_specs():
        for kernel in specmod.load(path):
            for variant, src in compile_kernel(kernel):
                fname = f"{variant.name}.py"
                if fname in files:
                    raise SpecError(f"two kernels generate {fname}: kernel names must be unique across "
                                    f"dsl/specs", path=str(path))
                files[fname] = src
                entries.append({
                    "file": fname, "kernel": kernel.name, "spec": kernel.spec_path,
                    "options": dict(variant.options), "sha256": hashlib.sha256(src.encode()).hexdigest(),
                })
        for g in specmod.load_gemms(path):
            fname = f"{g.module_name}.py"
            src = render_gemm(g)
            if fname in files:
                raise SpecError(f"two declarations generate {fname}: names must be unique across dsl/specs",
                                path=str(path))
            files[fname] = src
            entries.append({"file": fname, "kernel": g.name, "spec": g.spec_path, "options": {},
                            "sha256": hashlib.sha256(src.encode()).hexdigest()})
    entries.sort(key=lambda e: e["file"])
    files[INIT] = _init_source(entries)
    manifest = {"generated_by": "quantlay generate", "files": entries + [
        {"file": INIT, "sha256": hashlib.sha256(files[INIT].encode()).hexdigest()}]}
    files[MANIFEST] = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    return files


def _init_source(entries) -> str:
    lines = ['# GENERATED FILE, DO NOT EDIT: written by `quantlay generate`.',
             '"""Generated kernels, one module per kernel variant. Look one up by its kernel and options:',
             '',
             '    from quantlay.generated import find',
             '    mod = find("mxfp4_cast_transpose_hw", shuffle_rowwise_data=True)',
             '    result = mod.quantize(x)',
             '"""',
             'import importlib',
             '',
             'VARIANTS = {']
    for e in entries:
        opts = ", ".join(f"({k!r}, {v!r})" for k, v in e["options"].items())
        lines.append(f"    ({e['kernel']!r}, ({opts}{',' if len(e['options']) == 1 else ''})): "
                     f"{e['file'][:-3]!r},")
    lines += ['}', '', '',
              'def find(kernel, **options):',
              '    """The generated module of `kernel` with `options` (unset options are False)."""',
              '    for name, value in options.items():',
              '        if not isinstance(value, bool):',
              '            raise TypeError(f"option {name}={value!r} must be True or False, not a {type(value).__name__}")',
              '    names = {k: dict(o) for k, o in VARIANTS}',
              '    if kernel not in names:',
              '        raise KeyError(f"no generated kernel {kernel!r}; known: {sorted(names)}")',
              '    for (k, opts), mod in VARIANTS.items():',
              '        if k == kernel and dict(opts) == {n: bool(options.get(n, False)) for n in dict(opts)}:',
              '            unknown = set(options) - set(dict(opts))',
              '            if unknown:',
              '                raise KeyError(f"kernel {kernel!r} has no option {sorted(unknown)[0]!r}")',
              '            return importlib.import_module(f"{__name__}.{mod}")',
              '    raise KeyError(f"no variant of {kernel!r} with options {options}")',
              '']
    return "\n".join(lines)


def write(out_dir: Path, files: Dict[str, str]) -> List[str]:
    """Write changed files, delete the generated files no longer listed; return what changed.

    Each file is written to a temporary name and renamed over the old one, the manifest last: a write
    stopped half-way leaves whole files (old or new) and a manifest that `--check` compares against.
    Only files quantlay wrote (listed in the previous manifest, or carrying the generated header) are
    deleted."""
    out_dir.mkdir(parents=True, exist_ok=True)
    changed = []
    last = (INIT, MANIFEST)
    for name in sorted(files, key=lambda n: (n in last, last.index(n) if n in last else 0, n)):
        p = out_dir / name
        if not p.exists() or p.read_text() != files[name]:
            tmp = out_dir / f".{name}.tmp{os.getpid()}"
            tmp.write_text(files[name])
            os.replace(tmp, p)
            changed.append(name)
    previous = _listed(out_dir / MANIFEST) if (out_dir / MANIFEST).exists() else set()
    for p in sorted(out_dir.iterdir()):
        if p.is_file() and p.name not in files and (p.name in previous or _is_generated(p)):
            p.unlink()
            changed.append(f"(removed) {p.name}")
    return changed


def _listed(manifest: Path) -> set:
    try:
        return {e["file"] for e in json.loads(manifest.read_text())["files"]}
    except (ValueError, KeyError, TypeError, OSError):
        return set()


def _is_generated(p: Path) -> bool:
    if p.name.startswith(".") and ".tmp" in p.name:  # left by a write that was stopped
        return True
    try:
        with p.open("rb") as f:
            return HEADER in f.read(512)
    except OSError:
        return False


def check(out_dir: Path, files: Dict[str, str]) -> List[str]:
    """Problems that make generated/ stale: [] when it is fresh."""
    problems = []
    for name, content in sorted(files.items()):
        p = out_dir / name
        if not p.exists():
            problems.append(f"missing: {name}")
        elif p.read_text() != content:
            problems.append(f"stale: {name} differs from what the specs generate")
    if out_dir.exists():
        for p in sorted(out_dir.iterdir()):
            if p.is_file() and p.name not in files:
                problems.append(f"extra: {p.name} is not listed in {MANIFEST}")
    return problems
