// Products beyond mm/bmm/matmul: einsum (pairwise contractions on bmm), tensordot,
// dot/vdot/mv/outer/inner/kron, the add*-fused forms, trace and cross.
#include <map>
#include <set>

#include "common.h"

namespace tn {

namespace {

// beta * self + alpha * product, rounded once in the product's dtype (float16/bfloat16
// accumulate wider, as upstream's blas kernels do); integer results take integer
// scalars; beta == 0 ignores self entirely (NaN included), as upstream.
Tensor scaled_sum(const Tensor& self, const Tensor& product, const Scalar& beta_in, const Scalar& alpha_in) {
  ScalarType t = result_type(self, product);
  bool integral = is_integral(t, true);
  Scalar beta = integral && beta_in.is_float() ? Scalar(beta_in.to_int()) : beta_in;
  Scalar alpha = integral && alpha_in.is_float() ? Scalar(alpha_in.to_int()) : alpha_in;
  if (t == ScalarType::Half || t == ScalarType::BFloat16)
    return scaled_sum(self.to(ScalarType::Double), product.to(ScalarType::Double), beta, alpha).to(t);
  Tensor scaled = op("aten::mul", "Scalar", {product, alpha});
  if (!beta.is_float() && beta.to_int() == 0)
    return op("aten::expand", "", {scaled, broadcast_shapes(self.sizes(), scaled.sizes()), false})
        .to(t)
        .clone();
  return op("aten::add", "Tensor", {op("aten::mul", "Scalar", {self, beta}), scaled, Scalar(int64_t{1})});
}

// One operand of an einsum: its tensor and the label of each dim (unique after diagonals).
struct Operand {
  Tensor tensor;
  std::string labels;
};

// Repeated labels within an operand take the diagonal.
Operand take_diagonals(Operand o) {
  for (size_t i = 0; i < o.labels.size(); ++i)
    for (size_t j = i + 1; j < o.labels.size(); ++j)
      if (o.labels[i] == o.labels[j]) {
        if (o.tensor.size(int64_t(i)) != o.tensor.size(int64_t(j)))
          throw Error(std::string("einsum(): subscript ") + o.labels[i] +
                      " is repeated for operand but the sizes don't match, " +
                      std::to_string(o.tensor.size(int64_t(i))) +
                      " != " + std::to_string(o.tensor.size(int64_t(j))));
        Tensor d = op("aten::diagonal", "", {o.tensor, int64_t{0}, int64_t(i), int64_t(j)});
        std::string labels = o.labels;
        labels.erase(j, 1);
        labels.erase(i, 1);
        labels.push_back(o.labels[i]);
        return take_diagonals({d, labels});
      }
  return o;
}

// Sums out the labels of `o` that appear nowhere in `keep`.
Operand sum_unneeded(Operand o, const std::set<char>& keep) {
  std::vector<int64_t> dims;
  std::string labels;
  for (size_t i = 0; i < o.labels.size(); ++i) {
    if (keep.count(o.labels[i]))
      labels.push_back(o.labels[i]);
    else
      dims.push_back(int64_t(i));
  }
  if (dims.empty()) return o;
  // Summed in the operand's own dtype (integers stay, e.g., int32).
  return {op("aten::sum", "dim_IntList", {o.tensor, dims, false, int64_t(o.tensor.dtype())}), labels};
}

Tensor permuted(const Operand& o, const std::string& order) {
  std::vector<int64_t> perm;
  for (char c : order) perm.push_back(int64_t(o.labels.find(c)));
  return op("aten::permute", "", {o.tensor, perm});
}

int64_t product_of(const Operand& o, const std::string& labels) {
  int64_t n = 1;
  for (char c : labels) n *= o.tensor.size(int64_t(o.labels.find(c)));
  return n;
}

// Contracts two operands over the labels not needed afterwards, through one bmm.
Operand contract(const Operand& a, const Operand& b, const std::set<char>& needed) {
  std::string batch, only_a, only_b, summed;
  for (char c : a.labels) {
    bool in_b = b.labels.find(c) != std::string::npos;
    if (in_b)
      (needed.count(c) ? batch : summed).push_back(c);
    else
      only_a.push_back(c);
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos) only_b.push_back(c);
  for (char c : batch)
    if (a.tensor.size(int64_t(a.labels.find(c))) != b.tensor.size(int64_t(b.labels.find(c))) &&
        a.tensor.size(int64_t(a.labels.find(c))) != 1 && b.tensor.size(int64_t(b.labels.find(c))) != 1)
      throw Error("einsum(): operands do not broadcast with remapped shapes (original->remapped)");
  int64_t nb = product_of(a, batch), na = product_of(a, only_a), nb_ = product_of(b, only_b),
          ns = product_of(a, summed);
  if (ns != product_of(b, summed))
    throw Error("einsum(): operands do not broadcast with remapped shapes (original->remapped)");
  Tensor left = op("aten::reshape", "", {permuted(a, batch + only_a + summed), Shape{nb, na, ns}});
  Tensor right = op("aten::reshape", "", {permuted(b, batch + summed + only_b), Shape{nb, ns, nb_}});
  ScalarType t = promote_types(left.dtype(), right.dtype());
  Tensor product = op("aten::bmm", "", {left.to(t), right.to(t)});
  Shape shape;
  std::string labels = batch + only_a + only_b;
  for (char c : batch) shape.push_back(a.tensor.size(int64_t(a.labels.find(c))));
  for (char c : only_a) shape.push_back(a.tensor.size(int64_t(a.labels.find(c))));
  for (char c : only_b) shape.push_back(b.tensor.size(int64_t(b.labels.find(c))));
  return {op("aten::reshape", "", {product, shape}), labels};
}

Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors) {
  std::string spec;
  for (char c : equation)
    if (c != ' ') spec.push_back(c);
  auto arrow = spec.find("->");
  std::string lhs = spec.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != tensors.size())
    throw Error("einsum(): more operands were provided than specified in the equation");
  // Ellipses become fresh labels (digits, never letters), right-aligned across operands.
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].find("...") != std::string::npos)
      ellipsis_dims = std::max<int64_t>(ellipsis_dims, tensors[i].dim() - int64_t(terms[i].size() - 3));
  std::string ellipsis_labels;
  for (int64_t k = 0; k < ellipsis_dims; ++k) ellipsis_labels.push_back(char('0' + k));
  std::vector<Operand> operands;
  std::map<char, int64_t> counts;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string labels = terms[i];
    Tensor t = tensors[i];
    if (auto e = labels.find("..."); e != std::string::npos) {
      int64_t own = t.dim() - int64_t(labels.size() - 3);
      labels.replace(e, 3, ellipsis_labels.substr(size_t(ellipsis_dims - own)));
    }
    for (char c : labels)
      if (!std::isalpha(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)))
        throw Error(std::string("einsum(): invalid subscript given at index ") + std::to_string(i) +
                    " in the equation string, subscripts must be in [a-zA-Z]");
    if (int64_t(labels.size()) != t.dim())
      throw Error("einsum(): the number of subscripts in the equation (" + std::to_string(labels.size()) +
                  ") does not match the number of dimensions (" + std::to_string(t.dim()) + ") for operand " +
                  std::to_string(i) +
                  (terms[i].find("...") == std::string::npos ? " and no ellipsis was given" : ""));
    for (char c : labels) ++counts[c];
    operands.push_back(take_diagonals({t, labels}));
  }
  std::string output;
  if (arrow != std::string::npos) {
    output = spec.substr(arrow + 2);
    if (auto e = output.find("..."); e != std::string::npos) output.replace(e, 3, ellipsis_labels);
    for (char c : output)
      if (!counts.count(c))
        throw Error(std::string("einsum(): output subscript ") + c +
                    " does not appear in the equation for any input operand");
  } else {
    // Implicit output: the ellipsis dims, then labels seen once, alphabetically.
    output = ellipsis_labels;
    for (auto& [c, n] : counts)
      if (n == 1 && !std::isdigit(static_cast<unsigned char>(c))) output.push_back(c);
  }
  std::set<char> out_labels(output.begin(), output.end());
  Operand result = operands[0];
  for (size_t i = 1; i <= operands.size(); ++i) {
    std::set<char> needed = out_labels;
    for (size_t j = i; j < operands.size(); ++j)
      needed.insert(operands[j].labels.begin(), operands[j].labels.end());
    if (i == operands.size()) {
      result = sum_unneeded(result, needed);
      break;
    }
    std::set<char> keep_a = needed;
    keep_a.insert(operands[i].labels.begin(), operands[i].labels.end());
    std::set<char> keep_b = needed;
    keep_b.insert(result.labels.begin(), result.labels.end());
    result = contract(sum_unneeded(result, keep_a), sum_unneeded(operands[i], keep_b), needed);
  }
  return permuted(result, output).contiguous();
}

// tensordot as upstream: contracted dims moved last in `a` and first in `b`, both
// flattened to matrices, one mm.
Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<int64_t>& da,
                 const std::vector<int64_t>& db) {
  if (da.size() != db.size()) throw Error("both dimension lists should have same length");
  std::vector<bool> contracted_a(size_t(a.dim()), false), contracted_b(size_t(b.dim()), false);
  int64_t size = 1;
  Shape perm_a, perm_b, out_shape;
  for (size_t i = 0; i < da.size(); ++i) {
    int64_t x = wrap_dim(da[i], a.dim()), y = wrap_dim(db[i], b.dim());
    if (a.size(x) != b.size(y))
      throw Error("contracted dimensions need to match, but first has size " + std::to_string(a.size(x)) +
                  " in dim " + std::to_string(da[i]) + " and second has size " + std::to_string(b.size(y)) +
                  " in dim " + std::to_string(db[i]));
    contracted_a[size_t(x)] = contracted_b[size_t(y)] = true;
    size *= a.size(x);
  }
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!contracted_a[size_t(d)]) {
      perm_a.push_back(d);
      out_shape.push_back(a.size(d));
      rows *= a.size(d);
    }
  for (size_t i = 0; i < da.size(); ++i) perm_a.push_back(wrap_dim(da[i], a.dim()));
  for (size_t i = 0; i < db.size(); ++i) perm_b.push_back(wrap_dim(db[i], b.dim()));
  for (int64_t d = 0; d < b.dim(); ++d)
    if (!contracted_b[size_t(d)]) {
      perm_b.push_back(d);
      out_shape.push_back(b.size(d));
      cols *= b.size(d);
    }
  Tensor left = op("aten::reshape", "", {op("aten::permute", "", {a, perm_a}), Shape{rows, size}});
  Tensor right = op("aten::reshape", "", {op("aten::permute", "", {b, perm_b}), Shape{size, cols}});
  return op("aten::reshape", "", {op("aten::mm", "", {left, right}), out_shape});
}

void require_1d(const Tensor& t, const char* what) {
  if (t.dim() != 1) throw Error(std::string(what) + ", but got: " + std::to_string(t.dim()) + "D");
}

}  // namespace

TN_KERNEL("aten::einsum", { return einsum(*a.optional_string(0), a.tensor_list(1)); });
TN_KERNEL("aten::tensordot", { return tensordot(a.tensor(0), a.tensor(1), a.int_list(2), a.int_list(3)); });
TN_KERNEL("aten::vdot", { return op("aten::dot", "", {a.tensor(0), a.tensor(1)}); });
TN_KERNEL("aten::outer", {
  require_1d(a.tensor(0), "outer: Expected 1-D argument self");
  require_1d(a.tensor(1), "outer: Expected 1-D argument vec2");
  return op("aten::mul", "Tensor", {op("aten::unsqueeze", "", {a.tensor(0), int64_t{1}}), a.tensor(1)});
});
TN_KERNEL("aten::ger", { return op("aten::outer", "", {a.tensor(0), a.tensor(1)}); });
TN_KERNEL("aten::inner", {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  if (x.dim() == 0 || y.dim() == 0) return op("aten::mul", "Tensor", {x, y});
  if (x.size(-1) != y.size(-1))
    throw Error("inner() the last dimension must match on both input tensors but got shapes " +
                shape_str(x.sizes()) + " and " + shape_str(y.sizes()));
  return tensordot(x, y, {-1}, {-1});
});
TN_KERNEL("aten::kron", {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  int64_t n = std::max(x.dim(), y.dim());
  Shape xs(size_t(n - x.dim()), 1), ys(size_t(n - y.dim()), 1);
  xs.insert(xs.end(), x.sizes().begin(), x.sizes().end());
  ys.insert(ys.end(), y.sizes().begin(), y.sizes().end());
  Shape xi, yi, out;
  for (int64_t d = 0; d < n; ++d) {
    xi.push_back(xs[size_t(d)]);
    xi.push_back(1);
    yi.push_back(1);
    yi.push_back(ys[size_t(d)]);
    out.push_back(xs[size_t(d)] * ys[size_t(d)]);
  }
  Tensor product =
      op("aten::mul", "Tensor", {op("aten::reshape", "", {x, xi}), op("aten::reshape", "", {y, yi})});
  return op("aten::reshape", "", {product, out});
});
TN_KERNEL("aten::trace", {
  const Tensor& x = a.tensor(0);
  if (x.dim() != 2)
    throw Error("trace: expected a matrix, but got tensor with dim " + std::to_string(x.dim()));
  if (x.dtype() == ScalarType::Half || x.dtype() == ScalarType::BFloat16)
    dtype_not_implemented("trace", x.dtype());
  return op("aten::sum", "", {op("aten::diagonal", "", {x, int64_t{0}, int64_t{0}, int64_t{1}}), IValue()});
});
TN_KERNEL("aten::addbmm", {
  if (a.tensor(1).dtype() == ScalarType::Half) dtype_not_implemented("addmm_impl_cpu_", ScalarType::Half);
  Tensor product = op("aten::bmm", "", {a.tensor(1), a.tensor(2)});
  Tensor summed =
      op("aten::sum", "dim_IntList", {product, std::vector<int64_t>{0}, false, int64_t(product.dtype())});
  return scaled_sum(a.tensor(0), summed, a.scalar(3), a.scalar(4));
});
TN_KERNEL("aten::addmv", {
  if (a.tensor(1).dtype() == ScalarType::Half) dtype_not_implemented("addmv_impl_cpu", ScalarType::Half);
  return scaled_sum(a.tensor(0), op("aten::mv", "", {a.tensor(1), a.tensor(2)}), a.scalar(3), a.scalar(4));
});
TN_KERNEL("aten::addr", {
  return scaled_sum(a.tensor(0), op("aten::outer", "", {a.tensor(1), a.tensor(2)}), a.scalar(3), a.scalar(4));
});
TN_KERNEL("aten::chain_matmul", {
  auto ms = a.tensor_list(0);
  if (ms.empty()) throw Error("chain_matmul(): Expected one or more matrices");
  Tensor out = ms[0];
  for (size_t i = 1; i < ms.size(); ++i) out = op("aten::mm", "", {out, ms[i]});
  return ms.size() == 1 ? out.clone() : out;
});
TN_KERNEL("aten::linalg_cross", {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  if (x.dim() != y.dim()) throw Error("linalg.cross: inputs must have the same number of dimensions.");
  if (x.dim() == 0) throw IndexError("linalg.cross: inputs must have at least one dimension");
  Shape shape = broadcast_shapes(x.sizes(), y.sizes());
  int64_t d = wrap_dim(a.integer(2), int64_t(shape.size()));
  if (shape[size_t(d)] != 3)
    throw Error("linalg.cross: inputs dimension " + std::to_string(d) + " must have length 3. Got " +
                std::to_string(x.dim() ? x.size(d) : 0) + " and " + std::to_string(y.dim() ? y.size(d) : 0));
  Tensor xe = op("aten::expand", "", {x, shape, false}), ye = op("aten::expand", "", {y, shape, false});
  auto part = [&](const Tensor& t, int64_t i) { return op("aten::select", "int", {t, d, i}); };
  auto term = [&](int64_t i, int64_t j) {
    return op("aten::sub", "Tensor",
              {op("aten::mul", "Tensor", {part(xe, i), part(ye, j)}),
               op("aten::mul", "Tensor", {part(xe, j), part(ye, i)}), Scalar(int64_t{1})});
  };
  return op("aten::stack", "", {std::vector<Tensor>{term(1, 2), term(2, 0), term(0, 1)}, d});
});
TN_KERNEL("aten::cross", {
  const Tensor& x = a.tensor(0);
  auto dim = a.optional_integer(2);
  int64_t d = -1;
  if (dim)
    d = *dim;
  else
    for (int64_t k = 0; k < x.dim(); ++k)
      if (x.size(k) == 3) {
        d = k;
        break;
      }
  return op("aten::linalg_cross", "", {x, a.tensor(1), d});
});

}  // namespace tn
