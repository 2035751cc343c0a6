"""Spec text is untrusted: hostile text is rejected or rendered inert, never executed, never a traceback."""
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantlay.errors import SpecError
from quantlay.generate import compile_kernel
from quantlay.spec import load, load_gemms

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


# Grammar-aware mutations of the shipped specs: whole tokens deleted, repeated, swapped or replaced by
# a token of the same kind (or a hostile one), so most mutants parse and reach the IR and lowering
# rules, where a random string stops at its first character.
HOSTILE = {"NAME": ["class", "x", "torch", "__class__", "kernel", "G", "M", "row_major", "packed", "true",
                    "e8m0", "e2m1", "f32", "transpose", "rowwise", "colwise", "a" * 70],
           "INT": ["0", "1", "3", "255", "256", "4096", "4097", "99999999999999999999"],
           "BLOCK": ["1x1", "32x32", "1x3", "128x1", "1x256", "0x32"],
           "FLOAT": ["1e-40", "0.0", "1e300", "2.5"], "HEX": ["0x0", "0xFF", "0x1FF"]}


def _tokens(text):
    from quantlay.dsl.parser import _parser
    return [t for t in _parser().lex(text) if t.type not in ("COMMENT",)]


def _mutate(rng, text, toks, pool):
    i = rng.randrange(len(toks))
    t = toks[i]
    op = rng.choice(["delete", "repeat", "swap", "replace", "replace", "replace"])
    a, b = t.start_pos, t.end_pos
    if op == "delete":
        return text[:a] + text[b:]
    if op == "repeat":
        return text[:b] + " " + str(t) + text[b:]
    if op == "swap" and i + 1 < len(toks):
        u = toks[i + 1]
        return text[:a] + str(u) + text[b:u.start_pos] + str(t) + text[u.end_pos:]
    choices = pool.get(t.type, []) + HOSTILE.get(t.type, [])
    return text[:a] + (rng.choice(choices) if choices else "") + text[b:]


def test_mutated_shipped_specs_never_crash_the_compiler():
    import random

    from quantlay.spec import shipped_specs
    rng = random.Random(1234)
    sources = [p.read_text() for p in shipped_specs()]
    streams = [_tokens(src) for src in sources]
    pool = {}
    for toks in streams:
        for t in toks:
            pool.setdefault(t.type, set()).add(str(t))
    pool = {k: sorted(v) for k, v in pool.items()}
    counts = {"syntax": 0, "meaning": 0, "accepted": 0}
    for n in range(400):
        j = rng.randrange(len(sources))
        text = sources[j]
        for _ in range(rng.choice([1, 1, 2])):
            text = _mutate(rng, text, _tokens(text) if _ != 0 else streams[j], pool)
        try:
            load(text)
            load_gemms(text)
            counts["accepted"] += 1
        except SpecError as exc:
            msg = str(exc)
            assert msg.startswith("<spec>:") or msg.startswith("dsl/library.ql:"), msg
            assert exc.line and "^" in msg, f"no position and caret:\n{msg}"
            counts["syntax" if "unexpected" in exc.message else "meaning"] += 1
    # the mutants reach past the parser: the rules of meaning are exercised, not only the grammar
    assert counts["meaning"] >= 40 and counts["syntax"] >= 40 and counts["accepted"] >= 10, counts


VALID = "kernel k(x: bf16[M, N]) " + BODY.format(opt="flip")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(VALID) - 1), st.integers(0, 8), st.text(alphabet=string.printable, max_size=6))
def test_mutated_valid_specs_never_crash(pos, cut, insert):
    text = VALID[:pos] + insert + VALID[pos + cut:]
    try:
        for k in load(text):
            compile_kernel(k)
    except SpecError as exc:
        assert exc.line is None or "^" in str(exc), str(exc)
