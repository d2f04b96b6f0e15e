// Sorting and order statistics: sort, argsort, msort, topk, kthvalue, median, nanmedian, mode.
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// Sorting along a dim: NaN is larger than everything; equal elements keep their order
// (upstream's CPU sort is stable whatever `stable` says).
std::pair<Tensor, Tensor> sort(const Tensor& self, int64_t dim, bool descending) {
  Rows rows = rows_along(self, dim);
  Tensor values = Tensor::empty(rows.data.sizes(), self.dtype());
  Tensor indices = Tensor::empty(rows.data.sizes(), ScalarType::Long);
  if (!values.is_meta())  // the meta device: the shapes are the results
    TN_DISPATCH_ALL_TYPES(self.dtype(), "sort", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      std::vector<int64_t> order(size_t(rows.length));
      for (int64_t r = 0; r < rows.count; ++r) {
        const scalar_t* in = rows.data.template data_as<scalar_t>() + r * rows.length;
        std::iota(order.begin(), order.end(), 0);
        auto less = [&](int64_t a, int64_t b) {
          auto x = compute_t<scalar_t>(in[a]), y = compute_t<scalar_t>(in[b]);
          if constexpr (std::is_floating_point_v<decltype(x)>) {
            if (std::isnan(x)) return false;
            if (std::isnan(y)) return true;
          }
          return x < y;
        };
        if (descending)
          std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return less(b, a); });
        else
          std::stable_sort(order.begin(), order.end(), less);
        for (int64_t j = 0; j < rows.length; ++j) {
          values.template data_as<scalar_t>()[r * rows.length + j] = in[order[size_t(j)]];
          indices.template data_as<int64_t>()[r * rows.length + j] = order[size_t(j)];
        }
      }
    });
  return {from_rows(values, rows, rows.length, true), from_rows(indices, rows, rows.length, true)};
}

// topk: upstream's selection on (value, position) pairs with the standard library
// (partial_sort when k is small against the row, else nth_element and a sort of the
// first k-1); the same library calls reproduce its order among ties.
std::pair<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  if (self.dtype() == ScalarType::Half) dtype_not_implemented("topk_cpu", self.dtype());
  Rows rows = rows_along(self, dim);
  if (k < 0 || k > rows.length) throw Error("selected index k out of range");
  Tensor values = Tensor::empty({rows.count, k}, self.dtype());
  Tensor indices = Tensor::empty({rows.count, k}, ScalarType::Long);
  if (values.is_meta()) return {from_rows(values, rows, k, true), from_rows(indices, rows, k, true)};
  using elem_t = std::pair<double, int64_t>;
  auto before = [largest](const elem_t& x, const elem_t& y) {
    if (largest) return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
    return (!std::isnan(x.first) && std::isnan(y.first)) || x.first < y.first;
  };
  TN_DISPATCH_ALL_TYPES(self.dtype(), "topk", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    std::vector<elem_t> queue(static_cast<size_t>(rows.length));
    for (int64_t r = 0; r < rows.count; ++r) {
      const scalar_t* in = rows.data.template data_as<scalar_t>() + r * rows.length;
      for (int64_t j = 0; j < rows.length; ++j) queue[size_t(j)] = {double(compute_t<scalar_t>(in[j])), j};
      if (k > 0) {
        if (k * 64 <= rows.length) {
          std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), before);
        } else {
          std::nth_element(queue.begin(), queue.begin() + k - 1, queue.end(), before);
          if (sorted) std::sort(queue.begin(), queue.begin() + k - 1, before);
        }
      }
      for (int64_t j = 0; j < k; ++j) {
        values.template data_as<scalar_t>()[r * k + j] = in[queue[size_t(j)].second];
        indices.template data_as<int64_t>()[r * k + j] = queue[size_t(j)].second;
      }
    }
  });
  return {from_rows(values, rows, k, true), from_rows(indices, rows, k, true)};
}

// Picks, per row, an index into the row; returns (values, indices) laid back.
template <typename Pick>
std::pair<Tensor, Tensor> select_per_row(const Tensor& self, int64_t dim, bool keepdim, const char* name,
                                         Pick pick) {
  Rows rows = rows_along(self, dim);
  if (rows.length == 0)
    throw IndexError(std::string(name) + "(): Expected reduction dim " + std::to_string(rows.dim) +
                     " to have non-zero size.");
  Tensor values = Tensor::empty({rows.count}, self.dtype());
  Tensor indices = Tensor::empty({rows.count}, ScalarType::Long);
  if (!values.is_meta())  // the meta device: the shapes are the results
    TN_DISPATCH_ALL_TYPES(self.dtype(), name, [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      for (int64_t r = 0; r < rows.count; ++r) {
        const scalar_t* row = rows.data.template data_as<scalar_t>() + r * rows.length;
        std::vector<double> v(size_t(rows.length));
        for (int64_t j = 0; j < rows.length; ++j) v[size_t(j)] = double(compute_t<scalar_t>(row[j]));
        int64_t k = pick(v);
        values.template data_as<scalar_t>()[r] = row[k];
        indices.template data_as<int64_t>()[r] = k;
      }
    });
  return {from_rows(values, rows, 1, keepdim), from_rows(indices, rows, 1, keepdim)};
}

// Row positions sorted by (value, position): NaN sorts last, ties keep position order.
std::vector<int64_t> stable_order(const std::vector<double>& v) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    double x = v[size_t(a)], y = v[size_t(b)];
    if (std::isnan(x)) return false;
    if (std::isnan(y)) return true;
    return x < y;
  });
  return order;
}

// median: the lower middle; a NaN in the row makes the result that (first) NaN.
// nanmedian: the lower middle of the non-NaN values.
int64_t median_pick(const std::vector<double>& v, bool ignore_nan) {
  auto first_nan = std::find_if(v.begin(), v.end(), [](double x) { return std::isnan(x); });
  int64_t valid = int64_t(std::count_if(v.begin(), v.end(), [](double x) { return !std::isnan(x); }));
  if (!ignore_nan && first_nan != v.end()) return int64_t(first_nan - v.begin());
  if (valid == 0) return int64_t(first_nan - v.begin());
  return stable_order(v)[size_t((valid - 1) / 2)];
}

// mode: upstream sorts (value, position) pairs by value with std::sort and keeps the
// first longest run, reporting the position of its last element; the same library
// sort reproduces its choice among ties.
int64_t mode_pick(const std::vector<double>& v) {
  std::vector<std::pair<double, int64_t>> elements;
  for (size_t i = 0; i < v.size(); ++i) elements.emplace_back(v[i], int64_t(i));
  std::sort(elements.begin(), elements.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t best = elements[0].second, best_count = 0, run = 0;
  for (size_t i = 0; i < elements.size(); ++i) {
    ++run;
    if (i + 1 == elements.size() || elements[i].first != elements[i + 1].first) {
      if (run > best_count) {
        best_count = run;
        best = elements[i].second;
      }
      run = 0;
    }
  }
  return best;
}

// kthvalue: upstream's quickselect (median-of-three, NaN largest) over (value,
// position) pairs; replicated so ties resolve to the same position.
int64_t kth_pick(const std::vector<double>& v, int64_t k) {
  std::vector<double> values = v;
  std::vector<int64_t> positions(v.size());
  std::iota(positions.begin(), positions.end(), 0);
  auto greater = [](double x, double y) { return (std::isnan(x) && !std::isnan(y)) || x > y; };
  auto swap_at = [&](int64_t i, int64_t j) {
    std::swap(values[size_t(i)], values[size_t(j)]);
    std::swap(positions[size_t(i)], positions[size_t(j)]);
  };
  int64_t lo = 0, hi = int64_t(values.size()) - 1;
  while (true) {
    if (hi <= lo) break;
    if (hi == lo + 1) {
      if (greater(values[size_t(lo)], values[size_t(hi)])) swap_at(lo, hi);
      break;
    }
    int64_t mid = lo + (hi - lo) / 2;
    swap_at(mid, lo + 1);
    if (greater(values[size_t(lo + 1)], values[size_t(hi)])) swap_at(lo + 1, hi);
    if (greater(values[size_t(lo)], values[size_t(hi)])) swap_at(lo, hi);
    if (greater(values[size_t(lo + 1)], values[size_t(lo)])) swap_at(lo + 1, lo);
    int64_t i = lo + 1, j = hi;
    double pivot = values[size_t(lo)];
    while (true) {
      do ++i;
      while (greater(pivot, values[size_t(i)]));
      do --j;
      while (greater(values[size_t(j)], pivot));
      if (j < i) break;
      swap_at(i, j);
    }
    swap_at(lo, j);
    if (j <= k) lo = i;
    if (j >= k) hi = j - 1;
  }
  return positions[size_t(k)];
}

// The median of no elements is NaN.
Tensor full_nan(const Tensor& like) {
  Tensor out = Tensor::empty({}, like.dtype());
  out.copy_from(scalar_tensor(Scalar(std::numeric_limits<double>::quiet_NaN())));
  return out;
}

Tensor median_all(const Tensor& self, bool ignore_nan) {
  if (self.numel() == 0) return full_nan(self);
  auto [values, indices] =
      select_per_row(flat(self), 0, false, ignore_nan ? "nanmedian" : "median",
                     [&](const std::vector<double>& v) { return median_pick(v, ignore_nan); });
  (void)indices;
  return values;
}

}  // namespace

TN_KERNEL("aten::sort", {
  auto [v, i] = sort(a.tensor(0), a.integer(1), a.boolean(2));
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::sort.stable", {
  auto [v, i] = sort(a.tensor(0), a.integer(2), a.boolean(3));
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::argsort", { return sort(a.tensor(0), a.integer(1), a.boolean(2)).second; });
TN_KERNEL("aten::argsort.stable", { return sort(a.tensor(0), a.integer(2), a.boolean(3)).second; });
TN_KERNEL("aten::msort", { return std::get<0>(ops::sort(a.tensor(0), 0, false)); });
TN_KERNEL("aten::topk", {
  auto [v, i] = topk(a.tensor(0), a.integer(1), a.integer(2), a.boolean(3), a.boolean(4));
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::median", {
  if (a.tensor(0).dtype() == ScalarType::Half || a.tensor(0).dtype() == ScalarType::Bool)
    dtype_not_implemented("median_cpu", a.tensor(0).dtype());
  return median_all(a.tensor(0), false);
});
TN_KERNEL("aten::nanmedian", {
  if (a.tensor(0).dtype() == ScalarType::Half) dtype_not_implemented("median_cpu", ScalarType::Half);
  return median_all(a.tensor(0), true);
});
TN_KERNEL("aten::median.dim", {
  if (a.tensor(0).dtype() == ScalarType::Half || a.tensor(0).dtype() == ScalarType::Bool)
    dtype_not_implemented("median_out", a.tensor(0).dtype());
  auto [v, i] = select_per_row(a.tensor(0), a.integer(1), a.boolean(2), "median",
                               [](const std::vector<double>& v) { return median_pick(v, false); });
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::nanmedian.dim", {
  if (a.tensor(0).dtype() == ScalarType::Half || a.tensor(0).dtype() == ScalarType::Bool)
    dtype_not_implemented("median_out", a.tensor(0).dtype());
  auto [v, i] = select_per_row(a.tensor(0), a.integer(1), a.boolean(2), "nanmedian",
                               [](const std::vector<double>& v) { return median_pick(v, true); });
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::mode", {
  auto [v, i] = select_per_row(a.tensor(0), a.integer(1), a.boolean(2), "mode", mode_pick);
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::kthvalue", {
  if (a.tensor(0).dtype() == ScalarType::Half || a.tensor(0).dtype() == ScalarType::Bool)
    dtype_not_implemented("kthvalue_cpu", a.tensor(0).dtype());
  int64_t k = a.integer(1);
  const Tensor& self = a.tensor(0);
  int64_t length = self.dim() == 0 ? 1 : self.size(a.integer(2));
  if (k < 1 || k > length)
    throw Error("kthvalue(): selected number k out of range for dimension " + std::to_string(a.integer(2)));
  auto [v, i] = select_per_row(self, a.integer(2), a.boolean(3), "kthvalue",
                               [k](const std::vector<double>& v) { return kth_pick(v, k - 1); });
  return IValue::tuple({v, i});
});

}  // namespace tn
