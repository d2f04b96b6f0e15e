// What several formula files share.
#include <algorithm>
#include <cmath>

#include "formulas.h"

namespace tn::autograd {

Tensor sum_to(const Tensor& grad, const Shape& sizes) {
  if (grad.sizes() == sizes) return grad;
  int64_t lead = grad.dim() - int64_t(sizes.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < lead || (sizes[size_t(d - lead)] == 1 && grad.size(d) != 1)) dims.push_back(d);
  Tensor summed = dims.empty() ? grad : ops::sum(grad, dims, true, std::nullopt);
  return ops::reshape(summed, sizes);
}

Tensor scaled(const Tensor& t, double factor) { return ops::mul(t, Scalar(factor)); }

IValue none() { return IValue(); }

Tensor pointwise_grad(const Tensor& grad, const Tensor& x, const std::function<double(double)>& derivative) {
  Tensor xs = ops::_to_copy(ops::expand(x, grad.sizes(), false), ScalarType::Double).contiguous();
  Tensor gs = ops::_to_copy(grad, ScalarType::Double).contiguous();
  Tensor out = Tensor::empty(grad.sizes(), ScalarType::Double);
  const double *xv = xs.data_as<double>(), *gv = gs.data_as<double>();
  double* ov = out.data_as<double>();
  for (int64_t i = 0; i < out.numel(); ++i) ov[i] = gv[i] * derivative(xv[i]);
  return ops::_to_copy(out, grad.dtype());
}

Tensor unsqueeze_reduced(const Tensor& grad, const Shape& sizes,
                         const std::optional<std::vector<int64_t>>& dims, bool keepdim) {
  Tensor g = grad;
  if (!keepdim && !sizes.empty()) {
    std::vector<int64_t> reduced;
    if (!dims || dims->empty())
      for (int64_t d = 0; d < int64_t(sizes.size()); ++d) reduced.push_back(d);
    else
      for (int64_t d : *dims) reduced.push_back(wrap_dim(d, int64_t(sizes.size())));
    std::sort(reduced.begin(), reduced.end());
    for (int64_t d : reduced) g = ops::unsqueeze(g, d);
  }
  return g;
}

Tensor expand_reduced(const Tensor& grad, const Shape& sizes, const std::optional<std::vector<int64_t>>& dims,
                      bool keepdim) {
  return ops::expand(unsqueeze_reduced(grad, sizes, dims, keepdim), sizes, false);
}

Tensor to_selected(const Tensor& grad, const Tensor& indices, int64_t dim, bool keepdim, const Shape& sizes) {
  bool unsqueeze = !keepdim && !sizes.empty();
  Tensor g = unsqueeze ? ops::unsqueeze(grad, dim) : grad;
  Tensor index = unsqueeze ? ops::unsqueeze(indices, dim) : indices;
  return ops::scatter(ops::zeros(sizes, grad.dtype()), dim, index, g);
}

Tensor evenly_distributed(const Tensor& grad, const Tensor& x, const Tensor& value) {
  bool nan = std::isnan(value.item().to_double());
  Tensor mask = nan ? ops::isnan(x) : ops::eq(x, value);
  Tensor share = ops::div(grad, ops::sum(mask, std::nullopt, false, std::nullopt));
  return ops::masked_fill(ops::zeros_like(x, grad.dtype()), mask, share);
}

}  // namespace tn::autograd
