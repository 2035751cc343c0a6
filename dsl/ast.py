"""The AST: what a spec says, with the line and column of every part.

Produced by `quantlay.dsl.parser` from lark's parse tree; nothing here is validated yet beyond syntax.
`quantlay.ir` turns it into the frozen, validated IR and uses the spans to point at mistakes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union


@dataclass(frozen=True)
class Span:
    line: int
    column: int


@dataclass(frozen=True)
class Dim:
    """One view dimension: `rows/32` (kind 'div'), `rows` ('name') or `16` ('const')."""
    kind: str
    name: Optional[str]
    value: int
    span: Span


@dataclass(frozen=True)
class LayoutDecl:
    name: str
    params: Tuple[str, str]
    out: Optional[Tuple[Dim, Dim]]
    pad: Tuple[Tuple[str, int, Span], ...]
    fill: Optional[int]
    steps: Tuple[Tuple[str, tuple, Span], ...]  # ("view", dims) or ("permute", ints)
    span: Span


@dataclass(frozen=True)
class Value:
    kind: str  # name | int | float | range
    raw: Union[str, int, float, Tuple[int, int]]
    span: Span


@dataclass(frozen=True)
class Arg:
    key: str
    value: Value
    span: Span


@dataclass(frozen=True)
class Call:
    name: str
    args: Tuple[Arg, ...]
    span: Span


@dataclass(frozen=True)
class Condition:
    negate: bool
    option: str
    span: Span


@dataclass(frozen=True)
class PipeItem:
    call: Call
    condition: Optional[Condition]


@dataclass(frozen=True)
class Store:
    target: str  # data | scale
    items: Tuple[PipeItem, ...]
    span: Span


@dataclass(frozen=True)
class FormatDecl:
    name: str
    definition: Call            # minifloat(exponent: ..., ...)
    span: Span


@dataclass(frozen=True)
class Profile:
    name: str
    element: Optional[Call]
    scale: Optional[Call]
    span: Span


@dataclass(frozen=True)
class Direction:
    name: str
    block: Tuple[int, int]
    block_span: Span
    profile: Optional[Tuple[str, Span]]
    element: Optional[Call]
    scale: Optional[Call]
    stores: Tuple[Store, ...]
    span: Span
    segmented: bool = False
    condition: Optional[Condition] = None


@dataclass(frozen=True)
class Kernel:
    name: str
    input_name: str
    dtype: str
    dtype_span: Span
    dims: Tuple[str, str]
    options: Tuple[Tuple[str, Span], ...]
    directions: Tuple[Direction, ...]
    span: Span
    groups: Optional[Tuple[str, str, Span]] = None  # (parameter name, count name, span)


@dataclass(frozen=True)
class Operand:
    """`a: KERNEL(OPTION, ...).DIRECTION`: a GEMM operand is what a producer kernel wrote."""
    name: str
    kernel: str
    options: Tuple[Tuple[str, Span], ...]
    direction: str
    span: Span
    kernel_span: Span
    direction_span: Span


@dataclass(frozen=True)
class Gemm:
    name: str
    operands: Tuple[Operand, ...]
    groups: Optional[Tuple[str, Span]]   # rows | contraction
    out_dtype: str
    out_span: Span
    accumulate: bool
    span: Span


@dataclass(frozen=True)
class SpecFile:
    layouts: Tuple[LayoutDecl, ...]
    profiles: Tuple[Profile, ...]
    kernels: Tuple[Kernel, ...]
    source: str
    path: Optional[str]
    gemms: Tuple[Gemm, ...] = ()
    formats: Tuple[FormatDecl, ...] = ()
