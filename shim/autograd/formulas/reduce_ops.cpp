// Derivatives of the reductions (kernels/reduce_ops.cpp).
#include "formulas.h"

namespace tn::autograd {

namespace {
int64_t reduced_count(const Shape& sizes, const std::optional<std::vector<int64_t>>& dims) {
  int64_t n = 1;
  if (!dims || dims->empty()) {
    for (int64_t s : sizes) n *= s;
    return n;
  }
  for (int64_t d : *dims) n *= sizes[size_t(wrap_dim(d, int64_t(sizes.size())))];
  return n;
}
// The reduced dims as a list (all of them when none given).
std::optional<std::vector<int64_t>> dims_of(const Saved& s, size_t i) {
  return s.args().optional_int_list(i);
}

// The gradient shared equally by the elements equal to the extreme (upstream's
// scale_grad_by_count): ties split it.
Tensor evenly_to_extremes(const Tensor& g, const Tensor& x, const Tensor& extreme,
                          const std::optional<std::vector<int64_t>>& dims, bool keepdim) {
  Tensor at_extreme = ops::eq(x, expand_reduced(extreme, x.sizes(), dims, keepdim));
  Tensor count = ops::sum(at_extreme, dims && !dims->empty() ? dims : std::nullopt, true, g.dtype());
  Tensor share = ops::div(expand_reduced(g, x.sizes(), dims, keepdim), count);
  return ops::where(at_extreme, share, ops::zeros_like(share));
}

// var: 2 (x - mean) / (N - correction), spread over the reduced elements.
Tensor var_grad(const Tensor& g, const Tensor& x, const std::optional<std::vector<int64_t>>& dims,
                bool keepdim, double correction) {
  auto over = dims && !dims->empty() ? dims : std::nullopt;
  Tensor centred = ops::sub(x, ops::mean(x, over, true, std::nullopt));
  double n = double(reduced_count(x.sizes(), dims)) - correction;
  return ops::mul(expand_reduced(g, x.sizes(), dims, keepdim), ops::mul(centred, Scalar(2 / n)));
}

// The correction of var/std's three overloads: `unbiased` (bool) or `correction` (int, default 1).
double correction_of(const Saved& s, size_t i) {
  const IValue& v = s.args()[i];
  if (v.is<bool>()) return v.get<bool>() ? 1 : 0;
  return v.is_none() ? 1 : double(s.args().integer(i));
}

// std = sqrt(var): var's gradient over 2 std (0 where std is 0, as upstream's).
Tensor std_grad(const Saved& s, const Tensor& g, const std::optional<std::vector<int64_t>>& dims,
                bool keepdim, double correction) {
  const Tensor& x = s.input(0);
  Tensor sd = expand_reduced(s.result(), x.sizes(), dims, keepdim);
  Tensor v = var_grad(g, x, dims, keepdim, correction);
  Tensor out = ops::div(v, ops::mul(sd, Scalar(int64_t{2})));
  return ops::masked_fill(out, ops::eq(sd, Scalar(int64_t{0})), Scalar(int64_t{0}));
}
}  // namespace

TN_DERIVATIVE("aten::sum", "SumBackward0", SAVES(), { return {ops::expand(g[0], s.input_sizes(0), false)}; });
TN_DERIVATIVE("aten::sum.dim_IntList", "SumBackward1", SAVES(), {
  return {expand_reduced(g[0], s.input_sizes(0), s.args().optional_int_list(1), s.args().boolean(2))};
});
TN_DERIVATIVE("aten::mean", "MeanBackward0", SAVES(), {
  const Shape& sizes = s.input_sizes(0);
  return {ops::div(ops::expand(g[0], sizes, false), Scalar(reduced_count(sizes, std::nullopt)))};
});
TN_DERIVATIVE("aten::mean.dim", "MeanBackward1", SAVES(), {
  const Shape& sizes = s.input_sizes(0);
  auto dims = s.args().optional_int_list(1);
  return {
      ops::div(expand_reduced(g[0], sizes, dims, s.args().boolean(2)), Scalar(reduced_count(sizes, dims)))};
});

TN_DERIVATIVE("aten::amax", "AmaxBackward0", SAVES_RESULT(0), {
  return {evenly_to_extremes(g[0], s.input(0), s.result(), dims_of(s, 1), s.args().boolean(2))};
});
TN_DERIVATIVE("aten::amin", "AminBackward0", SAVES_RESULT(0), {
  return {evenly_to_extremes(g[0], s.input(0), s.result(), dims_of(s, 1), s.args().boolean(2))};
});
TN_DERIVATIVE("aten::max", "MaxBackward1", SAVES_RESULT(0),
              { return {evenly_to_extremes(g[0], s.input(0), s.result(), std::nullopt, false)}; });
TN_DERIVATIVE("aten::min", "MinBackward1", SAVES_RESULT(0),
              { return {evenly_to_extremes(g[0], s.input(0), s.result(), std::nullopt, false)}; });
// max/min along a dim: the gradient goes to the index the forward chose.
#define TN_SELECTING_DERIVATIVE(OP, NODE)                                                \
  TN_DERIVATIVE(OP, NODE, SAVES_RESULT(), {                                              \
    int64_t dim = s.args().integer(1);                                                   \
    bool keepdim = s.args().boolean(2);                                                  \
    Tensor index = keepdim ? s.result(1) : ops::unsqueeze(s.result(1), dim);             \
    Tensor grad = keepdim ? g[0] : ops::unsqueeze(g[0], dim);                            \
    return {ops::scatter(ops::zeros(s.input_sizes(0), g[0].dtype()), dim, index, grad)}; \
  })
TN_SELECTING_DERIVATIVE("aten::max.dim", "MaxBackward0");
TN_SELECTING_DERIVATIVE("aten::min.dim", "MinBackward0");
#undef TN_SELECTING_DERIVATIVE

TN_DERIVATIVE("aten::var", "VarBackward0", SAVES(0),
              { return {var_grad(g[0], s.input(0), std::nullopt, false, correction_of(s, 1))}; });
TN_DERIVATIVE("aten::var.dim", "VarBackward0", SAVES(0), {
  return {var_grad(g[0], s.input(0), dims_of(s, 1), s.args().boolean(3), correction_of(s, 2))};
});
TN_DERIVATIVE("aten::var.correction", "VarBackward0", SAVES(0), {
  return {var_grad(g[0], s.input(0), dims_of(s, 1), s.args().boolean(3), correction_of(s, 2))};
});
TN_DERIVATIVE("aten::std", "StdBackward0", SAVES_RESULT(0),
              { return {std_grad(s, g[0], std::nullopt, false, correction_of(s, 1))}; });
TN_DERIVATIVE("aten::std.dim", "StdBackward0", SAVES_RESULT(0),
              { return {std_grad(s, g[0], dims_of(s, 1), s.args().boolean(3), correction_of(s, 2))}; });
TN_DERIVATIVE("aten::std.correction", "StdBackward0", SAVES_RESULT(0),
              { return {std_grad(s, g[0], dims_of(s, 1), s.args().boolean(3), correction_of(s, 2))}; });
// d/dx log sum exp x = softmax: exp(x - result).
TN_DERIVATIVE("aten::logsumexp", "LogsumexpBackward0", SAVES_RESULT(0), {
  const Tensor& x = s.input(0);
  auto dims = dims_of(s, 1);
  bool keepdim = s.args().boolean(2);
  Tensor result = expand_reduced(s.result(), x.sizes(), dims, keepdim);
  return {ops::mul(expand_reduced(g[0], x.sizes(), dims, keepdim), ops::exp(ops::sub(x, result)))};
});

}  // namespace tn::autograd
