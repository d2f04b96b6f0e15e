// Derivatives of the reductions (kernels/reduce_ops.cpp).
#include <cmath>
#include <limits>

#include "formulas.h"

namespace tn::autograd {

namespace {
int64_t reduced_count(const Shape& sizes, const std::optional<std::vector<int64_t>>& dims) {
  int64_t n = 1;
  if (!dims || dims->empty() || sizes.empty()) {  // a 0-d tensor's dim 0 or -1 is its one element
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

// amax/amin: the gradient shared equally by the elements equal to the extreme (upstream's
// scale_grad_by_count: grad / count * mask, so the others get a signed zero).
Tensor evenly_to_extremes(const Tensor& g, const Tensor& x, const Tensor& extreme,
                          const std::optional<std::vector<int64_t>>& dims, bool keepdim) {
  Tensor mask = ops::eq(x, unsqueeze_reduced(extreme, x.sizes(), dims, keepdim));
  Tensor count = ops::sum(mask, dims && !dims->empty() ? dims : std::nullopt, true, std::nullopt);
  return ops::mul(ops::div(unsqueeze_reduced(g, x.sizes(), dims, keepdim), count), mask);
}

// max/min of all elements: the gradient shared by the elements equal to it, or by the NaNs
// when it is NaN (upstream's evenly_distribute_backward); the others get +0.
Tensor evenly_to_all_extremes(const Tensor& g, const Tensor& x, const Tensor& extreme) {
  bool nan = std::isnan(extreme.item().to_double());
  Tensor mask = nan ? ops::isnan(x) : ops::eq(x, extreme);
  Tensor share = ops::div(g, ops::sum(mask, std::nullopt, false, std::nullopt));
  return ops::masked_fill(ops::zeros_like(x, g.dtype()), mask, share);
}

// var: 2 / (N - correction) g (x - mean), in upstream's order; a variance of as many elements
// as the correction has an infinite derivative: inf g (upstream's var_backward).
Tensor var_grad(const Tensor& g, const Tensor& x, const std::optional<std::vector<int64_t>>& dims,
                bool keepdim, double correction) {
  auto over = dims && !dims->empty() && x.dim() != 0 ? dims : std::nullopt;
  double n = double(reduced_count(x.sizes(), dims)) - correction;
  if (!over && n == 0) return ops::mul(g, Scalar(std::numeric_limits<double>::infinity()));
  Tensor centred = ops::sub(x, ops::mean(x, over, true, std::nullopt));
  return ops::mul(ops::mul(unsqueeze_reduced(g, x.sizes(), over, keepdim), Scalar(2 / n)), centred);
}

// The correction of var/std's three overloads: `unbiased` (bool) or `correction` (int, default 1).
double correction_of(const Saved& s, size_t i) {
  const IValue& v = s.args()[i];
  if (v.is<bool>()) return v.get<bool>() ? 1 : 0;
  return v.is_none() ? 1 : double(s.args().integer(i));
}

// std = sqrt(var): var's derivative of g / (2 std), 0 where std is 0, as upstream's.
Tensor std_grad(const Saved& s, const Tensor& g, const std::optional<std::vector<int64_t>>& dims,
                bool keepdim, double correction) {
  const Tensor& sd = s.result();
  Tensor over_var = ops::masked_fill(ops::div(g, ops::mul(sd, Scalar(int64_t{2}))),
                                     ops::eq(sd, Scalar(int64_t{0})), Scalar(int64_t{0}));
  return var_grad(over_var, s.input(0), dims, keepdim, correction);
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
              { return {evenly_to_all_extremes(g[0], s.input(0), s.result())}; });
TN_DERIVATIVE("aten::min", "MinBackward1", SAVES_RESULT(0),
              { return {evenly_to_all_extremes(g[0], s.input(0), s.result())}; });
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

// nansum: the gradient of the sum where the element is a number, none where it is NaN.
TN_DERIVATIVE("aten::nansum", "NansumBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  Tensor spread = expand_reduced(g[0], x.sizes(), s.args().optional_int_list(1), s.args().boolean(2));
  return {ops::mul(spread, ops::logical_not(ops::isnan(x)))};
});

}  // namespace tn::autograd
