#!/usr/bin/env python3
"""Writes include/ds/Dialect/DS/IR/AtenOps.def: the operators `ds.aten` accepts.

The arities come from LibTorch's own schemas (torch 2.15, the PyPI wheel in
.venv), so the dialect and the runtime agree on argument order. Rerun after
changing SUPPORTED or the torch version, and check the diff for removed or
renamed overloads that the code names:
    .venv/bin/python utils/gen_aten_registry.py > include/ds/Dialect/DS/IR/AtenOps.def
"""
import sys
import torch

# Base names of the operators the importer may produce. Every overload of
# these is accepted except out=, Dimname, complex, string and dict variants.
SUPPORTED = """
broadcast_tensors linear matmul mm bmm addmm baddbmm add sub mul div neg pow sqrt rsqrt exp log
expm1 log1p flip new_empty view_as reshape_as lift_fresh_copy
relu gelu silu tanh sigmoid softmax log_softmax _softmax _log_softmax layer_norm
native_layer_norm batch_norm native_batch_norm embedding dropout native_dropout
bernoulli conv1d conv2d convolution _convolution max_pool2d avg_pool2d
adaptive_avg_pool2d flatten view reshape _reshape_alias transpose t permute
contiguous split split_with_sizes chunk unsafe_chunk slice select cat stack
squeeze unsqueeze expand expand_as masked_fill where index_select index_add
index gather scatter scatter_add nonzero numel sum mean max min amax amin argmax
argmin topk cross_entropy cross_entropy_loss nll_loss nll_loss_nd nll_loss2d
mse_loss kl_div detach to type_as pad constant_pad_nd repeat arange ones zeros
ones_like zeros_like full full_like empty empty_like new_zeros new_ones new_full
tril triu lt le gt ge eq ne bitwise_not logical_not logical_and logical_or any all
clone copy_ fill_ abs clamp clamp_min clamp_max minimum maximum square reciprocal
erf var var_mean std mean_dim lerp masked_select one_hot cumsum sort
rsub floordiv remainder floor_divide floor ceil round sign
size dim len __getitem__ Int Float Bool ScalarImplicit is_nonzero item
__is__ __isnot__ __not__ __and__ __or__ _set_item append format
unbind narrow dropout_ relu_ gelu_ add_ mul_ sub_ div_ masked_fill_
index_add_ zero_ scatter_ scatter_add_ expand_copy alias_copy
softplus leaky_relu hardtanh elu log_sigmoid
threshold_backward gelu_backward silu_backward tanh_backward sigmoid_backward
native_layer_norm_backward native_batch_norm_backward embedding_dense_backward
convolution_backward max_pool2d_with_indices max_pool2d_with_indices_backward
avg_pool2d_backward _adaptive_avg_pool2d _adaptive_avg_pool2d_backward
_softmax_backward_data _log_softmax_backward_data nll_loss_backward
nll_loss_forward mse_loss_backward kl_div_backward select_backward
slice_backward index_select_backward
leaky_relu_backward elu_backward softplus_backward hardtanh_backward sgn
sum_to_size native_dropout_backward nll_loss2d_forward nll_loss2d_backward
logsumexp exp_ rsqrt_ sort argsort repeat_interleave diff cos sin index_put max_pool1d avg_pool1d conv_transpose2d
NumToTensor TupleConstruct _transformer_encoder_layer_fwd _native_multi_head_attention
_scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_flash_attention_for_cpu_backward
_safe_softmax
scaled_dot_product_attention rms_norm unflatten
scalar_tensor _to_copy _native_batch_norm_legit_functional _native_batch_norm_legit_no_training
slice_scatter select_scatter fill tensor
bitwise_and bitwise_or copy
einsum linalg_vector_norm numpy_T acos acosh asin asinh atan atan2 atanh cosh sinh tan
log10 log2 trunc prod fmod eye
diagonal diagonal_backward as_strided alias masked_scatter scatter_reduce isinf isnan
logical_xor bitwise_xor native_group_norm native_group_norm_backward
reflection_pad1d reflection_pad2d reflection_pad3d
replication_pad1d replication_pad2d replication_pad3d reflection_pad1d_backward
reflection_pad2d_backward reflection_pad3d_backward replication_pad1d_backward
replication_pad2d_backward replication_pad3d_backward upsample_bilinear2d upsample_nearest2d
upsample_bilinear2d_backward upsample_nearest2d_backward avg_pool3d avg_pool3d_backward
max_pool3d max_pool3d_with_indices max_pool3d_with_indices_backward adaptive_avg_pool3d
_adaptive_avg_pool3d _adaptive_avg_pool3d_backward embedding_bag _embedding_bag
_embedding_bag_dense_backward _embedding_bag_backward cdist _cdist_forward _cdist_backward pdist _pdist_forward
_pdist_backward col2im im2col grid_sampler grid_sampler_2d grid_sampler_2d_backward group_norm
cumprod unique_consecutive hardswish hardswish_ hardswish_backward hardsigmoid hardsigmoid_ hardsigmoid_backward roll _unsafe_view adaptive_avg_pool1d
""".split()

# Overloads skipped: words of the overload name (split at "_"), so that "out" skips
# "Scalar_out" but not "dtype_layout".
SKIP_OVERLOAD_WORDS = ("out", "output", "Dimname", "complex", "str", "Dict", "names", "dimname")
SKIP_OVERLOADS = ("grad_input",)
# Single overloads of operators whose other overloads are not accepted (the default
# _native_batch_norm_legit writes its running statistics in place; torch.export's
# functional programs call _native_batch_norm_legit_functional for it).
SUPPORTED_OVERLOADS = ("aten::_native_batch_norm_legit.no_stats",)


def wanted(schema):
    ns, base = schema.name.split("::")
    if schema.name + "." + schema.overload_name in SUPPORTED_OVERLOADS:
        return True
    if base not in SUPPORTED or ns not in ("aten", "prim"):
        return False
    ov = schema.overload_name
    words = ov.split("_")
    if any(w in words for w in SKIP_OVERLOAD_WORDS) or ov in SKIP_OVERLOADS:
        return False
    return True


def effect(schema):
    base = schema.name.split("::")[1]
    if base in ("dropout", "native_dropout", "bernoulli", "dropout_"):
        return "Random"
    if schema.is_mutable:
        return "InPlace"
    return "Pure"


def main():
    rows = {}
    for s in torch._C._jit_get_all_schemas():
        if not wanted(s):
            continue
        qual = s.name + ("." + s.overload_name if s.overload_name else "")
        returns_list = (len(s.returns) == 1 and
                        isinstance(s.returns[0].type, torch._C.ListType))
        rows[qual] = (len(s.arguments), len(s.returns), effect(s),
                      "true" if returns_list else "false")
    out = sys.stdout
    out.write("//===- AtenOps.def - operators ds.aten accepts ---------------*- C++ -*-===//\n")
    out.write("//\n// Generated by utils/gen_aten_registry.py from torch %s schemas.\n" % torch.__version__)
    out.write("// DS_ATEN_OP(QUALIFIED_NAME, NUM_ARGS, NUM_RESULTS, EFFECT, RETURNS_LIST)\n")
    out.write("//\n//===----------------------------------------------------------------------===//\n\n")
    out.write("#ifndef DS_ATEN_OP\n#error \"define DS_ATEN_OP before including AtenOps.def\"\n#endif\n\n")
    for qual in sorted(rows):
        a, r, e, l = rows[qual]
        out.write('DS_ATEN_OP("%s", %d, %d, %s, %s)\n' % (qual, a, r, e, l))
    out.write("\n#undef DS_ATEN_OP\n")


if __name__ == "__main__":
    main()
