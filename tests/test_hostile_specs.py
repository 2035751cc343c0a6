"""Spec text is untrusted: hostile text is rejected or rendered inert, never executed, never a traceback."""
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantlay.errors import SpecError
from quantlay.generate import compile_kernel
from quantlay.spec import load

BODY = """{{
    option {opt}
    rowwise blocks 1x32 profile mxfp4_hw {{
        store data as packed(low: even) | preshuffle16x16 if {opt}
        store scale as row_major
    }}
}}
"""


@pytest.mark.parametrize("text", [
    'kernel k(x: bf16[M, N]) { option __import__("os").system("echo pwned") }',
    "kernel k}}{{x}}(x: bf16[M, N]) {}",
    "kernel k(x: bf16[M, N]) {{% for i in range(9) %}}{}",
    "kernel k\n(x: bf16[M, N]); import os\n{}",
    'layout a(rows, cols) = view("rows", cols)',
    "layout a(rows, cols) = view(rows, cols) permute(1, 0) # ok\nexec('1')",
])
def test_hostile_text_is_a_spec_error(text):
    with pytest.raises(SpecError):
        load(text)


@pytest.mark.parametrize("name", ["__class__", "import", "_private", "tl", "quantize", "x" * 80])
def test_hostile_names_are_rejected(name):
    with pytest.raises(SpecError):
        load(f"kernel {name}(x: bf16[M, N]) " + BODY.format(opt="flip"))
    with pytest.raises(SpecError):
        load("kernel k(x: bf16[M, N]) " + BODY.format(opt=name))


def test_comments_with_code_and_jinja_stay_out_of_the_generated_source():
    text = ("# {{ evil }} {% raw %} __import__('os').system('x') \"\"\"\n"
            "kernel k(x: bf16[M, N]) " + BODY.format(opt="flip"))
    (k,) = load(text)
    for _, src in compile_kernel(k):
        assert "evil" not in src and "__import__" not in src and "{%" not in src
        compile(src, "<generated>", "exec")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=string.printable, max_size=200))
def test_random_text_never_crashes_the_compiler(text):
    try:
        load(text)
    except SpecError as exc:
        assert str(exc)


VALID = "kernel k(x: bf16[M, N]) " + BODY.format(opt="flip")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(VALID) - 1), st.integers(0, 8), st.text(alphabet=string.printable, max_size=6))
def test_mutated_valid_specs_never_crash(pos, cut, insert):
    text = VALID[:pos] + insert + VALID[pos + cut:]
    try:
        for k in load(text):
            compile_kernel(k)
    except SpecError as exc:
        assert str(exc)
