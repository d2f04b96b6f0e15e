// Joining tensors: cat, concat, stack, hstack, vstack, dstack, column_stack.
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error("torch.cat(): expected a non-empty list of Tensors");
  ResultType r;
  const Tensor* reference = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    r.add(t);
    if (t.dim() == 0)
      throw Error("zero-dimensional tensor (at position " + std::to_string(i) + ") cannot be concatenated");
    // Upstream still skips legacy empty 1-D tensors of any other rank.
    if (!(t.dim() == 1 && t.size(0) == 0) && !reference) reference = &t;
  }
  ScalarType type = r.get();
  if (!reference) return Tensor::empty({0}, type);
  dim = wrap_dim(dim, reference->dim());
  Shape shape = reference->sizes();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 1 && t.size(0) == 0) continue;
    if (t.dim() != reference->dim())
      throw Error("Tensors must have same number of dimensions: got " + std::to_string(reference->dim()) +
                  " and " + std::to_string(t.dim()));
    for (int64_t d = 0; d < t.dim(); ++d)
      if (d != dim && t.sizes()[size_t(d)] != shape[size_t(d)])
        throw Error("Sizes of tensors must match except in dimension " + std::to_string(dim) +
                    ". Expected size " + std::to_string(shape[size_t(d)]) + " but got size " +
                    std::to_string(t.sizes()[size_t(d)]) + " for tensor number " + std::to_string(i) +
                    " in the list.");
    total += t.sizes()[size_t(dim)];
  }
  shape[size_t(dim)] = total;
  Tensor out = Tensor::empty(shape, type);
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.size(0) == 0) continue;
    int64_t n = t.sizes()[size_t(dim)];
    ops::slice(out, dim, offset, offset + n, int64_t{1}).copy_from(t);
    offset += n;
  }
  return out;
}

Tensor stack_tensors(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error("stack expects a non-empty TensorList");
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].sizes() != tensors[0].sizes())
      throw Error("stack expects each tensor to be equal size, but got " + shape_str(tensors[0].sizes()) +
                  " at entry 0 and " + shape_str(tensors[i].sizes()) + " at entry " + std::to_string(i));
  dim = wrap_dim(dim, tensors[0].dim() + 1);
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) expanded.push_back(ops::unsqueeze(t, dim));
  return cat(expanded, dim);
}

}  // namespace

TN_KERNEL("aten::cat", { return cat(a.tensor_list(0), a.integer(1)); });
TN_KERNEL("aten::concat", { return cat(a.tensor_list(0), a.integer(1)); });
TN_KERNEL("aten::stack", { return stack_tensors(a.tensor_list(0), a.integer(1)); });
// The stacks are cats of their tensors raised to a rank, through the door, so that under
// autograd their parts record as upstream's composites do (CatBackward0 over the views).
TN_KERNEL("aten::hstack", {
  auto ts = ops::atleast_1d(a.tensor_list(0));
  return ops::cat(ts, !ts.empty() && ts[0].dim() == 1 ? 0 : 1);
});
TN_KERNEL("aten::vstack", { return ops::cat(ops::atleast_2d(a.tensor_list(0)), 0); });
TN_KERNEL("aten::dstack", { return ops::cat(ops::atleast_3d(a.tensor_list(0)), 2); });
TN_KERNEL("aten::column_stack", {
  std::vector<Tensor> ts;
  for (const Tensor& t : a.tensor_list(0))
    ts.push_back(t.dim() <= 1 ? ops::reshape(t, Shape{t.numel(), 1}) : t);
  return ops::cat(ts, 1);
});

}  // namespace tn
