// Derivatives of pad (kernels/padding.cpp): constant padding crops the gradient back; the
// other modes read input elements more than once, and their gradients are summed back along
// the same index maps the forward gathered by.
#include "padding.h"

#include "formulas.h"

namespace tn::autograd {

namespace {
Tensor constant_pad_grad(const Tensor& g, const std::vector<int64_t>& pad) {
  std::vector<int64_t> crop(pad.size());
  for (size_t i = 0; i < pad.size(); ++i) crop[i] = -pad[i];
  return ops::pad(g, crop, std::string("constant"), std::nullopt);
}

Tensor index_pad_grad(const Tensor& g, const Shape& input_sizes, const std::vector<int64_t>& pad,
                      const std::string& mode) {
  Tensor grad = g;
  auto dims = int64_t(input_sizes.size());
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    int64_t d = dims - 1 - int64_t(i), size = input_sizes[size_t(d)];
    Shape shape = grad.sizes();
    shape[size_t(d)] = size;
    Tensor index = pad_index(size, pad[2 * i], pad[2 * i + 1], mode);
    grad = ops::index_add(ops::zeros(shape, g.dtype()), d, index, grad);
  }
  return grad;
}

}  // namespace

// The node is named for constant padding, the common case (upstream's ReflectionPad2DBackward0
// and kin for the other modes: one name per formula here).
TN_DERIVATIVE("aten::pad", "ConstantPadNdBackward0", SAVES(), {
  std::vector<int64_t> pad = s.args().int_list(1);
  std::string mode = s.args().optional_string(2).value_or("constant");
  if (mode == "constant") return {constant_pad_grad(g[0], pad)};
  return {index_pad_grad(g[0], s.input_sizes(0), pad, mode)};
});

}  // namespace tn::autograd
