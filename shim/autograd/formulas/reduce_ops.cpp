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

// mean: each element's equal share of the gradient.
Tensor mean_grad(const Tensor& g, const Shape& sizes, const std::optional<std::vector<int64_t>>& dims,
                 bool keepdim) {
  return ops::div(expand_reduced(g, sizes, dims, keepdim), Scalar(reduced_count(sizes, dims)));
}
}  // namespace

TN_DERIVATIVE("aten::sum", "SumBackward0", SAVES(), { return {ops::expand(g[0], s.input_sizes(0), false)}; });
TN_DERIVATIVE("aten::sum.dim_IntList", "SumBackward1", SAVES(), {
  return {expand_reduced(g[0], s.input_sizes(0), s.args().optional_int_list(1), s.args().boolean(2))};
});
TN_DERIVATIVE("aten::mean", "MeanBackward0", SAVES(),
              { return {mean_grad(g[0], s.input_sizes(0), std::nullopt, false)}; });
TN_DERIVATIVE("aten::mean.dim", "MeanBackward1", SAVES(), {
  return {mean_grad(g[0], s.input_sizes(0), s.args().optional_int_list(1), s.args().boolean(2))};
});

TN_DERIVATIVE("aten::amax", "AmaxBackward0", SAVES_RESULT(0), {
  return {evenly_to_extremes(g[0], s.input(0), s.result(), dims_of(s, 1), s.args().boolean(2))};
});
TN_DERIVATIVE("aten::amin", "AminBackward0", SAVES_RESULT(0), {
  return {evenly_to_extremes(g[0], s.input(0), s.result(), dims_of(s, 1), s.args().boolean(2))};
});
TN_DERIVATIVE("aten::max", "MaxBackward1", SAVES_RESULT(0),
              { return {evenly_distributed(g[0], s.input(0), s.result())}; });
TN_DERIVATIVE("aten::min", "MinBackward1", SAVES_RESULT(0),
              { return {evenly_distributed(g[0], s.input(0), s.result())}; });
// max/min along a dim: the gradient goes to the index the forward chose.
TN_DERIVATIVE("aten::max.dim", "MaxBackward0", SAVES_RESULT(), {
  return {to_selected(g[0], s.result(1), s.args().integer(1), s.args().boolean(2), s.input_sizes(0))};
});
TN_DERIVATIVE("aten::min.dim", "MinBackward0", SAVES_RESULT(), {
  return {to_selected(g[0], s.result(1), s.args().integer(1), s.args().boolean(2), s.input_sizes(0))};
});

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

// nanmean = nansum / the count of numbers: each number's share of the gradient.
TN_DERIVATIVE("aten::nanmean", "DivBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  auto dims = s.args().optional_int_list(1);
  bool keepdim = s.args().boolean(2);
  Tensor numbers = ops::logical_not(ops::isnan(x));
  Tensor count = ops::sum(numbers, dims && !dims->empty() ? dims : std::nullopt, keepdim, std::nullopt);
  return {ops::mul(expand_reduced(ops::div(g[0], count), x.sizes(), dims, keepdim), numbers)};
});

// var_mean and std_mean: the sum of var's (or std's) and mean's derivatives.
TN_DERIVATIVE("aten::var_mean", "VarMeanBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  return {ops::add(var_grad(g[0], x, std::nullopt, false, correction_of(s, 1)),
                   mean_grad(g[1], x.sizes(), std::nullopt, false))};
});
TN_DERIVATIVE("aten::var_mean.dim", "VarMeanBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  bool keepdim = s.args().boolean(3);
  return {ops::add(var_grad(g[0], x, dims_of(s, 1), keepdim, correction_of(s, 2)),
                   mean_grad(g[1], x.sizes(), dims_of(s, 1), keepdim))};
});
TN_DERIVATIVE("aten::var_mean.correction", "VarMeanBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  bool keepdim = s.args().boolean(3);
  return {ops::add(var_grad(g[0], x, dims_of(s, 1), keepdim, correction_of(s, 2)),
                   mean_grad(g[1], x.sizes(), dims_of(s, 1), keepdim))};
});
TN_DERIVATIVE("aten::std_mean", "StdMeanBackward0", SAVES_RESULT(0), {
  return {ops::add(std_grad(s, g[0], std::nullopt, false, correction_of(s, 1)),
                   mean_grad(g[1], s.input_sizes(0), std::nullopt, false))};
});
TN_DERIVATIVE("aten::std_mean.dim", "StdMeanBackward0", SAVES_RESULT(0), {
  bool keepdim = s.args().boolean(3);
  return {ops::add(std_grad(s, g[0], dims_of(s, 1), keepdim, correction_of(s, 2)),
                   mean_grad(g[1], s.input_sizes(0), dims_of(s, 1), keepdim))};
});
TN_DERIVATIVE("aten::std_mean.correction", "StdMeanBackward0", SAVES_RESULT(0), {
  bool keepdim = s.args().boolean(3);
  return {ops::add(std_grad(s, g[0], dims_of(s, 1), keepdim, correction_of(s, 2)),
                   mean_grad(g[1], s.input_sizes(0), dims_of(s, 1), keepdim))};
});

namespace {
// The product of the other elements along `dim`, when some are zero: exclusive cumulative
// products from both ends (upstream's prod_safe_zeros_backward).
Tensor product_of_others(const Tensor& g, const Tensor& x, int64_t dim) {
  if (x.size(dim) == 1) return g;
  Shape ones_shape = x.sizes();
  ones_shape[size_t(wrap_dim(dim, x.dim()))] = 1;
  Tensor ones = ops::ones(ones_shape, x.dtype());
  int64_t n = x.size(dim);
  Tensor before = ops::cumprod(ops::cat({ones, ops::narrow(x, dim, 0, n - 1)}, dim), dim);
  Tensor after_reversed = ops::cat({ones, ops::flip(ops::narrow(x, dim, 1, n - 1), {dim})}, dim);
  Tensor after = ops::flip(ops::cumprod(after_reversed, dim), {dim});
  return ops::mul(g, ops::mul(before, after));
}
}  // namespace
// prod: g prod / x without zeros; with one zero only it gets a gradient; with more, none.
TN_DERIVATIVE("aten::prod", "ProdBackward0", SAVES_RESULT(0), {
  const Tensor& x = s.input(0);
  if (x.dim() == 0) return {g[0]};
  int64_t zeros = ops::sum(ops::eq(x, Scalar(int64_t{0})), std::nullopt, false, std::nullopt).item().to_int();
  if (zeros == 0) return {ops::mul(g[0], ops::div(s.result(), x))};
  if (zeros > 1) return {ops::zeros_like(x, g[0].dtype())};
  Tensor flat = ops::reshape(x, {x.numel()});
  return {ops::reshape(product_of_others(ops::expand(g[0], flat.sizes(), false), flat, 0), x.sizes())};
});
TN_DERIVATIVE("aten::prod.dim_int", "ProdBackward1", SAVES_RESULT(0), {
  const Tensor& x = s.input(0);
  if (x.dim() == 0) return {g[0]};
  int64_t dim = s.args().integer(1);
  bool keepdim = s.args().boolean(2);
  Tensor grad = keepdim ? g[0] : ops::unsqueeze(g[0], dim);
  Tensor result = keepdim ? s.result() : ops::unsqueeze(s.result(), dim);
  int64_t zeros = ops::sum(ops::eq(x, Scalar(int64_t{0})), std::nullopt, false, std::nullopt).item().to_int();
  if (zeros == 0) return {ops::mul(grad, ops::div(result, x))};
  return {product_of_others(grad, x, dim)};
});

// Upstream has no derivative for aminmax.
TN_NO_DERIVATIVE_UPSTREAM("aten::aminmax", "aten::aminmax");

}  // namespace tn::autograd
