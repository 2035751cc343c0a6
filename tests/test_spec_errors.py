"""Malformed specs: each gives a SpecError with line, column, a caret and the fix."""
import pytest

from quantlay.dsl.parser import parse
from quantlay.errors import SpecError
from quantlay.spec import load

GOOD_KERNEL = """
kernel k(x: bf16[M, N]) {
    option flip
    rowwise blocks 1x32 profile mxfp4_hw {
        store data as packed(low: even) | preshuffle16x16 if flip
        store scale as row_major
    }
}
"""

# (spec text, expected line, expected column, fragments the message must contain)
CASES = [
    ("kernal k(x: bf16[M, N]) {}", 1, 1, ["unexpected 'kernal'", "did you mean 'kernel'?"]),
    ("kernel k(x: bf16[M N]) {}", 1, 20, ["unexpected 'N'", "expected ','"]),
    ("layout a(r, c) = view(r/0, c)", 1, 25, ["division by zero"]),
    ("profile p { element e2m1(ties: ) }", 1, 32, ["unexpected ')'", "a name"]),
    ("layout a(r, c) = view(r, c) @", 1, 29, ["unexpected character '@'"]),
    ("kernel k(x: bf16[M, N]) {\n    rowwise blocks 1x32 profile mxfp4_hw {\n        store data as packed(low: even)\n        store scale as row_majr\n    }\n}",
     4, 24, ["unknown layout 'row_majr'", "did you mean 'row_major'?"]),
    ("kernel k(x: bf15[M, N]) {}", 1, 13, ["unknown input dtype 'bf15'", "did you mean 'bf16'?"]),
    ("kernel k(x: bf16[M, N]) {\n  rowise blocks 1x32 profile mxfp4_hw {}\n}", 2, 3,
     ["unknown direction 'rowise'", "did you mean 'rowwise'?"]),
    ("kernel k(x: bf16[M, N]) {\n  rowwise blocks 32x1 profile mxfp4_hw {}\n}", 2, 18,
     ["rowwise blocks 32x1", "write blocks 1x32"]),
    ("kernel k(x: bf16[M, N]) {\n  rowwise blocks 1x32 profile mxfp4_hv {}\n}", 2, 31,
     ["unknown profile 'mxfp4_hv'", "did you mean 'mxfp4_hw'?"]),
    ("kernel k(x: bf16[M, N]) {\n  rowwise blocks 1x32 {\n    element e2m1(ties: evn)\n  }\n}", 3, 24,
     ["ties: evn is not one of even, away, zero", "did you mean 'even'?"]),
    ("kernel k(x: bf16[M, N]) {\n  rowwise blocks 1x32 {\n    element e2m1(tie: even)\n  }\n}", 3, 18,
     ["e2m1 has no setting 'tie'", "did you mean 'ties'?"]),
    ("kernel k(x: bf16[M, N]) {\n  rowwise blocks 1x32 {\n    element e2m1(ties: even)\n    scale e8m0(mode: even, clamp: 0..300)\n  }\n}",
     4, 35, ["clamp must be a range lo..hi within 0..255"]),
    ("kernel k(x: bf16[M, N]) {\n  option flip, flip\n}", 2, 16, ["option 'flip' is declared twice"]),
    ("kernel k(x: bf16[M, N]) {\n  option flip\n  rowwise blocks 1x32 profile mxfp4_hw {\n    store data as packed(low: even)\n    store scale as row_major\n  }\n}",
     2, 10, ["option 'flip' is declared but no layout uses it"]),
    ("kernel k(x: bf16[M, N]) {\n  option flip\n  rowwise blocks 1x32 profile mxfp4_hw {\n    store data as packed(low: even) | preshuffle16x16 if flp\n    store scale as row_major\n  }\n}",
     4, 58, ["unknown option 'flp'", "did you mean 'flip'?"]),
    ("layout bad(rows, cols) = view(rows/16, 8, cols)", 1, 8, ["multiply to rows/16*8", "make the constants multiply to 16"]),
    ("layout bad(rows, cols) = view(cols, rows)", 1, 8, ["view must list the factors of rows first"]),
    ("layout bad(rows, cols) = view(rows, cols) permute(0, 0)", 1, 8, ["is not a permutation"]),
    ("layout bad(rows, cols) pad(rows: 32) = view(rows, cols)", 1, 8, ["pads but declares no fill value", "add 'fill N'"]),
    ("layout bad(rows, cols) = view(rows, colz)", 1, 37, ["unknown name 'colz'", "did you mean 'cols'?"]),
    ("layout bad(rows, cols) -> (rows, rows) = permute(1, 0)", 1, 8, ["does not hold rows*cols elements"]),
    ("layout transpose(rows, cols) = view(rows, cols)", 1, 8, ["layout 'transpose' is already declared"]),
    ("kernel k(x: bf16[M, N]) {\n  rowwise blocks 1x32 profile mxfp4_hw {\n    store data as preshuffle16x16\n    store scale as row_major\n  }\n}",
     3, 11, ["needs exactly one 'packed(...)' step"]),
    ("kernel k(x: bf16[M, N]) {\n  rowwise blocks 1x32 profile mxfp4_hw {\n    store data as preshuffle16x16 | packed(low: even)\n    store scale as row_major\n  }\n}",
     3, 19, ["comes before packed but is not a plain axis permutation"]),
    ("kernel k(x: bf16[M, N]) {\n  rowwise blocks 1x32 profile mxfp4_hw {\n    store data as packed(low: even)\n  }\n}",
     2, 3, ["does not say how to store its scale", "store scale as row_major"]),
    ("kernel k(x: bf16[M, N]) {\n  rowwise blocks 1x32 profile mxfp4_hw {\n    store data as packed(low: even)\n    store scale as transpose(fill: 3)\n  }\n}",
     4, 30, ["does not pad, so fill has no effect"]),
    ("kernel import(x: bf16[M, N]) {}", 1, 8, ["kernel name 'import' is reserved"]),
    ("kernel k(x: bf16[M, N]) {", 1, 25, ["unexpected end of file", "'}'"]),
]


@pytest.mark.parametrize("text,line,column,fragments", CASES)
def test_spec_error(text, line, column, fragments):
    with pytest.raises(SpecError) as info:
        load(text + "\n")
    err = info.value
    msg = str(err)
    assert (err.line, err.column) == (line, column), msg
    for f in fragments:
        assert f in msg, msg
    # The message shows the offending line with a caret under the column.
    lines = msg.splitlines()
    caret = next(i for i, l in enumerate(lines) if l.strip() == "^")
    assert lines[caret].index("^") - 4 == column - 1
    assert f"<spec>:{line}:{column}:" in lines[0]


def test_good_kernel_loads():
    (k,) = load(GOOD_KERNEL)
    assert k.options == ("flip",)


def test_parse_keeps_positions():
    spec = parse("\n\nlayout a(r, c) = view(r, c)\n")
    assert (spec.layouts[0].span.line, spec.layouts[0].span.column) == (3, 8)
