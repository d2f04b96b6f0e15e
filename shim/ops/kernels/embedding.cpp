// embedding, embedding_renorm_, embedding_bag and one_hot.
#include <algorithm>
#include <map>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

TN_KERNEL("aten::one_hot", {
  const Tensor& self = a.tensor(0);
  if (self.dtype() != ScalarType::Long) throw Error("one_hot is only applicable to index tensor.");
  int64_t classes = a.integer(1);
  Tensor values = self.contiguous();
  int64_t max_value = -1;
  for (int64_t i = 0; i < values.numel(); ++i) {
    int64_t v = values.data_as<int64_t>()[i];
    if (v < 0) throw Error("Class values must be non-negative.");
    max_value = std::max(max_value, v);
  }
  if (classes == -1) classes = max_value + 1;
  if (max_value >= classes) throw Error("Class values must be smaller than num_classes.");
  Shape shape = self.sizes();
  shape.push_back(classes);
  Tensor out = Tensor::empty(shape, ScalarType::Long);
  std::fill_n(out.data_as<int64_t>(), out.numel(), 0);
  for (int64_t i = 0; i < values.numel(); ++i)
    out.data_as<int64_t>()[i * classes + values.data_as<int64_t>()[i]] = 1;
  return out;
});
TN_KERNEL("aten::embedding", {
  const Tensor& weight = a.tensor(0);
  Tensor indices = a.tensor(1);
  if (indices.dtype() != ScalarType::Long && indices.dtype() != ScalarType::Int)
    throw Error(
        "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but "
        "got torch.FloatTensor instead (while checking arguments for embedding)");
  if (weight.dim() != 2) throw Error("'weight' must be 2-D");
  Tensor rows = ops::index_select(weight, 0, flat(indices));
  Shape shape = indices.sizes();
  shape.push_back(weight.size(1));
  return ops::reshape(rows, shape);
});

// Each distinct looked-up row whose norm exceeds max_norm scaled to max_norm / (norm + 1e-7), in
// ascending row order, as upstream's embedding_renorm_cpu_ (the norm read back as a double).
TN_KERNEL("aten::embedding_renorm_", {
  const Tensor& self = a.tensor(0);
  const Tensor& indices = a.tensor(1);
  double max_norm = a.real(2), norm_type = a.real(3);
  if (self.dim() != 2)
    throw Error(
        "Expected 2-dimensional tensor, but got " + std::to_string(self.dim()) +
        "-dimensional tensor for argument #1 'self' (while checking arguments for embedding_renorm_)");
  if (indices.dtype() != ScalarType::Long && indices.dtype() != ScalarType::Int)
    throw Error(
        "Expected tensor for argument #2 'indices' to have one of the following scalar types: Long, Int");
  Tensor rows = ops::_to_copy(flat(indices), ScalarType::Long).contiguous();
  std::vector<int64_t> sorted(rows.data_as<int64_t>(), rows.data_as<int64_t>() + rows.numel());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (int64_t index : sorted) {
    if (index < -self.size(0) || index >= self.size(0))
      throw IndexError("index " + std::to_string(index) + " is out of bounds for dimension 0 with size " +
                       std::to_string(self.size(0)));
    Tensor row = ops::select(self, 0, index);
    double norm = ops::norm(row, Scalar(norm_type)).item().to_double();
    if (norm > max_norm) ops::mul_(row, Scalar(max_norm / (norm + 1e-7)));
  }
  return self;
});

namespace {

std::vector<int64_t> int64_values(const Tensor& t, const char* name) {
  if (t.dtype() != ScalarType::Long && t.dtype() != ScalarType::Int)
    throw Error(std::string("Expected tensor for argument #1 '") + name +
                "' to have one of the following scalar types: Long, Int; but got " +
                upstream_type_name(t.dtype()) + " instead (while checking arguments for embedding_bag)");
  Tensor values = ops::_to_copy(flat(t), ScalarType::Long).contiguous();
  return {values.data_as<int64_t>(), values.data_as<int64_t>() + values.numel()};
}

Tensor long_tensor(const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty({int64_t(values.size())}, ScalarType::Long);
  std::copy(values.begin(), values.end(), t.data_as<int64_t>());
  return t;
}

enum BagMode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

// A call's bags: which bag each index is in (upstream's offset2bag: a one added at each offset,
// cumulated, minus one) and how many indices each bag holds.
struct BagLayout {
  std::vector<int64_t> indices, offsets, bag_of;
  int64_t bags;
};

BagLayout bag_layout(const Tensor& indices, const Tensor& offsets, bool include_last_offset) {
  BagLayout l{int64_values(indices, "indices"), int64_values(offsets, "offsets"), {}, 0};
  int64_t n = int64_t(l.indices.size());
  if (include_last_offset && l.offsets.empty())
    throw Error("include_last_offset: number of offset should be at least 1");
  l.bags = int64_t(l.offsets.size()) - (include_last_offset ? 1 : 0);
  if (!l.offsets.empty() && l.offsets[0] != 0)
    throw Error(
        "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
        "However, got " +
        std::to_string(l.offsets[0]));
  std::vector<int64_t> starts(size_t(n + 1), 0);
  for (int64_t o : l.offsets) {
    if (o < 0 || o > n) throw Error("embedding_bag: offset " + std::to_string(o) + " is out of range");
    ++starts[size_t(o)];
  }
  for (int64_t i = 0, running = 0; i < n; ++i) {
    running += starts[size_t(i)];
    // Upstream writes past its output here (indices after include_last_offset's last offset).
    if (running - 1 >= l.bags)
      throw Error("embedding_bag: index " + std::to_string(i) + " is after the last bag's end");
    l.bag_of.push_back(running - 1);
  }
  return l;
}

template <typename scalar_t>
void bag_reduce(const BagLayout& l, const Tensor& weight, const std::optional<Tensor>& psw, int64_t mode,
                int64_t padding_idx, Tensor& output, std::vector<int64_t>& bag_size, Tensor& max_indices) {
  int64_t dim = weight.size(1), rows = weight.size(0);
  Tensor w = weight.contiguous();
  Tensor weights = psw ? psw->contiguous() : Tensor();
  const scalar_t* wv = w.data_as<scalar_t>();
  scalar_t* out = output.data_as<scalar_t>();
  std::vector<bool> empty(size_t(l.bags), true);
  // Upstream's float path without padding_idx multiplies and adds in one rounding (its vectorised
  // kernel); the others round the product first (measured on upstream's per-sample weights).
  bool fused = std::is_same_v<scalar_t, float> && padding_idx < 0;
  for (size_t i = 0; i < l.indices.size(); ++i) {
    int64_t idx = l.indices[i], bag = l.bag_of[i];
    if (idx < 0 || idx >= rows)
      throw Error("embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be " +
                  std::to_string(idx));
    if (idx == padding_idx) {
      --bag_size[size_t(bag)];
      continue;
    }
    const scalar_t* row = wv + idx * dim;
    scalar_t* target = out + bag * dim;
    for (int64_t j = 0; j < dim; ++j) {
      if (mode == kMax) {
        if (empty[size_t(bag)] || row[j] > target[j]) {
          target[j] = row[j];
          max_indices.data_as<int64_t>()[bag * dim + j] = idx;
        }
      } else {
        target[j] = !psw    ? target[j] + row[j]
                    : fused ? std::fma(row[j], weights.data_as<scalar_t>()[i], target[j])
                            : scalar_t(target[j] + scalar_t(row[j] * weights.data_as<scalar_t>()[i]));
      }
    }
    empty[size_t(bag)] = false;
  }
  if (mode == kMean)
    for (int64_t b = 0; b < l.bags; ++b)
      for (int64_t j = 0; j < dim; ++j)
        out[b * dim + j] /= scalar_t(std::max<int64_t>(bag_size[size_t(b)], 1));
}

// Upstream's _embedding_bag on CPU: each bag's rows summed in index order (times its
// per-sample weight), averaged over the bag's indices other than padding_idx, or their
// elementwise maximum (the first maximum's row in max_indices); an empty bag is zeros.
// Also returned as upstream's: offset2bag, bag_size (zeros for sum) and max_indices (bag_size
// for mean, the rows chosen for max, zeros for sum).
IValue embedding_bag_forward(const Tensor& weight, const Tensor& indices, const Tensor& offsets, int64_t mode,
                             bool sparse, const std::optional<Tensor>& psw, bool include_last_offset,
                             int64_t padding_idx) {
  if (weight.dim() != 2) throw Error("embedding_bag: 'weight' must be 2-D");
  if (mode < kSum || mode > kMax) throw Error("embedding_bag: unknown mode " + std::to_string(mode));
  if (sparse && mode == kMax) throw Error("max mode does not support sparse weights");
  BagLayout l = bag_layout(indices, offsets, include_last_offset);
  if (psw) {
    if (mode != kSum) throw Error("embedding_bag: per_sample_weights only supported with mode='sum'");
    if (psw->dtype() != weight.dtype() || psw->dim() != 1 || psw->numel() != int64_t(l.indices.size()))
      throw Error("embedding_bag: per_sample_weights must be 1-D, of weight's dtype and one per index");
  }
  int64_t n = int64_t(l.indices.size()), dim = weight.size(1);
  std::vector<int64_t> bag_size(size_t(l.bags), 0);
  for (int64_t b = 0; b < l.bags; ++b)
    bag_size[size_t(b)] =
        (b + 1 < int64_t(l.offsets.size()) ? l.offsets[size_t(b + 1)] : n) - l.offsets[size_t(b)];
  Tensor output = ops::zeros({l.bags, dim}, weight.dtype());
  Tensor max_indices = ops::zeros(mode == kMax ? Shape{l.bags, dim} : Shape{l.bags}, ScalarType::Long);
  TN_DISPATCH_ALL_TYPES(weight.dtype(), "embedding_bag", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>)
      bag_reduce<scalar_t>(l, weight, psw, mode, padding_idx, output, bag_size, max_indices);
    else
      dtype_not_implemented("embedding_bag", weight.dtype());
  });
  if (mode == kSum) std::fill(bag_size.begin(), bag_size.end(), 0);
  Tensor sizes = ops::_to_copy(long_tensor(bag_size), offsets.dtype());
  if (mode == kMean) max_indices = sizes.clone();
  return IValue::tuple({output, ops::_to_copy(long_tensor(l.bag_of), offsets.dtype()), sizes,
                        ops::_to_copy(max_indices, indices.dtype())});
}

// embedding_bag's padding_idx: within [-rows, rows), negative counted from the end.
int64_t wrapped_padding_idx(const Tensor& weight, std::optional<int64_t> padding_idx) {
  if (!padding_idx) return -1;
  int64_t rows = weight.size(0);
  if (*padding_idx < -rows || *padding_idx >= rows)
    throw Error("padding_idx must be within the number of embeddings, -" + std::to_string(rows) +
                " through " + std::to_string(rows - 1) + ", but got " + std::to_string(*padding_idx));
  return *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
}

}  // namespace

TN_KERNEL("aten::_embedding_bag", {
  return embedding_bag_forward(a.tensor(0), a.tensor(1), a.tensor(2), a.integer(4), a.boolean(5),
                               a.optional_tensor(6), a.boolean(7), a.integer(8));
});
TN_KERNEL("aten::_embedding_bag_forward_only", {
  return embedding_bag_forward(a.tensor(0), a.tensor(1), a.tensor(2), a.integer(4), a.boolean(5),
                               a.optional_tensor(6), a.boolean(7), a.integer(8));
});
// Upstream's composite: padding_idx checked and wrapped, then _embedding_bag (recorded: kDecomposed).
TN_KERNEL("aten::embedding_bag.padding_idx", {
  auto r = ops::_embedding_bag(a.tensor(0), a.tensor(1), a.tensor(2), a.boolean(3), a.integer(4),
                               a.boolean(5), a.optional_tensor(6), a.boolean(7),
                               wrapped_padding_idx(a.tensor(0), a.optional_integer(8)));
  return IValue::tuple({std::get<0>(r), std::get<1>(r), std::get<2>(r), std::get<3>(r)});
});
TN_KERNEL("aten::embedding_bag", {
  auto r = ops::_embedding_bag(a.tensor(0), a.tensor(1), a.tensor(2), a.boolean(3), a.integer(4),
                               a.boolean(5), a.optional_tensor(6), a.boolean(7), -1);
  return IValue::tuple({std::get<0>(r), std::get<1>(r), std::get<2>(r), std::get<3>(r)});
});

namespace {

// Each index's bag gradient added to its row, in the order of the sorted indices (upstream's
// _embedding_bag_dense_backward_cpu_sum_mean), scaled by its per-sample weight (sum) or 1 over
// its bag's size (mean), the scale rounded to the gradient's type; the maximum's row (max).
template <typename scalar_t>
void bag_backward(const Tensor& g, const std::vector<int64_t>& indices, const std::vector<int64_t>& bag_of,
                  const std::vector<int64_t>& bag_size, const Tensor& max_indices,
                  const std::optional<Tensor>& psw, int64_t mode, int64_t padding_idx, Tensor& grad_weight) {
  int64_t dim = g.size(1), rows = grad_weight.size(0);
  const scalar_t* gv = g.data_as<scalar_t>();
  scalar_t* out = grad_weight.data_as<scalar_t>();
  if (mode == kMax) {
    const int64_t* chosen = max_indices.data_as<int64_t>();
    for (int64_t b = 0; b < g.size(0); ++b)
      if (bag_size[size_t(b)] != 0)
        for (int64_t j = 0; j < dim; ++j) out[chosen[b * dim + j] * dim + j] += gv[b * dim + j];
    return;
  }
  Tensor weights = psw ? psw->contiguous() : Tensor();
  std::vector<size_t> order(indices.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return indices[x] < indices[y]; });
  for (size_t i : order) {
    int64_t idx = indices[i], bag = bag_of[i];
    if (idx == padding_idx) continue;
    if (idx < 0 || idx >= rows) throw Error("embedding_bag backward: index out of range");
    double scale = psw ? double(weights.data_as<scalar_t>()[i]) : 1.0;
    if (mode == kMean && bag_size[size_t(bag)] != 0) scale /= double(bag_size[size_t(bag)]);
    // Upstream adds through BLAS axpy, whose kernels fuse the multiply and the add.
    for (int64_t j = 0; j < dim; ++j)
      out[idx * dim + j] = std::fma(scalar_t(scale), gv[bag * dim + j], out[idx * dim + j]);
  }
}

template <typename F>
void floating_only(ScalarType t, const char* name, F&& f) {
  TN_DISPATCH_ALL_TYPES(t, name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>)
      f(scalar_t{});
    else
      dtype_not_implemented(name, t);
  });
}

}  // namespace

TN_KERNEL("aten::_embedding_bag_backward", {
  Tensor g = a.tensor(0).contiguous();
  if (a.boolean(7))
    throw NotImplemented("torchnative does not differentiate embedding_bag with scale_grad_by_freq=True yet");
  if (a.boolean(9))
    throw NotImplemented("torchnative does not differentiate embedding_bag with sparse=True yet");
  std::vector<int64_t> indices = int64_values(a.tensor(1), "indices"),
                       bag_of = int64_values(a.tensor(3), "offset2bag"),
                       bag_size = int64_values(a.tensor(4), "bag_size");
  Tensor max_indices = ops::_to_copy(a.tensor(5), ScalarType::Long).contiguous();
  Tensor grad_weight = ops::zeros({a.integer(6), g.size(1)}, g.dtype());
  floating_only(g.dtype(), "embedding_bag_backward", [&](auto zero) {
    bag_backward<decltype(zero)>(g, indices, bag_of, bag_size, max_indices, a.optional_tensor(10),
                                 a.integer(8), a.integer(11), grad_weight);
  });
  return grad_weight;
});
// Each per-sample weight's gradient: its bag's gradient dotted with its row (0 for padding_idx).
TN_KERNEL("aten::_embedding_bag_per_sample_weights_backward", {
  Tensor g = a.tensor(0).contiguous(), weight = a.tensor(1).contiguous();
  if (a.integer(5) != kSum)
    throw Error("embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  std::vector<int64_t> indices = int64_values(a.tensor(2), "indices"),
                       bag_of = int64_values(a.tensor(4), "offset2bag");
  int64_t dim = g.size(1), padding_idx = a.integer(6);
  Tensor out = ops::zeros({int64_t(indices.size())}, g.dtype());
  floating_only(g.dtype(), "embedding_bag_per_sample_weights_backward", [&](auto zero) {
    using scalar_t = decltype(zero);
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] == padding_idx) continue;
      scalar_t acc = 0;
      for (int64_t j = 0; j < dim; ++j)
        acc += g.data_as<scalar_t>()[bag_of[i] * dim + j] * weight.data_as<scalar_t>()[indices[i] * dim + j];
      out.data_as<scalar_t>()[i] = acc;
    }
  });
  return out;
});

}  // namespace tn
