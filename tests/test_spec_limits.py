"""The spec compiler hardened: every case here once built a broken kernel, crashed with a traceback, or
took minutes. Each must now be a SpecError naming the file, line and column with a caret, fast."""
import time

import pytest

from quantlay.errors import SpecError
from quantlay.spec import load


def kernel(params="x: bf16[M, N]", options=("flip",), direction_if="", rowwise=True, data="packed(low: even) | preshuffle16x16 if flip",
           scale="row_major", element="", extra=""):
    opts = f"    option {', '.join(options)}\n" if options else ""
    body = (f"    rowwise blocks 1x32 {direction_if}profile mxfp4_hw {{\n{element}"
            f"        store data as {data}\n        store scale as {scale}\n    }}\n")
    return f"{extra}kernel k({params}) {{\n{opts}{body}}}\n"


def expect_error(text, *fragments, line=None):
    t0 = time.perf_counter()
    with pytest.raises(SpecError) as info:
        load(text)
    assert time.perf_counter() - t0 < 20, "a bad spec must be refused quickly"
    msg = str(info.value)
    for f in fragments:
        assert f in msg, msg
    assert "\n    " in msg and "^" in msg, f"no source line and caret:\n{msg}"
    if line is not None:
        assert f"<spec>:{line}:" in msg or f":{line}:" in msg.splitlines()[0], msg
    return msg


@pytest.mark.parametrize("name", ["class", "x", "torch", "runtime", "out", "NAME", "match"])
def test_groups_parameter_names_that_would_break_the_launcher(name):
    spec = ("kernel k(x: bf16[M, N], %s: groups[G]) {\n    colwise blocks 128x1 segmented profile "
            "fp8_block_rocm_te {\n        store data as row_major\n        store scale as row_major\n    }\n}\n")
    if name == "class":  # a keyword is refused by the grammar or the IR, either way a SpecError
        with pytest.raises(SpecError):
            load(spec % name)
        return
    expect_error(spec % name, f"groups parameter name '{name}' is reserved")


def test_groups_count_must_be_G():
    expect_error("kernel k(x: bf16[M, N], counts: groups[K]) {\n    colwise blocks 128x1 segmented profile "
                 "fp8_block_rocm_te {\n        store data as row_major\n        store scale as row_major\n"
                 "    }\n}\n", "groups[K]", "always called G")


@pytest.mark.parametrize("params", ["x: bf16[N, M]", "x: bf16[M, M]", "y: bf16[M, N]"])
def test_input_names_are_not_written_and_ignored(params):
    expect_error(kernel(params=params), "the input is always x with rows M and columns N", line=1)


def test_option_named_kernel_is_reserved():
    expect_error(kernel(options=("kernel",), data="packed(low: even) | preshuffle16x16 if kernel"),
                 "option name 'kernel' is reserved")


def test_too_many_options():
    opts = tuple(f"o{i}" for i in range(10))
    data = "packed(low: even)" + "".join(f" | preshuffle16x16 if o{i}" for i in range(3))
    expect_error(kernel(options=opts, data=data), "declares 10 options; at most 8")


def test_long_pipes_and_views_are_bounded():
    expect_error(kernel(data="packed(low: even)" + " | preshuffle16x16 if flip" * 8),
                 "chains 8 layouts; at most 4")
    expect_error(kernel(data="packed(low: even)" + " | preshuffle16x16 if flip" * 300),
                 "chains 300 layouts")
    view = ", ".join(["1"] * 3000)
    expect_error(f"layout big(rows, cols) = view(rows, cols, {view})\n" + kernel(),
                 "view has 3002 factors; at most 8")


@pytest.mark.parametrize("decl,fragment", [
    ("layout p(rows, cols) pad(rows: 1000000) fill 0 = view(rows, cols)", "larger than 4096"),
    ("layout p(rows, cols) = view(rows/1000000, 1000000, cols)", "larger than 4096"),
    ("layout p(rows, cols) -> (cols, rows) pad(rows: 4, rows: 8) fill 0 = permute(1, 0)", "pad sets 'rows' twice"),
])
def test_huge_and_duplicate_layout_settings(decl, fragment):
    expect_error(decl + "\n" + kernel(), fragment, line=1)


def test_duplicate_packed_setting():
    expect_error(kernel(data="packed(low: even, low: odd) | preshuffle16x16 if flip"), "packed sets 'low' twice")


def test_direction_guarded_only_by_an_option():
    expect_error(kernel(direction_if="if flip "), "quantizes nothing when flip is off")


def test_subnormal_amax_floor():
    spec = ("kernel k(x: bf16[M, N]) {\n    rowwise blocks 1x128 {\n        element e4m3(ties: even)\n"
            "        scale f32(amax_floor: 1e-40)\n        store data as row_major\n"
            "        store scale as row_major\n    }\n}\n")
    expect_error(spec, "below fp32's smallest normal", line=4)


def test_lowering_errors_name_the_file_and_point_at_the_line(tmp_path):
    # passes the parser and the IR rules; only the lowering knows the template packs along the block axis
    spec = ("kernel k(x: bf16[M, N]) {\n    colwise blocks 32x1 profile mxfp4_hw {\n"
            "        store data as packed(low: even)\n        store scale as row_major\n    }\n}\n")
    p = tmp_path / "square.ql"
    p.write_text(spec)
    with pytest.raises(SpecError) as info:
        load(p)
    msg = str(info.value)
    assert msg.startswith("square.ql:3:") and "^" in msg, msg


def test_non_utf8_spec(tmp_path):
    p = tmp_path / "latin1.ql"
    p.write_bytes("# caf\xe9\n".encode("latin-1"))
    with pytest.raises(SpecError, match="not UTF-8 text"):
        load(p)


def test_option_values_must_be_bools():
    from quantlay.generated import find
    with pytest.raises(TypeError, match="must be True or False"):
        find("mxfp8_nvte", with_gemm_swizzled_scales="false")
    (k,) = load(kernel())
    with pytest.raises(SpecError, match="must be True or False"):
        k.variant(flip=1)


def test_colliding_option_initials_give_short_names():
    (k,) = load(kernel(options=("ab_c", "a_bc"), data="packed(low: even) | preshuffle16x16 if ab_c",
                       scale="cublas_blocked_128x4 if a_bc"))
    names = {v.name for v in k.variants()}
    assert len(names) == 4 and all(len(n) < 40 for n in names), names
