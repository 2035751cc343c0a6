"""Nothing is silently ignored: every option must change the code, every setting must be consumed."""
import pytest

from quantlay.errors import SpecError
from quantlay.generate import compile_kernel
from quantlay.ir import Setting
from quantlay.lower import Tracker
from quantlay.dsl.ast import Span
from quantlay.spec import load


def test_option_that_does_not_change_the_code_is_an_error():
    text = """
layout same_as_row_major(rows, cols) = view(rows, cols)
kernel k(x: bf16[M, N]) {
    option useless
    rowwise blocks 1x32 profile mxfp4_hw {
        store data as packed(low: even)
        store scale as row_major | same_as_row_major if useless
    }
}
"""
    (k,) = load(text)
    with pytest.raises(SpecError) as info:
        compile_kernel(k)
    assert "option 'useless' does not change the generated code" in str(info.value)
    assert info.value.line == 4


def test_negated_condition_selects_the_other_layout():
    text = """
kernel k(x: bf16[M, N]) {
    option plain_scales
    rowwise blocks 1x32 profile mxfp4_hw {
        store data as packed(low: even)
        store scale as e8m0_shuffle if not plain_scales
    }
}
"""
    (k,) = load(text)
    assert k.variant(plain_scales=False).output("rowwise_scale").layout_name() == "e8m0_shuffle"
    assert k.variant(plain_scales=True).output("rowwise_scale").layout_name() == "row_major"
    assert len(compile_kernel(k)) == 2


def test_unconsumed_setting_is_an_error():
    tr = Tracker()
    tr.offer("rowwise", [Setting("element.ties", Span(3, 20)), Setting("scale.mode", Span(4, 9))])
    tr.use("rowwise", "element.ties")
    with pytest.raises(SpecError) as info:
        tr.check()
    assert "setting 'scale.mode' is not used" in str(info.value) and info.value.line == 4


def test_unknown_option_value():
    (k,) = load("kernel k(x: bf16[M, N]) { option a rowwise blocks 1x32 profile mxfp4_hw {"
                " store data as packed(low: even) | preshuffle16x16 if a store scale as row_major } }")
    with pytest.raises(SpecError, match="has no option 'b'"):
        k.variant(b=True)


def test_variant_names_encode_options_and_parameters(mxfp4_kernels):
    hw, te = mxfp4_kernels["mxfp4_cast_transpose_hw"], mxfp4_kernels["mxfp4_cast_transpose_te"]
    names = {v.name for v in hw.variants()} | {v.name for v in te.variants()}
    assert len(names) == 16
    v = hw.variant(shuffle_rowwise_data=True)
    assert v.name.startswith("mxfp4_cast_transpose_hw__srd1_scd0_wgss0__")
    # the same kernel name with other numerics gets another digest
    spec = ("kernel mxfp4_cast_transpose_hw(x: bf16[M, N]) { option shuffle_rowwise_data "
            "rowwise blocks 1x32 profile mxfp4_rocm_te_triton { store data as packed(low: even) | "
            "preshuffle16x16 if shuffle_rowwise_data store scale as row_major } }")
    (other,) = load(spec)
    assert other.variant(shuffle_rowwise_data=True).name.split("__")[-1] != v.name.split("__")[-1]
