# GENERATED FILE, DO NOT EDIT: written by `quantlay generate`.
"""Generated kernels, one module per kernel variant. Look one up by its kernel and options:

    from quantlay.generated import find
    mod = find("mxfp4_cast_transpose_hw", shuffle_rowwise_data=True)
    result = mod.quantize(x)
"""
import importlib

VARIANTS = {
    ('fp8_128x128_nvte', ()): 'fp8_128x128_nvte__c5cfc321',
    ('fp8_128x128_rocm_te', ()): 'fp8_128x128_rocm_te__0996d515',
    ('fp8_1x128_colwise_transposed', ()): 'fp8_1x128_colwise_transposed__7d302056',
    ('fp8_1x128_deepgemm', ()): 'fp8_1x128_deepgemm__954f48df',
    ('fp8_1x128_deepgemm_sm100', ()): 'fp8_1x128_deepgemm_sm100__25ecf0d6',
    ('fp8_1x128_deepgemm_ue8m0', ()): 'fp8_1x128_deepgemm_ue8m0__debba7e5',
    ('fp8_1x128_nvte', (('gemm_ready', False),)): 'fp8_1x128_nvte__gr0__cc9ff749',
    ('fp8_1x128_nvte', (('gemm_ready', True),)): 'fp8_1x128_nvte__gr1__6cec4cd9',
    ('fp8_1x128_rocm_te', ()): 'fp8_1x128_rocm_te__55ab7305',
    ('fp8_gemm_dgrad_nvte', ()): 'fp8_gemm_dgrad_nvte__61fe85b2',
    ('fp8_gemm_fprop', ()): 'fp8_gemm_fprop__efe8ee45',
    ('fp8_gemm_fprop_deepgemm', ()): 'fp8_gemm_fprop_deepgemm__f194e1fd',
    ('fp8_gemm_fprop_nvte', ()): 'fp8_gemm_fprop_nvte__19af12da',
    ('fp8_gemm_grouped_dgrad', ()): 'fp8_gemm_grouped_dgrad__bbbfec9e',
    ('fp8_gemm_grouped_dgrad_nvte', ()): 'fp8_gemm_grouped_dgrad_nvte__5f3d05dc',
    ('fp8_gemm_grouped_fprop', ()): 'fp8_gemm_grouped_fprop__101f20df',
    ('fp8_gemm_grouped_fprop_nvte', ()): 'fp8_gemm_grouped_fprop_nvte__124b557f',
    ('fp8_gemm_grouped_wgrad', ()): 'fp8_gemm_grouped_wgrad__c8aa092b',
    ('fp8_gemm_grouped_wgrad_acc', ()): 'fp8_gemm_grouped_wgrad_acc__1ec545ca',
    ('fp8_gemm_grouped_wgrad_t', ()): 'fp8_gemm_grouped_wgrad_t__c5fce5c2',
    ('fp8_gemm_grouped_wgrad_t_acc', ()): 'fp8_gemm_grouped_wgrad_t_acc__26a7fed1',
    ('fp8_gemm_grouped_wgrad_t_bf16', ()): 'fp8_gemm_grouped_wgrad_t_bf16__e0326026',
    ('fp8_gemm_grouped_wgrad_t_pow2', ()): 'fp8_gemm_grouped_wgrad_t_pow2__1b005062',
    ('fp8_gemm_grouped_wgrad_t_pow2_acc', ()): 'fp8_gemm_grouped_wgrad_t_pow2_acc__ac10e3aa',
    ('fp8_gemm_grouped_wgrad_t_pow2_bf16', ()): 'fp8_gemm_grouped_wgrad_t_pow2_bf16__3001ff2a',
    ('fp8_segment_m', (('fused_rowwise', False),)): 'fp8_segment_m__fr0__4f74da6d',
    ('fp8_segment_m', (('fused_rowwise', True),)): 'fp8_segment_m__fr1__65b84838',
    ('fp8_segment_m_transposed', ()): 'fp8_segment_m_transposed__bee43e88',
    ('fp8_segment_m_transposed_pow2', ()): 'fp8_segment_m_transposed_pow2__1a1d89bb',
    ('mxfp4_32x32_hw', ()): 'mxfp4_32x32_hw__4200edc3',
    ('mxfp4_cast_transpose_hw', (('shuffle_rowwise_data', False), ('shuffle_columnwise_data', False), ('with_gemm_swizzled_scales', False))): 'mxfp4_cast_transpose_hw__srd0_scd0_wgss0__742f14c2',
    ('mxfp4_cast_transpose_hw', (('shuffle_rowwise_data', False), ('shuffle_columnwise_data', False), ('with_gemm_swizzled_scales', True))): 'mxfp4_cast_transpose_hw__srd0_scd0_wgss1__637fff9c',
    ('mxfp4_cast_transpose_hw', (('shuffle_rowwise_data', False), ('shuffle_columnwise_data', True), ('with_gemm_swizzled_scales', False))): 'mxfp4_cast_transpose_hw__srd0_scd1_wgss0__8da09698',
    ('mxfp4_cast_transpose_hw', (('shuffle_rowwise_data', False), ('shuffle_columnwise_data', True), ('with_gemm_swizzled_scales', True))): 'mxfp4_cast_transpose_hw__srd0_scd1_wgss1__a06464ec',
    ('mxfp4_cast_transpose_hw', (('shuffle_rowwise_data', True), ('shuffle_columnwise_data', False), ('with_gemm_swizzled_scales', False))): 'mxfp4_cast_transpose_hw__srd1_scd0_wgss0__62ffcf00',
    ('mxfp4_cast_transpose_hw', (('shuffle_rowwise_data', True), ('shuffle_columnwise_data', False), ('with_gemm_swizzled_scales', True))): 'mxfp4_cast_transpose_hw__srd1_scd0_wgss1__aae8a18a',
    ('mxfp4_cast_transpose_hw', (('shuffle_rowwise_data', True), ('shuffle_columnwise_data', True), ('with_gemm_swizzled_scales', False))): 'mxfp4_cast_transpose_hw__srd1_scd1_wgss0__264b78f5',
    ('mxfp4_cast_transpose_hw', (('shuffle_rowwise_data', True), ('shuffle_columnwise_data', True), ('with_gemm_swizzled_scales', True))): 'mxfp4_cast_transpose_hw__srd1_scd1_wgss1__d8dd7930',
    ('mxfp4_cast_transpose_te', (('shuffle_rowwise_data', False), ('shuffle_columnwise_data', False), ('with_gemm_swizzled_scales', False))): 'mxfp4_cast_transpose_te__srd0_scd0_wgss0__b03d9c23',
    ('mxfp4_cast_transpose_te', (('shuffle_rowwise_data', False), ('shuffle_columnwise_data', False), ('with_gemm_swizzled_scales', True))): 'mxfp4_cast_transpose_te__srd0_scd0_wgss1__12e63f0b',
    ('mxfp4_cast_transpose_te', (('shuffle_rowwise_data', False), ('shuffle_columnwise_data', True), ('with_gemm_swizzled_scales', False))): 'mxfp4_cast_transpose_te__srd0_scd1_wgss0__6dbefc17',
    ('mxfp4_cast_transpose_te', (('shuffle_rowwise_data', False), ('shuffle_columnwise_data', True), ('with_gemm_swizzled_scales', True))): 'mxfp4_cast_transpose_te__srd0_scd1_wgss1__11f72e2d',
    ('mxfp4_cast_transpose_te', (('shuffle_rowwise_data', True), ('shuffle_columnwise_data', False), ('with_gemm_swizzled_scales', False))): 'mxfp4_cast_transpose_te__srd1_scd0_wgss0__9852aa3f',
    ('mxfp4_cast_transpose_te', (('shuffle_rowwise_data', True), ('shuffle_columnwise_data', False), ('with_gemm_swizzled_scales', True))): 'mxfp4_cast_transpose_te__srd1_scd0_wgss1__236eafc5',
    ('mxfp4_cast_transpose_te', (('shuffle_rowwise_data', True), ('shuffle_columnwise_data', True), ('with_gemm_swizzled_scales', False))): 'mxfp4_cast_transpose_te__srd1_scd1_wgss0__5cd00a76',
    ('mxfp4_cast_transpose_te', (('shuffle_rowwise_data', True), ('shuffle_columnwise_data', True), ('with_gemm_swizzled_scales', True))): 'mxfp4_cast_transpose_te__srd1_scd1_wgss1__3dd8b27a',
    ('mxfp6_e2m3', ()): 'mxfp6_e2m3__554a9dd4',
    ('mxfp6_e3m2', ()): 'mxfp6_e3m2__d568bc7f',
    ('mxfp8_floor_transposed', (('with_gemm_swizzled_scales', False),)): 'mxfp8_floor_transposed__wgss0__3238b8da',
    ('mxfp8_floor_transposed', (('with_gemm_swizzled_scales', True),)): 'mxfp8_floor_transposed__wgss1__a505a99f',
    ('mxfp8_nvte', (('with_gemm_swizzled_scales', False),)): 'mxfp8_nvte__wgss0__9bb0eeae',
    ('mxfp8_nvte', (('with_gemm_swizzled_scales', True),)): 'mxfp8_nvte__wgss1__e37afb15',
    ('mxfp8_nvte_e5m2', (('with_gemm_swizzled_scales', False),)): 'mxfp8_nvte_e5m2__wgss0__ed783f3a',
    ('mxfp8_nvte_e5m2', (('with_gemm_swizzled_scales', True),)): 'mxfp8_nvte_e5m2__wgss1__c7584799',
    ('mxfp8_rocm_te', ()): 'mxfp8_rocm_te__2db757d2',
    ('nvfp4', (('with_gemm_swizzled_scales', False),)): 'nvfp4__wgss0__f2a6a2e1',
    ('nvfp4', (('with_gemm_swizzled_scales', True),)): 'nvfp4__wgss1__d5be0d3d',
    ('nvfp4_block_only', (('with_gemm_swizzled_scales', False),)): 'nvfp4_block_only__wgss0__e2a9be40',
    ('nvfp4_block_only', (('with_gemm_swizzled_scales', True),)): 'nvfp4_block_only__wgss1__6c1dcbcf',
}


def find(kernel, **options):
    """The generated module of `kernel` with `options` (unset options are False)."""
    for name, value in options.items():
        if not isinstance(value, bool):
            raise TypeError(f"option {name}={value!r} must be True or False, not a {type(value).__name__}")
    names = {k: dict(o) for k, o in VARIANTS}
    if kernel not in names:
        raise KeyError(f"no generated kernel {kernel!r}; known: {sorted(names)}")
    for (k, opts), mod in VARIANTS.items():
        if k == kernel and dict(opts) == {n: bool(options.get(n, False)) for n in dict(opts)}:
            unknown = set(options) - set(dict(opts))
            if unknown:
                raise KeyError(f"kernel {kernel!r} has no option {sorted(unknown)[0]!r}")
            return importlib.import_module(f"{__name__}.{mod}")
    raise KeyError(f"no variant of {kernel!r} with options {options}")
