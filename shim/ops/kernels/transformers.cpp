// The transformer fast paths 1.13's nn.MultiheadAttention and nn.TransformerEncoderLayer take
// in eval without gradients: _masked_softmax, _native_multi_head_attention and
// _transformer_encoder_layer_fwd, composed from the shim's own operators. Each check is made
// in upstream's order with upstream's message, its typos included, since callers see them.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

void check(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}

// A mask is true where a score is left out. A row left out entirely comes out NaN, as upstream's.
Tensor masked_softmax(const Tensor& scores, const Tensor& mask, std::optional<int64_t> dim,
                      std::optional<int64_t> mask_type) {
  check(scores.sizes() == mask.sizes(), "Mask shape should match input shape");
  check(mask.dtype() == ScalarType::Bool, "Mask should be a boolean tensor");
  int64_t d = wrap_dim(dim.value_or(scores.dim() - 1), scores.dim());
  if (scores.dtype() != ScalarType::Float && scores.dtype() != ScalarType::Double)
    throw Error(std::string("\"masked_softmax\" not implemented for '") + upstream_type_name(scores.dtype()) +
                "'");
  check(mask_type.has_value(), "Mask Type should be defined");
  check(*mask_type >= 0 && *mask_type <= 2,
        "Mask Type should be 0 (src_mask) or 1 (src_key_padding_mask), or 2 (default_mask)");
  check(*mask_type != 0, "src_mask not currently supported on CPU");
  Tensor filled = ops::masked_fill(scores, mask, Scalar(-std::numeric_limits<double>::infinity()));
  return ops::_softmax(filled, d, false);
}

void check_attention_inputs(const Tensor& query, const Tensor& key, const Tensor& value, int64_t embed_dim,
                            int64_t num_head, const Tensor& qkv_weight, const Tensor& qkv_bias) {
  auto dims = [](const Tensor& t) { return std::to_string(t.dim()) + "-D tensor"; };
  check(query.dim() == 3, "expected 3-D `query`, got " + dims(query));
  check(query.size(2) == embed_dim, "passed-in embed_dim " + std::to_string(embed_dim) +
                                        " didn't match last dim of query " + std::to_string(query.size(2)));
  check(key.dim() == 3, "expected 3-D `key`, got " + dims(key));
  check(value.dim() == 3, "expected 3-D `value`, got " + dims(value));
  check(query.sizes() == key.sizes() && key.sizes() == value.sizes(),
        "expected `query`/`key`/`value` shapes to match");
  check(qkv_weight.dim() == 2, "expected 2-D `qkv_weight`, got " + dims(qkv_weight));
  check(qkv_weight.size(0) == 3 * embed_dim, "expected `qkv_weight` first dim to be 3x embed_dim");
  check(qkv_weight.size(1) == embed_dim, "expected `qkv_weight` second dim to be embed_Dim");
  check(qkv_bias.dim() == 1, "expected 2-D `qkv_bias`, got " + dims(qkv_bias));
  check(qkv_bias.size(0) == 3 * embed_dim,
        "expected `qkv_bias` first dim and first dim of query to be equal");
  check(embed_dim % num_head == 0, "`embed_dim` must divide evenly by `num_heads`");
}

// A 2-D mask is a key padding mask (batch, keys), widened to every head and query; any other
// mask must already have the scores' shape. A mask that is not bool counts nonzero as true.
Tensor attention_mask(Tensor mask, int64_t batch, int64_t heads, int64_t seq_len) {
  const std::string improve =
      " to be true, but got false.  (Could this error message be improved?  If so, please report an "
      "enhancement request to PyTorch.)";
  if (mask.dtype() != ScalarType::Bool) mask = ops::to_dtype(mask, ScalarType::Bool);
  if (mask.dim() != 2) return mask;
  check(mask.size(0) == batch, "Expected attn_mask->sizes()[0] == batch_size" + improve);
  check(mask.size(1) == seq_len, "Expected attn_mask->sizes()[1] == seq_len" + improve);
  return ops::expand(ops::view(mask, {batch, 1, 1, seq_len}), {batch, heads, seq_len, seq_len});
}

// (batch, seq, 3 * embed) projections plus bias, as (batch, heads, seq, head_dim) each; q scaled
// by 1/sqrt(head_dim) after its bias is added, as upstream's transform_bias_rescale_qkv does.
std::array<Tensor, 3> split_heads(const Tensor& qkv, const Tensor& qkv_bias, int64_t heads) {
  const int64_t batch = qkv.size(0), seq = qkv.size(1), head_dim = qkv.size(2) / 3 / heads;
  Tensor biased = ops::add(qkv, qkv_bias);
  Tensor parts = ops::permute(ops::view(biased, {batch, seq, 3, heads, head_dim}), {2, 0, 3, 1, 4});
  Tensor q = ops::div(ops::select(parts, 0, 0), Scalar(std::sqrt(double(head_dim))));
  return {q, ops::select(parts, 0, 1), ops::select(parts, 0, 2)};
}

IValue multi_head_attention(const Tensor& query, const Tensor& key, const Tensor& value, int64_t embed_dim,
                            int64_t num_head, const Tensor& qkv_weight, const Tensor& qkv_bias,
                            const Tensor& proj_weight, const Tensor& proj_bias, std::optional<Tensor> mask,
                            bool need_weights, bool average_weights, std::optional<int64_t> mask_type) {
  check_attention_inputs(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias);
  const int64_t batch = query.size(0), seq = query.size(1), D = embed_dim;
  // One projection when the three are one tensor (self-attention); else each its third of the weight.
  Tensor qkv = query.same(key) && key.same(value)
                   ? ops::matmul(query, ops::t(qkv_weight))
                   : ops::cat({ops::matmul(query, ops::t(ops::narrow(qkv_weight, 0, 0, D))),
                               ops::matmul(key, ops::t(ops::narrow(qkv_weight, 0, D, D))),
                               ops::matmul(value, ops::t(ops::narrow(qkv_weight, 0, 2 * D, D)))},
                              2);
  if (qkv.numel() == 0) return IValue::tuple({ops::empty_like(query), IValue()});
  auto [q, k, v] = split_heads(qkv, qkv_bias, num_head);
  Tensor scores = ops::matmul(q, ops::transpose(k, 2, 3));
  Tensor weights = mask ? masked_softmax(scores, attention_mask(*mask, batch, num_head, seq), 3, mask_type)
                        : ops::_softmax(scores, 3, false);
  Tensor context = ops::reshape(ops::transpose(ops::matmul(weights, v), 1, 2), {batch, seq, D});
  Tensor projected = ops::linear(context, proj_weight, proj_bias);
  if (!need_weights) return IValue::tuple({projected, IValue()});
  if (average_weights) weights = ops::div(ops::sum(weights, std::vector<int64_t>{1}), Scalar(num_head));
  return IValue::tuple({projected, weights});
}

}  // namespace

TN_KERNEL("aten::_masked_softmax",
          { return masked_softmax(a.tensor(0), a.tensor(1), a.optional_integer(2), a.optional_integer(3)); });

TN_KERNEL("aten::_native_multi_head_attention", {
  return multi_head_attention(a.tensor(0), a.tensor(1), a.tensor(2), a.integer(3), a.integer(4), a.tensor(5),
                              a.tensor(6), a.tensor(7), a.tensor(8), a.optional_tensor(9), a.boolean(10),
                              a.boolean(11), a.optional_integer(12));
});

// One encoder layer: self-attention then the feed-forward block, each with its residual, the
// norms before (norm_first) or after each block.
TN_KERNEL("aten::_transformer_encoder_layer_fwd", {
  const Tensor& src = a.tensor(0);
  const int64_t D = a.integer(1), heads = a.integer(2);
  const bool use_gelu = a.boolean(7), norm_first = a.boolean(8);
  const double eps = a.real(9);
  auto norm = [&](const Tensor& x, size_t weight) {
    return ops::layer_norm(x, {D}, a.tensor(weight), a.tensor(weight + 1), eps);
  };
  Tensor x = norm_first ? norm(src, 10) : src;
  IValue attended =
      multi_head_attention(x, x, x, D, heads, a.tensor(3), a.tensor(4), a.tensor(5), a.tensor(6),
                           a.optional_tensor(18), false, true, a.optional_integer(19));
  x = ops::add(std::get<Stack>(attended.value)[0].get<Tensor>(), src);
  if (!norm_first) x = norm(x, 10);
  Tensor hidden = ops::linear(norm_first ? norm(x, 12) : x, a.tensor(14), a.tensor(15));
  hidden = use_gelu ? ops::gelu(hidden) : ops::relu(hidden);
  Tensor out = ops::add(ops::linear(hidden, a.tensor(16), a.tensor(17)), x);
  return norm_first ? out : norm(out, 12);
});

}  // namespace tn
