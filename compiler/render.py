"""Template context -> Triton source, through Jinja2 with StrictUndefined.

A misspelled variable in a template is an error, never empty text. The rendered module is parsed
with `ast.parse` before it is returned, so a template slip fails at generation time.
"""
from __future__ import annotations

import ast as pyast
import functools

import jinja2

from . import __version__
from .ir import VariantIR
from .lower import lower
from .paths import TEMPLATES_DIR


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["pyrepr"] = repr
    return env


def render_variant(variant: VariantIR) -> str:
    return _render("mx_cast.py.jinja", lower(variant))


def render_gemm(g) -> str:
    from .gemm import lower as lower_gemm
    return _render("gemm.py.jinja", lower_gemm(g))


def _render(template: str, ctx) -> str:
    ctx["version"] = __version__
    src = environment().get_template(template).render(**ctx)
    src = "\n".join(line.rstrip() for line in src.splitlines()) + "\n"
    while "\n\n\n\n" in src:
        src = src.replace("\n\n\n\n", "\n\n\n")
    pyast.parse(src)
    return src
