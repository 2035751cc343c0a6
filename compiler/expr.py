"""Tiny integer expression trees.

The layout algebra builds index arithmetic once as an `Expr`; the same tree is rendered into the
generated Triton kernel and the generated launcher, and evaluated on Python ints or torch tensors by the
reference and by the tests. So the kernel's arithmetic and the reference's cannot drift apart.
Only non-negative integers appear, so `//` and `%` agree between Python, torch and Triton.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union


class Expr:
    def __add__(self, o): return add(self, as_expr(o))
    def __radd__(self, o): return add(as_expr(o), self)
    def __mul__(self, o): return mul(self, as_expr(o))
    def __rmul__(self, o): return mul(as_expr(o), self)
    def __floordiv__(self, o): return floordiv(self, as_expr(o))
    def __mod__(self, o): return mod(self, as_expr(o))

    def render(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def evaluate(self, env: Mapping[str, object]):  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True)
class Const(Expr):
    value: int

    def render(self) -> str:
        return str(self.value)

    def evaluate(self, env):
        return self.value


@dataclass(frozen=True)
class Var(Expr):
    name: str

    def render(self) -> str:
        return self.name

    def evaluate(self, env):
        return env[self.name]


@dataclass(frozen=True)
class Bin(Expr):
    op: str  # one of + * // %
    a: Expr
    b: Expr

    def render(self) -> str:
        return f"({self.a.render()} {self.op} {self.b.render()})"

    def evaluate(self, env):
        x, y = self.a.evaluate(env), self.b.evaluate(env)
        if self.op == "+":
            return x + y
        if self.op == "*":
            return x * y
        if self.op == "//":
            return x // y
        return x % y


ExprLike = Union[Expr, int]


def as_expr(v: ExprLike) -> Expr:
    return v if isinstance(v, Expr) else Const(int(v))


def add(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and a.value == 0:
        return b
    if isinstance(b, Const) and b.value == 0:
        return a
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value + b.value)
    return Bin("+", a, b)


def mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value * b.value)
    for x, y in ((a, b), (b, a)):
        if isinstance(x, Const):
            if x.value == 0:
                return Const(0)
            if x.value == 1:
                return y
    return Bin("*", a, b)


def floordiv(a: Expr, b: Expr) -> Expr:
    if isinstance(b, Const) and b.value == 1:
        return a
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value // b.value)
    return Bin("//", a, b)


def mod(a: Expr, b: Expr) -> Expr:
    if isinstance(b, Const) and b.value == 1:
        return Const(0)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value % b.value)
    return Bin("%", a, b)


def cdiv(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if isinstance(b, Const) and b.value == 1:
        return a
    return floordiv(add(a, add(b, Const(-1))) if not isinstance(b, Const) else add(a, Const(b.value - 1)), b)


def rup(a: ExprLike, b: ExprLike) -> Expr:
    b = as_expr(b)
    return mul(cdiv(a, b), b)


def subs(e: Expr, env: Mapping[str, Expr]) -> Expr:
    """`e` with each Var named in `env` replaced by its expression (simplified as it is rebuilt)."""
    if isinstance(e, Var):
        return env.get(e.name, e)
    if isinstance(e, Bin):
        a, b = subs(e.a, env), subs(e.b, env)
        return {"+": add, "*": mul, "//": floordiv, "%": mod}[e.op](a, b)
    return e
