"""Gluon operations the generated Hopper kernels need and Triton's Gluon does not name (Triton 3.6).

`tma_add_shared_to_global`: a TMA reduce-add of a shared-memory tile into global memory through a tensor
descriptor (`cp.reduce.async.bulk.tensor ... .add`): the global tile becomes tile + global, element by
element, in the descriptor's type. An accumulating GEMM over long groups adds its finished fp32 tile into
the caller's buffer with it, instead of loading the buffer's tile, adding in registers and storing it
back. Like the TMA store, it completes in the async proxy: `tma.store_wait` waits for its reads of shared
memory.
"""
from triton._C.libtriton import ir
from triton.experimental.gluon.language._core import builtin


@builtin
def tma_add_shared_to_global(tensor_desc, coord, src, _semantic=None):
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)
