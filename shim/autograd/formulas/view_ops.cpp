// Derivatives of the shape operators (kernels/view_ops.cpp): each puts the gradient back
// into the input's shape.
#include <unordered_set>

#include "formulas.h"

namespace tn::autograd {

namespace {
Tensor to_input_shape(const Saved& s, const Tensor& g) { return ops::reshape(g, s.input_sizes(0)); }

// The gradient of a part of the input: zeros elsewhere.
template <typename Part>
Tensor scattered(const Saved& s, const Tensor& g, Part&& part) {
  Tensor whole = ops::zeros(s.input_sizes(0), g.dtype());
  ops::copy_(part(whole), g, false);
  return whole;
}
// The storage position of each element of a geometry, in row-major order of its indices.
Tensor storage_positions(const Shape& sizes, const Shape& strides, int64_t offset) {
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  Tensor positions = Tensor::empty({numel}, ScalarType::Long);
  int64_t* out = positions.data_as<int64_t>();
  for (int64_t i = 0; i < numel; ++i) {
    int64_t position = offset, rest = i;
    for (size_t d = sizes.size(); d-- > 0;) {
      position += rest % sizes[d] * strides[d];
      rest /= sizes[d];
    }
    out[i] = position;
  }
  return positions;
}

bool has_repeats(const Tensor& positions) {
  const int64_t* p = positions.data_as<int64_t>();
  std::unordered_set<int64_t> seen;
  for (int64_t i = 0; i < positions.numel(); ++i)
    if (!seen.insert(p[i]).second) return true;
  return false;
}
}  // namespace

#define TN_RESHAPING_DERIVATIVE(OP, NODE) \
  TN_DERIVATIVE(OP, NODE, SAVES(), { return {to_input_shape(s, g[0])}; })
TN_RESHAPING_DERIVATIVE("aten::view", "ViewBackward0");
TN_RESHAPING_DERIVATIVE("aten::view_as", "ViewBackward0");
TN_RESHAPING_DERIVATIVE("aten::reshape", "ViewBackward0");
TN_RESHAPING_DERIVATIVE("aten::reshape_as", "ViewBackward0");
TN_RESHAPING_DERIVATIVE("aten::_reshape_alias", "ViewBackward0");
TN_RESHAPING_DERIVATIVE("aten::flatten.using_ints", "ViewBackward0");
TN_RESHAPING_DERIVATIVE("aten::unflatten.int", "ViewBackward0");
TN_RESHAPING_DERIVATIVE("aten::unsqueeze", "UnsqueezeBackward0");
TN_RESHAPING_DERIVATIVE("aten::squeeze", "SqueezeBackward0");
TN_RESHAPING_DERIVATIVE("aten::squeeze.dim", "SqueezeBackward1");
TN_RESHAPING_DERIVATIVE("aten::alias", "AliasBackward0");
#undef TN_RESHAPING_DERIVATIVE

TN_DERIVATIVE("aten::expand", "ExpandBackward0", SAVES(), { return {sum_to(g[0], s.input_sizes(0))}; });
TN_DERIVATIVE("aten::expand_as", "ExpandBackward0", SAVES(), { return {sum_to(g[0], s.input_sizes(0))}; });
TN_DERIVATIVE("aten::t", "TBackward0", SAVES(), { return {ops::t(g[0])}; });
TN_DERIVATIVE("aten::transpose.int", "TransposeBackward0", SAVES(),
              { return {ops::transpose(g[0], s.args().integer(1), s.args().integer(2))}; });
TN_DERIVATIVE("aten::permute", "PermuteBackward0", SAVES(), {
  std::vector<int64_t> dims = s.args().int_list(1), inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inverse[size_t(wrap_dim(dims[i], int64_t(dims.size())))] = int64_t(i);
  return {ops::permute(g[0], inverse)};
});
TN_DERIVATIVE("aten::select.int", "SelectBackward0", SAVES(), {
  return {scattered(
      s, g[0], [&](const Tensor& w) { return ops::select(w, s.args().integer(1), s.args().integer(2)); })};
});
TN_DERIVATIVE("aten::slice.Tensor", "SliceBackward0", SAVES(), {
  auto a = s.args();
  return {scattered(s, g[0], [&](const Tensor& w) {
    return ops::slice(w, a.integer(1), a.optional_integer(2), a.optional_integer(3), a.integer(4));
  })};
});
TN_DERIVATIVE("aten::narrow", "SliceBackward0", SAVES(), {
  auto a = s.args();
  return {scattered(
      s, g[0], [&](const Tensor& w) { return ops::narrow(w, a.integer(1), a.integer(2), a.integer(3)); })};
});

// Operators returning a list of parts of the input: the parts' gradients joined back (the
// node gives a part no gradient reached a zero one).
#define TN_SPLITTING_DERIVATIVE(OP, NODE, DIM) \
  TN_DERIVATIVE(OP, NODE, SAVES(), { return {ops::cat(g, s.args().integer(DIM))}; })
TN_SPLITTING_DERIVATIVE("aten::split.Tensor", "SplitBackward0", 2);
TN_SPLITTING_DERIVATIVE("aten::split.sizes", "SplitWithSizesBackward0", 2);
TN_SPLITTING_DERIVATIVE("aten::split_with_sizes", "SplitWithSizesBackward0", 2);
TN_SPLITTING_DERIVATIVE("aten::chunk", "SplitBackward0", 2);
#undef TN_SPLITTING_DERIVATIVE
TN_DERIVATIVE("aten::unbind.int", "UnbindBackward0", SAVES(),
              { return {ops::stack(g, s.args().integer(1))}; });
// Each input's gradient is summed back to its shape by the engine.
TN_DERIVATIVE("aten::broadcast_tensors", "ExpandBackward0", SAVES(), { return {std::vector<Tensor>(g)}; });

// Other names of the views above (composites upstream, whose nodes are their parts').
TN_DERIVATIVE("aten::atleast_1d", "ViewBackward0", SAVES(), { return {to_input_shape(s, g[0])}; });
TN_DERIVATIVE("aten::atleast_2d", "ViewBackward0", SAVES(), { return {to_input_shape(s, g[0])}; });
TN_DERIVATIVE("aten::atleast_3d", "ViewBackward0", SAVES(), { return {to_input_shape(s, g[0])}; });
TN_DERIVATIVE("aten::broadcast_to", "ExpandBackward0", SAVES(), { return {sum_to(g[0], s.input_sizes(0))}; });
TN_DERIVATIVE("aten::swapaxes", "TransposeBackward0", SAVES(),
              { return {ops::transpose(g[0], s.args().integer(1), s.args().integer(2))}; });
TN_DERIVATIVE("aten::swapdims", "TransposeBackward0", SAVES(),
              { return {ops::transpose(g[0], s.args().integer(1), s.args().integer(2))}; });
TN_DERIVATIVE("aten::movedim.int", "PermuteBackward0", SAVES(),
              { return {ops::movedim(g[0], s.args().integer(2), s.args().integer(1))}; });
TN_DERIVATIVE("aten::moveaxis.int", "PermuteBackward0", SAVES(),
              { return {ops::movedim(g[0], s.args().integer(2), s.args().integer(1))}; });
TN_DERIVATIVE("aten::movedim.intlist", "PermuteBackward0", SAVES(),
              { return {ops::movedim(g[0], s.args().int_list(2), s.args().int_list(1))}; });
TN_DERIVATIVE("aten::moveaxis.intlist", "PermuteBackward0", SAVES(),
              { return {ops::movedim(g[0], s.args().int_list(2), s.args().int_list(1))}; });
TN_DERIVATIVE("aten::diagonal", "DiagonalBackward0", SAVES(), {
  auto a = s.args();
  return {scattered(
      s, g[0], [&](const Tensor& w) { return ops::diagonal(w, a.integer(1), a.integer(2), a.integer(3)); })};
});

// diag of a vector builds a matrix (its gradient: that diagonal of g); of a matrix takes a
// diagonal (its gradient: g on that diagonal of zeros).
TN_DERIVATIVE("aten::diag", "DiagBackward0", SAVES(), {
  int64_t offset = s.args().integer(1);
  if (s.input_sizes(0).size() == 1) return {ops::diagonal(g[0], offset, 0, 1)};
  return {scattered(s, g[0], [&](const Tensor& w) { return ops::diagonal(w, offset, 0, 1); })};
});
TN_DERIVATIVE("aten::diag_embed", "DiagEmbedBackward0", SAVES(), {
  auto a = s.args();
  return {ops::diagonal(g[0], a.integer(1), a.integer(2), a.integer(3))};
});
// unfold(dim, size, step): each window's gradient added back at its place, window by window.
TN_DERIVATIVE("aten::unfold", "UnfoldBackward0", SAVES(), {
  auto a = s.args();
  int64_t dim = wrap_dim(a.integer(1), int64_t(std::max<size_t>(s.input_sizes(0).size(), 1)));
  int64_t size = a.integer(2), step = a.integer(3);
  Tensor whole = ops::zeros(s.input_sizes(0), g[0].dtype());
  if (s.input_sizes(0).empty()) return {ops::reshape(g[0], Shape{})};
  for (int64_t i = 0; i < g[0].size(dim); ++i) {
    Tensor window = ops::narrow(whole, dim, i * step, size);
    ops::add_(window, ops::movedim(ops::select(g[0], dim, i), {-1}, {dim}));
  }
  return {whole};
});

// as_strided(x, size, stride, offset): each output's gradient added at the storage position it
// read, then read back at x's own positions. An input whose elements share positions (an
// expanded one) would need upstream's division by their counts: refused by name until written.
TN_DERIVATIVE("aten::as_strided", "AsStridedBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  auto a = s.args();
  Tensor read_at = storage_positions(x.sizes(), x.strides(), x.offset());
  if (has_repeats(read_at))
    throw NotImplemented(
        "torchnative has no derivative for aten::as_strided yet of an input whose elements overlap");
  int64_t extent = int64_t(x.storage()->nbytes() / x.itemsize());
  Tensor written_at =
      storage_positions(a.int_list(1), a.int_list(2), a.optional_integer(3).value_or(x.offset()));
  Tensor buffer =
      ops::index_add(ops::zeros({extent}, g[0].dtype()), 0, written_at, ops::reshape(g[0], Shape{-1}));
  return {ops::reshape(ops::index_select(buffer, 0, read_at), x.sizes())};
});

}  // namespace tn::autograd