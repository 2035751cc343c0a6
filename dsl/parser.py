"""Spec text -> lark parse tree -> AST (with line and column on every node).

Spec text is untrusted: it is only ever tokenized and parsed here, never evaluated, and no raw text
of it reaches generated source (names are checked identifiers, numbers are re-printed by quantlay).
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Optional

import lark
from lark import Lark, Token, Transformer, v_args

from quantlay.errors import SpecError, did_you_mean

from . import ast

GRAMMAR_PATH = Path(__file__).with_name("quantlay.lark")

# How lark's terminal names read in an error message.
_READABLE = {
    "NAME": "a name", "INT": "an integer", "HEX": "a hex integer (0x..)", "FLOAT": "a number",
    "BLOCK": "a block shape such as 1x32", "STORE_TARGET": "'data' or 'scale'", "NOT": "'not'",
    "SEGMENTED": "'segmented'", "ACCUMULATE": "'accumulate'",
    "LPAR": "'('", "RPAR": "')'", "LBRACE": "'{'", "RBRACE": "'}'", "LSQB": "'['", "RSQB": "']'",
    "COMMA": "','", "COLON": "':'", "EQUAL": "'='", "SLASH": "'/'", "VBAR": "'|'", "__ANON_0": "'->'",
    "__ANON_1": "'..'", "$END": "end of file",
}
_KEYWORDS = ("layout", "profile", "kernel", "option", "blocks", "element", "scale", "store", "as",
             "if", "not", "view", "permute", "pad", "fill", "data", "segmented", "groups", "gemm",
             "accumulate", "format")


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(GRAMMAR_PATH.read_text(), parser="lalr", propagate_positions=True,
                maybe_placeholders=True)


def _readable(names) -> list:
    out = []
    for n in sorted(names):
        if n in _READABLE:
            out.append(_READABLE[n])
        elif n.isupper() and n.lower() in _KEYWORDS:
            out.append(f"'{n.lower()}'")
        else:
            out.append(n)
    return sorted(set(out))


def _span(meta) -> ast.Span:
    return ast.Span(getattr(meta, "line", 0) or 0, getattr(meta, "column", 0) or 0)


def _tspan(tok: Token) -> ast.Span:
    return ast.Span(tok.line, tok.column)


class _ToAst(Transformer):
    # dims ---------------------------------------------------------------------------------------
    @v_args(meta=True)
    def dim_div(self, meta, items):
        name, k = items
        if int(k) == 0:
            raise SpecError("division by zero in a view dimension", line=k.line, column=k.column,
                            hint="divide by a positive integer such as rows/16")
        return ast.Dim("div", str(name), int(k), _tspan(name))

    def dim_name(self, items):
        return ast.Dim("name", str(items[0]), 1, _tspan(items[0]))

    def dim_const(self, items):
        return ast.Dim("const", None, int(items[0]), _tspan(items[0]))

    # layouts ------------------------------------------------------------------------------------
    def out_shape(self, items):
        return tuple(items)

    def pad_item(self, items):
        return (str(items[0]), int(items[1]), _tspan(items[0]))

    def pad_clause(self, items):
        return tuple(items)

    def fill_clause(self, items):
        return int(items[0])

    @v_args(meta=True)
    def view_step(self, meta, items):
        return ("view", tuple(items), _span(meta))

    @v_args(meta=True)
    def permute_step(self, meta, items):
        return ("permute", tuple(int(t) for t in items), _span(meta))

    @v_args(meta=True)
    def layout_decl(self, meta, items):
        name, rows, cols, out, pad, fill, *steps = items
        return ast.LayoutDecl(str(name), (str(rows), str(cols)), out, pad or (), fill, tuple(steps),
                              _tspan(name))

    # values and calls ---------------------------------------------------------------------------
    def v_name(self, items):
        return ast.Value("name", str(items[0]), _tspan(items[0]))

    def v_int(self, items):
        return ast.Value("int", int(str(items[0]), 0), _tspan(items[0]))

    def v_float(self, items):
        return ast.Value("float", float(str(items[0])), _tspan(items[0]))

    def v_range(self, items):
        return ast.Value("range", (int(items[0]), int(items[1])), _tspan(items[0]))

    def arg(self, items):
        return ast.Arg(str(items[0]), items[1], _tspan(items[0]))

    def call(self, items):
        name, *args = items
        return ast.Call(str(name), tuple(a for a in args if a is not None), _tspan(name))

    def element_stmt(self, items):
        return ("element", items[0])

    def scale_stmt(self, items):
        return ("scale", items[0])

    def format_decl(self, items):
        name, definition = items
        return ast.FormatDecl(str(name), definition, _tspan(name))

    # profiles and kernels -----------------------------------------------------------------------
    @v_args(meta=True)
    def profile_decl(self, meta, items):
        name, *stmts = items
        fmt = _collect_formats(stmts, f"profile '{name}'")
        return ast.Profile(str(name), fmt.get("element"), fmt.get("scale"), _tspan(name))

    def condition(self, items):
        neg, name = items
        return ast.Condition(neg is not None, str(name), _tspan(name))

    def pipe_item(self, items):
        return ast.PipeItem(items[0], items[1])

    def pipe(self, items):
        return tuple(items)

    @v_args(meta=True)
    def store_stmt(self, meta, items):
        target, pipe = items
        return ast.Store(str(target), pipe, _tspan(target))

    def profile_ref(self, items):
        return (str(items[0]), _tspan(items[0]))

    @v_args(meta=True)
    def direction(self, meta, items):
        name, block, segmented, condition, profile, *stmts = items
        a, b = (int(v) for v in str(block).split("x"))
        fmt = _collect_formats([s for s in stmts if isinstance(s, tuple)], f"direction '{name}'")
        stores = tuple(s for s in stmts if isinstance(s, ast.Store))
        return ast.Direction(str(name), (a, b), _tspan(block), profile, fmt.get("element"),
                             fmt.get("scale"), stores, _tspan(name), segmented is not None, condition)

    def groups_param(self, items):
        return (str(items[0]), str(items[1]), _tspan(items[0]))

    def option_stmt(self, items):
        return ("option", tuple((str(t), _tspan(t)) for t in items))

    @v_args(meta=True)
    def kernel_decl(self, meta, items):
        name, inp, dtype, d0, d1, groups, *stmts = items
        options = tuple(o for s in stmts if isinstance(s, tuple) and s[0] == "option" for o in s[1])
        dirs = tuple(s for s in stmts if isinstance(s, ast.Direction))
        return ast.Kernel(str(name), str(inp), str(dtype), _tspan(dtype), (str(d0), str(d1)), options,
                          dirs, _tspan(name), groups)

    # GEMMs --------------------------------------------------------------------------------------
    def operand_options(self, items):
        return tuple((str(t), _tspan(t)) for t in items if t is not None)

    def operand(self, items):
        name, kernel, options, direction = items
        return ast.Operand(str(name), str(kernel), options or (), str(direction), _tspan(name),
                           _tspan(kernel), _tspan(direction))

    def gemm_groups(self, items):
        return (str(items[0]), _tspan(items[0]))

    @v_args(meta=True)
    def gemm_decl(self, meta, items):
        name, a, b, groups, out, acc = items
        return ast.Gemm(str(name), (a, b), groups, str(out), _tspan(out), acc is not None, _tspan(name))

    def start(self, items):
        return items


def _collect_formats(stmts, where):
    out = {}
    for role, call in stmts:
        if role in out:
            raise SpecError(f"{where} declares its {role} format twice", line=call.span.line,
                            column=call.span.column, hint=f"keep one '{role} ...' line")
        out[role] = call
    return out


def parse(text: str, path: Optional[str] = None) -> ast.SpecFile:
    """Parse spec text into an AST. Raises SpecError with line, column and caret."""
    try:
        tree = _parser().parse(text)
        items = _ToAst().transform(tree)
    except lark.exceptions.VisitError as exc:  # a SpecError raised inside the transformer
        err = exc.orig_exc
        if isinstance(err, SpecError):
            raise err.with_source(text, path) from None
        raise
    except lark.exceptions.UnexpectedInput as exc:
        raise _syntax_error(exc, text, path) from None
    return ast.SpecFile(
        layouts=tuple(i for i in items if isinstance(i, ast.LayoutDecl)),
        profiles=tuple(i for i in items if isinstance(i, ast.Profile)),
        kernels=tuple(i for i in items if isinstance(i, ast.Kernel)),
        source=text, path=path, gemms=tuple(i for i in items if isinstance(i, ast.Gemm)),
        formats=tuple(i for i in items if isinstance(i, ast.FormatDecl)))


def _syntax_error(exc, text, path) -> SpecError:
    line, column = getattr(exc, "line", None), getattr(exc, "column", None)
    if line is None or line < 1:  # unexpected end of input: point just past the last character
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
    hint = None
    if isinstance(exc, lark.exceptions.UnexpectedToken):
        tok = exc.token
        expected = _readable(exc.expected)
        got = "end of file" if tok.type == "$END" else f"'{tok}'"
        msg = f"unexpected {got}; expected {_join(expected)}"
        if tok.type == "NAME":
            kws = [e.strip("'") for e in expected if e.startswith("'")]
            hint = did_you_mean(str(tok), kws)
    elif isinstance(exc, lark.exceptions.UnexpectedCharacters):
        ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "?"
        allowed = _readable(exc.allowed or [])
        msg = f"unexpected character {ch!r}" + (f"; expected {_join(allowed)}" if allowed else "")
    else:  # UnexpectedEOF
        msg = f"unexpected end of file; expected {_join(_readable(getattr(exc, 'expected', [])))}"
    return SpecError(msg, line=line, column=column, source=text, path=path, hint=hint)


def _join(items) -> str:
    items = list(items)
    if not items:
        return "something else"
    if len(items) == 1:
        return items[0]
    return "one of " + ", ".join(items)
