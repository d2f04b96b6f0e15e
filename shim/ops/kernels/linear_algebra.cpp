// Products: mm, addmm, bmm, baddbmm, addbmm, dot, vdot, mv, addmv, addr, outer/ger, inner, matmul, linear,
// einsum, tensordot, kron, trace, chain_matmul, cross.
#include <cblas.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// A 2-D operand as BLAS sees it: row-major with a leading dimension, possibly transposed.
struct BlasOperand {
  Tensor data;
  CBLAS_TRANSPOSE trans;
  int ld;
};

BlasOperand blas_operand(const Tensor& t) {
  int64_t rows = t.size(0), cols = t.size(1);
  if (t.stride(1) == 1 && (t.stride(0) >= std::max<int64_t>(cols, 1) || rows == 1))
    return {t, CblasNoTrans, int(std::max<int64_t>(t.stride(0), std::max<int64_t>(cols, 1)))};
  if (t.stride(0) == 1 && (t.stride(1) >= std::max<int64_t>(rows, 1) || cols == 1))
    return {t, CblasTrans, int(std::max<int64_t>(t.stride(1), std::max<int64_t>(rows, 1)))};
  Tensor c = t.contiguous();
  return {c, CblasNoTrans, int(std::max<int64_t>(cols, 1))};
}

void check_mm(const Tensor& a, const Tensor& b) {
  if (a.dim() != 2) throw Error("self must be a matrix");
  if (b.dim() != 2) throw Error("mat2 must be a matrix");
  if (a.size(1) != b.size(0))
    throw Error("mat1 and mat2 shapes cannot be multiplied (" + std::to_string(a.size(0)) + "x" +
                std::to_string(a.size(1)) + " and " + std::to_string(b.size(0)) + "x" +
                std::to_string(b.size(1)) + ")");
  if (a.dtype() != b.dtype())
    throw Error(std::string("expected scalar type ") + upstream_type_name(a.dtype()) + " but found " +
                upstream_type_name(b.dtype()));
  if (a.dtype() == ScalarType::Half) dtype_not_implemented("addmm_impl_cpu_", a.dtype());
}

}  // namespace

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || n == 0 || out.is_meta()) return;
  ScalarType t = out.dtype();
  if ((t == ScalarType::Float || t == ScalarType::Double) && k > 0) {
    BlasOperand x = blas_operand(a), y = blas_operand(b);
    if (t == ScalarType::Float)
      cblas_sgemm(CblasRowMajor, x.trans, y.trans, int(m), int(n), int(k), alpha.to<float>(),
                  x.data.data_as<float>(), x.ld, y.data.data_as<float>(), y.ld, beta.to<float>(),
                  out.data_as<float>(), int(n));
    else
      cblas_dgemm(CblasRowMajor, x.trans, y.trans, int(m), int(n), int(k), alpha.to<double>(),
                  x.data.data_as<double>(), x.ld, y.data.data_as<double>(), y.ld, beta.to<double>(),
                  out.data_as<double>(), int(n));
    return;
  }
  Tensor x = a.contiguous(), y = b.contiguous();
  TN_DISPATCH_ALL_TYPES(t, "addmm_impl_cpu_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using acc_t = std::conditional_t<std::is_same_v<scalar_t, bool>, bool, compute_t<scalar_t>>;
    const scalar_t* px = x.template data_as<scalar_t>();
    const scalar_t* py = y.template data_as<scalar_t>();
    scalar_t* po = out.template data_as<scalar_t>();
    acc_t al = alpha.to<acc_t>(), be = beta.to<acc_t>();
    bool ignore_out = !beta.is_float() ? beta.to_int() == 0 : beta.to_double() == 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        acc_t acc = acc_t(0);
        for (int64_t p = 0; p < k; ++p) {
          if constexpr (std::is_same_v<acc_t, bool>)
            acc = acc || (px[i * k + p] && py[p * n + j]);
          else
            acc += acc_t(px[i * k + p]) * acc_t(py[p * n + j]);
        }
        acc_t previous = ignore_out ? acc_t(0) : acc_t(po[i * n + j]);
        if constexpr (std::is_same_v<acc_t, bool>)
          po[i * n + j] = (be && previous) || (al && acc);
        else
          po[i * n + j] = scalar_t(be * previous + al * acc);
      }
  });
}

namespace {

Tensor mm(const Tensor& a, const Tensor& b) {
  check_mm(a, b);
  Tensor out = Tensor::empty({a.size(0), b.size(1)}, a.dtype());
  if (a.size(1) == 0) out.copy_from(scalar_tensor(Scalar(int64_t{0})));
  gemm(out, a, b, Scalar(int64_t{0}), Scalar(int64_t{1}));
  return out;
}

// addmm: self broadcast into the result first, then one GEMM with beta and alpha.
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  check_mm(a, b);
  Shape shape{a.size(0), b.size(1)};
  if (broadcast_shapes(self.sizes(), shape) != shape)
    throw Error("The expanded size of the tensor (" + std::to_string(shape[1]) +
                ") must match the existing size (" + std::to_string(self.dim() ? self.size(-1) : 1) +
                ") at non-singleton dimension 1.  Target sizes: " + shape_str(shape) +
                ".  Tensor sizes: " + shape_str(self.sizes()));
  if (self.dtype() != a.dtype())
    throw Error(std::string("self and mat2 must have the same dtype, but got ") +
                upstream_type_name(self.dtype()) + " and " + upstream_type_name(a.dtype()));
  Tensor out = Tensor::empty(shape, a.dtype());
  out.copy_from(self);
  if (a.size(1) == 0) {
    out.copy_from(ops::mul(out, beta));
    return out;
  }
  gemm(out, a, b, beta, alpha);
  return out;
}

// Upstream's kernel for small batched products (fewer than 400 multiply-adds per
// batch): each result element scales itself by beta (starts at 0 for bmm or beta = 0,
// so NaN in self does not leak) and then accumulates (alpha * a) * b term by term in
// the storage type, rounding after every operation (float16/bfloat16 included). It is
// built without FMA (a baseline-ISA file), so no fused steps here.
template <bool IsBmm>
void small_bmm(const Tensor& result, const Tensor& a, const Tensor& b, const Scalar& beta,
               const Scalar& alpha) {
  int64_t bs = result.size(0), is = result.size(1), js = result.size(2), ks = a.size(2);
  TN_DISPATCH_ALL_TYPES(result.dtype(), "bmm", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* pa = a.template data_as<scalar_t>();
    const scalar_t* pb = b.template data_as<scalar_t>();
    scalar_t* pr = result.template data_as<scalar_t>();
    if constexpr (std::is_same_v<scalar_t, bool>) {
      bool al = alpha.to<bool>(), be = beta.to<bool>();
      for (int64_t n = 0; n < bs; ++n)
        for (int64_t i = 0; i < is; ++i)
          for (int64_t j = 0; j < js; ++j) {
            bool acc = false;
            for (int64_t p = 0; p < ks; ++p)
              acc = acc || (pa[(n * is + i) * ks + p] && pb[(n * ks + p) * js + j]);
            bool& r = pr[(n * is + i) * js + j];
            if constexpr (IsBmm)
              r = acc;
            else
              r = be ? ((r && be) || (al && acc)) : (al && acc);
          }
    } else {
      scalar_t al = scalar_t(alpha.to<compute_t<scalar_t>>()), be = scalar_t(beta.to<compute_t<scalar_t>>());
      bool zero_start = IsBmm || compute_t<scalar_t>(be) == 0;
      for (int64_t n = 0; n < bs; ++n)
        for (int64_t i = 0; i < is; ++i)
          for (int64_t j = 0; j < js; ++j) {
            scalar_t& r = pr[(n * is + i) * js + j];
            r = zero_start ? scalar_t(0) : scalar_t(r * be);
            for (int64_t p = 0; p < ks; ++p)
              r = scalar_t(r +
                           scalar_t(scalar_t(al * pa[(n * is + i) * ks + p]) * pb[(n * ks + p) * js + j]));
          }
    }
  });
}

Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha,
               bool is_bmm) {
  if (a.dim() != 3) throw Error("batch1 must be a 3D tensor");
  if (b.dim() != 3) throw Error("batch2 must be a 3D tensor");
  if (a.size(0) != b.size(0))
    throw Error("batch1 and batch2 must have same number of batches, got " + std::to_string(a.size(0)) +
                " and " + std::to_string(b.size(0)));
  if (a.size(2) != b.size(1))
    throw Error("Expected size for first two dimensions of batch2 tensor to be: [" +
                std::to_string(a.size(0)) + ", " + std::to_string(a.size(2)) + "] but got: [" +
                std::to_string(b.size(0)) + ", " + std::to_string(b.size(1)) + "].");
  if (a.dtype() != b.dtype())
    throw Error(std::string("expected scalar type ") + upstream_type_name(a.dtype()) + " but found " +
                upstream_type_name(b.dtype()));
  if (a.dtype() == ScalarType::Half) dtype_not_implemented(is_bmm ? "bmm" : "baddbmm", a.dtype());
  Shape shape{a.size(0), a.size(1), b.size(2)};
  Tensor out = Tensor::empty(shape, a.dtype());
  const bool small = a.size(2) * a.size(1) * b.size(2) < 400;  // K == 0 included
  if (!is_bmm)
    out.copy_from(self);
  else if (small)  // bmm's GEMMs below run with beta 0, which ignores out's contents
    out.copy_from(scalar_tensor(Scalar(int64_t{0})));
  if (out.numel() == 0 || out.is_meta()) return out;
  if (small) {
    Tensor x = a.contiguous(), y = b.contiguous();
    if (is_bmm)
      small_bmm<true>(out, x, y, beta, alpha);
    else
      small_bmm<false>(out, x, y, beta, alpha);
    return out;
  }
  // Each batch's matrices as views made here, not through the door (select's dispatch was most
  // of a small batch's time: 64 batches of 64x64x64 in attention).
  auto matrix = [](const Tensor& t, int64_t n) {
    return t.view_as_strided({t.size(1), t.size(2)}, {t.stride(1), t.stride(2)},
                             t.offset() + n * t.stride(0));
  };
  for (int64_t n = 0; n < a.size(0); ++n)
    gemm(matrix(out, n), matrix(a, n), matrix(b, n), is_bmm ? Scalar(int64_t{0}) : beta,
         is_bmm ? Scalar(int64_t{1}) : alpha);
  return out;
}

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
  Tensor scaled = ops::mul(product, alpha);
  if (!beta.is_float() && beta.to_int() == 0)
    return ops::expand(scaled, broadcast_shapes(self.sizes(), scaled.sizes()), false).to(t).clone();
  return ops::add(ops::mul(self, beta), scaled, Scalar(int64_t{1}));
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
        Tensor d = ops::diagonal(o.tensor, int64_t{0}, int64_t(i), int64_t(j));
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
  return {ops::sum(o.tensor, dims, false, o.tensor.dtype()), labels};
}

Tensor permuted(const Operand& o, const std::string& order) {
  std::vector<int64_t> perm;
  for (char c : order) perm.push_back(int64_t(o.labels.find(c)));
  return ops::permute(o.tensor, perm);
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
  Tensor left = ops::reshape(permuted(a, batch + only_a + summed), Shape{nb, na, ns});
  Tensor right = ops::reshape(permuted(b, batch + summed + only_b), Shape{nb, ns, nb_});
  ScalarType t = promote_types(left.dtype(), right.dtype());
  Tensor product = ops::bmm(ops::to(left, t), ops::to(right, t));
  Shape shape;
  std::string labels = batch + only_a + only_b;
  for (char c : batch) shape.push_back(a.tensor.size(int64_t(a.labels.find(c))));
  for (char c : only_a) shape.push_back(a.tensor.size(int64_t(a.labels.find(c))));
  for (char c : only_b) shape.push_back(b.tensor.size(int64_t(b.labels.find(c))));
  return {ops::reshape(product, shape), labels};
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
  // Every step through the door: under autograd einsum records its parts, as upstream's composite.
  return ops::contiguous(permuted(result, output));
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
  Tensor left = ops::reshape(ops::permute(a, perm_a), Shape{rows, size});
  Tensor right = ops::reshape(ops::permute(b, perm_b), Shape{size, cols});
  return ops::reshape(ops::mm(left, right), out_shape);
}

void require_1d(const Tensor& t, const char* what) {
  if (t.dim() != 1) throw Error(std::string(what) + ", but got: " + std::to_string(t.dim()) + "D");
}

// Upstream's test for folding `t`'s batch into one mm or mv against an operand of `other_dim`
// dimensions: a 3-D tensor whose last two dimensions are transposed in memory (as permute(0, 2, 1)
// leaves them) goes to bmm instead, which would otherwise need a copy.
bool should_fold(const Tensor& t, int64_t other_dim) {
  if (t.dim() < 3 || (other_dim != 1 && other_dim != 2)) return false;
  return !(t.dim() == 3 && other_dim == 2 && t.stride(2) != 1 && t.stride(0) == t.size(1) * t.size(2));
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a.dim() == 0 || b.dim() == 0)
    throw Error("both arguments to matmul need to be at least 1D, but they are " + std::to_string(a.dim()) +
                "D and " + std::to_string(b.dim()) + "D");
  // As upstream: vector-vector is dot, matrix-vector is mv (BLAS gemv).
  if (a.dim() == 1 && b.dim() == 1) return ops::dot(a, b);
  if (a.dim() == 2 && b.dim() == 1) return ops::mv(a, b);
  if (a.dim() <= 2 && b.dim() <= 2) {
    // b is 2-D here: the 1-D cases went to dot and mv above.
    Tensor x = a.dim() == 1 ? a.view_as_strided({1, a.size(0)}, {0, a.stride(0)}, a.offset()) : a;
    Tensor r = ops::mm(x, b);
    return a.dim() == 1 ? r.view_as_strided({r.size(1)}, {1}, 0) : r;
  }
  // As upstream: when one side has batch dimensions and the other is a vector or a matrix, the
  // batch folds into the rows of one mm (or mv), the batched side transposed when it is the
  // second, so the bits are the BLAS GEMM's rather than bmm's.
  if (should_fold(a, b.dim()) || should_fold(b, a.dim())) {
    const bool transpose = b.dim() > a.dim();
    auto last_two_swapped = [](const Tensor& t) { return ops::transpose(t, int64_t{-2}, int64_t{-1}); };
    Tensor t1 = transpose ? last_two_swapped(b) : a;
    Tensor t2 = !transpose ? b : a.dim() == 2 ? last_two_swapped(a) : a;
    Shape out(t1.sizes().begin(), t1.sizes().end() - 1);
    int64_t folded = 1;
    for (int64_t size : out) folded *= size;
    Tensor t1_folded = ops::reshape(t1, Shape{folded, t1.size(-1)});
    if (t2.dim() == 1) return ops::reshape(ops::mv(t1_folded, t2), out);
    out.push_back(t2.size(1));
    Tensor r = ops::reshape(ops::mm(t1_folded, t2), out);
    return transpose ? last_two_swapped(r).contiguous() : r;
  }
  // Batched: broadcast the batch dims, then bmm.
  Tensor x = a.dim() == 1 ? a.view_as_strided({1, a.size(0)}, {0, a.stride(0)}, a.offset()) : a;
  Tensor y = b.dim() == 1 ? b.view_as_strided({b.size(0), 1}, {b.stride(0), 0}, b.offset()) : b;
  Shape bx(x.sizes().begin(), x.sizes().end() - 2), by(y.sizes().begin(), y.sizes().end() - 2);
  Shape batch = broadcast_shapes(bx, by);
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  Shape ex = batch, ey = batch;
  ex.push_back(x.size(-2));
  ex.push_back(x.size(-1));
  ey.push_back(y.size(-2));
  ey.push_back(y.size(-1));
  Tensor xe = ops::reshape(ops::expand(x, ex, false), Shape{nb, x.size(-2), x.size(-1)});
  Tensor ye = ops::reshape(ops::expand(y, ey, false), Shape{nb, y.size(-2), y.size(-1)});
  Tensor r = ops::bmm(xe, ye);
  Shape out = batch;
  if (a.dim() > 1) out.push_back(x.size(-2));
  if (b.dim() > 1) out.push_back(y.size(-1));
  return ops::reshape(r, out);
}

}  // namespace

TN_KERNEL("aten::mm", { return mm(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::addmm", { return addmm(a.tensor(0), a.tensor(1), a.tensor(2), a.scalar(3), a.scalar(4)); });
TN_KERNEL("aten::bmm", {
  return baddbmm(Tensor(), a.tensor(0), a.tensor(1), Scalar(int64_t{0}), Scalar(int64_t{1}), true);
});
TN_KERNEL("aten::baddbmm", {
  const Tensor& self = a.tensor(0);
  Shape shape{a.tensor(1).size(0), a.tensor(1).size(1), a.tensor(2).size(2)};
  if (a.tensor(1).dim() == 3 && a.tensor(2).dim() == 3 && broadcast_shapes(self.sizes(), shape) != shape)
    throw Error("The expanded size of the tensor must match the existing size at non-singleton dimension");
  if (self.dtype() != a.tensor(1).dtype())
    throw Error(std::string("self and batch1 must have the same dtype, but got ") +
                upstream_type_name(self.dtype()) + " and " + upstream_type_name(a.tensor(1).dtype()));
  return baddbmm(self, a.tensor(1), a.tensor(2), a.scalar(3), a.scalar(4), false);
});
TN_KERNEL("aten::dot", {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  if (x.dim() != 1 || y.dim() != 1)
    throw Error("1D tensors expected, but got " + std::to_string(x.dim()) + "D and " +
                std::to_string(y.dim()) + "D tensors");
  if (x.dtype() != y.dtype())
    throw Error(std::string("dot : expected both vectors to have same dtype, but found ") +
                upstream_type_name(x.dtype()) + " and " + upstream_type_name(y.dtype()));
  if (x.numel() != y.numel())
    throw Error("inconsistent tensor size, expected tensor [" + std::to_string(x.numel()) + "] and src [" +
                std::to_string(y.numel()) + "] to have the same number of elements, but got " +
                std::to_string(x.numel()) + " and " + std::to_string(y.numel()) + " elements respectively");
  ScalarType t = x.dtype();
  if (t == ScalarType::Half) dtype_not_implemented("dot", t);
  Tensor out = Tensor::empty({}, t);
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
  int n = int(x.numel());
  if (t == ScalarType::Float) {
    *out.data_as<float>() =
        n ? cblas_sdot(n, x.data_as<float>(), int(x.stride(0)), y.data_as<float>(), int(y.stride(0))) : 0.0f;
    return out;
  }
  if (t == ScalarType::Double) {
    *out.data_as<double>() =
        n ? cblas_ddot(n, x.data_as<double>(), int(x.stride(0)), y.data_as<double>(), int(y.stride(0))) : 0.0;
    return out;
  }
  Tensor row = x.view_as_strided({1, x.numel()}, {0, x.stride(0)}, x.offset());
  Tensor col = y.view_as_strided({y.numel(), 1}, {y.stride(0), 0}, y.offset());
  Tensor r = mm(row, col);
  return r.view_as_strided({}, {}, r.offset());
});
TN_KERNEL("aten::mv", {
  const Tensor &m = a.tensor(0), &v = a.tensor(1);
  if (m.dim() != 2 || v.dim() != 1)
    throw Error("vector + matrix @ vector expected, got 1, " + std::to_string(m.dim()) + ", " +
                std::to_string(v.dim()));
  if (m.size(1) != v.size(0))
    throw Error("size mismatch, got input (" + std::to_string(m.size(0)) + "), mat (" +
                std::to_string(m.size(0)) + "x" + std::to_string(m.size(1)) + "), vec (" +
                std::to_string(v.size(0)) + ")");
  if (m.dtype() != v.dtype())
    throw Error(std::string("expected scalar type ") + upstream_type_name(m.dtype()) + " but found " +
                upstream_type_name(v.dtype()));
  ScalarType t = m.dtype();
  if (t == ScalarType::Half) dtype_not_implemented("addmv_impl_cpu", t);
  int64_t rows = m.size(0), cols = m.size(1);
  Tensor out = Tensor::empty({rows}, t);
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
  if ((t == ScalarType::Float || t == ScalarType::Double) && rows > 0 && cols > 0) {
    BlasOperand mat = blas_operand(m);
    Tensor vec = v;
    if (t == ScalarType::Float)
      cblas_sgemv(CblasRowMajor, mat.trans, int(mat.trans == CblasNoTrans ? rows : cols),
                  int(mat.trans == CblasNoTrans ? cols : rows), 1.0f, mat.data.data_as<float>(), mat.ld,
                  vec.data_as<float>(), int(vec.stride(0)), 0.0f, out.data_as<float>(), 1);
    else
      cblas_dgemv(CblasRowMajor, mat.trans, int(mat.trans == CblasNoTrans ? rows : cols),
                  int(mat.trans == CblasNoTrans ? cols : rows), 1.0, mat.data.data_as<double>(), mat.ld,
                  vec.data_as<double>(), int(vec.stride(0)), 0.0, out.data_as<double>(), 1);
    return out;
  }
  Tensor r = mm(m, v.view_as_strided({v.size(0), 1}, {v.stride(0), 0}, v.offset()));
  return r.view_as_strided({rows}, {1}, r.offset());
});
TN_KERNEL("aten::einsum", { return einsum(*a.optional_string(0), a.tensor_list(1)); });
TN_KERNEL("aten::tensordot", { return tensordot(a.tensor(0), a.tensor(1), a.int_list(2), a.int_list(3)); });
TN_KERNEL("aten::vdot", { return ops::dot(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::outer", {
  require_1d(a.tensor(0), "outer: Expected 1-D argument self");
  require_1d(a.tensor(1), "outer: Expected 1-D argument vec2");
  return ops::mul(ops::unsqueeze(a.tensor(0), int64_t{1}), a.tensor(1));
});
TN_KERNEL("aten::ger", { return ops::outer(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::inner", {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  if (x.dim() == 0 || y.dim() == 0) return ops::mul(x, y);
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
  Tensor product = ops::mul(ops::reshape(x, xi), ops::reshape(y, yi));
  return ops::reshape(product, out);
});
TN_KERNEL("aten::trace", {
  const Tensor& x = a.tensor(0);
  if (x.dim() != 2)
    throw Error("trace: expected a matrix, but got tensor with dim " + std::to_string(x.dim()));
  if (x.dtype() == ScalarType::Half || x.dtype() == ScalarType::BFloat16)
    dtype_not_implemented("trace", x.dtype());
  return ops::sum(ops::diagonal(x, int64_t{0}, int64_t{0}, int64_t{1}));
});
TN_KERNEL("aten::addbmm", {
  if (a.tensor(1).dtype() == ScalarType::Half) dtype_not_implemented("addmm_impl_cpu_", ScalarType::Half);
  Tensor product = ops::bmm(a.tensor(1), a.tensor(2));
  Tensor summed = ops::sum(product, std::vector<int64_t>{0}, false, product.dtype());
  return scaled_sum(a.tensor(0), summed, a.scalar(3), a.scalar(4));
});
TN_KERNEL("aten::addmv", {
  if (a.tensor(1).dtype() == ScalarType::Half) dtype_not_implemented("addmv_impl_cpu", ScalarType::Half);
  return scaled_sum(a.tensor(0), ops::mv(a.tensor(1), a.tensor(2)), a.scalar(3), a.scalar(4));
});
TN_KERNEL("aten::addr", {
  const Tensor &self = a.tensor(0), product = ops::outer(a.tensor(1), a.tensor(2));
  if (result_type(self, product) != ScalarType::Bool)
    return scaled_sum(self, product, a.scalar(3), a.scalar(4));
  // All-bool operands stay bool, as upstream's: (beta && self) || (alpha && vec1 && vec2).
  Tensor scaled = a.scalar(4).to<bool>() ? product : ops::zeros_like(product);
  Shape shape = broadcast_shapes(self.sizes(), product.sizes());
  if (!a.scalar(3).to<bool>()) return ops::expand(scaled, shape, false).clone();
  return ops::logical_or(self, scaled);
});
TN_KERNEL("aten::chain_matmul", {
  auto ms = a.tensor_list(0);
  if (ms.empty()) throw Error("chain_matmul(): Expected one or more matrices");
  Tensor out = ms[0];
  for (size_t i = 1; i < ms.size(); ++i) out = ops::mm(out, ms[i]);
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
  if (result_type(x, y) == ScalarType::Bool) dtype_not_implemented("cross", ScalarType::Bool);
  Tensor xe = ops::expand(x, shape, false), ye = ops::expand(y, shape, false);
  auto part = [&](const Tensor& t, int64_t i) { return ops::select(t, d, i); };
  // x_i * y_j - x_j * y_i with the first product fused, as upstream's contracted kernel.
  auto term = [&](int64_t i, int64_t j) {
    return ops::addcmul(ops::neg(ops::mul(part(xe, j), part(ye, i))), part(xe, i), part(ye, j));
  };
  return ops::stack(std::vector<Tensor>{term(1, 2), term(2, 0), term(0, 1)}, d);
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
  return ops::linalg_cross(x, a.tensor(1), d);
});
TN_KERNEL("aten::matmul", { return matmul(a.tensor(0), a.tensor(1)); });
// linear: upstream's addmm(bias, x, w.t()) for a 2-D input with bias (one BLAS call
// with beta = 1), else matmul plus bias.
TN_KERNEL("aten::linear", {
  const Tensor& x = a.tensor(0);
  auto bias = a.optional_tensor(2);
  Tensor wt = ops::t(a.tensor(1));
  if (x.dim() == 2 && bias) return ops::addmm(*bias, x, wt, Scalar(int64_t{1}), Scalar(int64_t{1}));
  // As upstream: a contiguous 3-D input with a bias folds its batch into addmm's rows.
  if (x.dim() == 3 && x.is_contiguous() && bias) {
    Tensor rows = x.view_as_strided({x.size(0) * x.size(1), x.size(2)}, {x.size(2), 1}, x.offset());
    Tensor out = ops::addmm(*bias, rows, wt, Scalar(int64_t{1}), Scalar(int64_t{1}));
    return ops::reshape(out, Shape{x.size(0), x.size(1), out.size(1)});
  }
  Tensor out = matmul(x, wt);
  if (bias) out = ops::add(out, *bias, Scalar(int64_t{1}));
  return out;
});

namespace {

// (left * right).sum(sum_dims, keepdim) over operands of equal rank, broadcast where a size is 1,
// as one bmm of (both, left only, summed) by (both, summed, right only): upstream's
// sumproduct_pair, whose grouping decides which products a BLAS or loop call rounds.
Tensor sumproduct_pair(Tensor left, Tensor right, const std::vector<int64_t>& sum_dims) {
  if (left.dim() != right.dim()) throw Error("number of dimensions must match");
  if (sum_dims.empty()) return ops::mul(left, right);
  int64_t dim = left.dim(), both_size = 1, left_size = 1, right_size = 1, sum_size = 1;
  std::vector<bool> summed(size_t(dim), false);
  for (int64_t d : sum_dims) summed[size_t(d)] = true;
  std::vector<int64_t> both, left_only, right_only;
  for (int64_t i = 0; i < dim; ++i) {
    bool sl = left.size(i) > 1, sr = right.size(i) > 1;
    if (sl && sr && left.size(i) != right.size(i)) throw Error("non-broadcast dimensions must match");
    if (summed[size_t(i)]) {
      if (sl && sr) sum_size *= left.size(i);
      if (sl && !sr) left = ops::sum(left, std::vector<int64_t>{i}, true, std::nullopt);
      if (sr && !sl) right = ops::sum(right, std::vector<int64_t>{i}, true, std::nullopt);
    } else if (sl && sr) {
      both.push_back(i), both_size *= left.size(i);
    } else if (sl) {
      left_only.push_back(i), left_size *= left.size(i);
    } else {
      right_only.push_back(i), right_size *= right.size(i);
    }
  }
  Shape out_size;
  for (int64_t d : both) out_size.push_back(left.size(d));
  for (int64_t d : left_only) out_size.push_back(left.size(d));
  out_size.insert(out_size.end(), sum_dims.size(), 1);
  for (int64_t d : right_only) out_size.push_back(right.size(d));
  auto joined = [](std::initializer_list<const std::vector<int64_t>*> parts) {
    std::vector<int64_t> out;
    for (const auto* part : parts) out.insert(out.end(), part->begin(), part->end());
    return out;
  };
  std::vector<int64_t> out_order = joined({&both, &left_only, &sum_dims, &right_only}),
                       inverse(out_order.size());
  for (size_t i = 0; i < out_order.size(); ++i) inverse[size_t(out_order[i])] = int64_t(i);
  left = ops::reshape(ops::permute(left, out_order), {both_size, left_size, sum_size});
  right = ops::reshape(ops::permute(right, joined({&both, &sum_dims, &right_only, &left_only})),
                       {both_size, sum_size, right_size});
  return ops::permute(ops::reshape(ops::bmm(left, right), out_size), inverse);
}

std::vector<bool> dim_flags(const std::vector<int64_t>& dims, int64_t total) {
  std::vector<bool> flags(size_t(total), false);
  for (int64_t d : dims) {
    if (d < -total || d >= total) throw IndexError("Dimension out of range in _trilinear");
    flags[size_t(d < 0 ? d + total : d)] = true;
  }
  return flags;
}

// The sum over sumdim of i1 * i2 * i3, each unsqueezed at its expand dims, one slice of
// unroll_dim at a time (two sumproduct_pairs per slice), as upstream's _trilinear.
Tensor trilinear(Tensor i1, Tensor i2, Tensor i3, const std::vector<std::vector<int64_t>>& expands,
                 const std::vector<int64_t>& sumdim_list, int64_t unroll_dim) {
  int64_t total = i1.dim() + int64_t(expands[0].size());
  if (unroll_dim < 0 || unroll_dim >= total)
    throw Error("unroll_dim must be in [0," + std::to_string(total - 1) + "]");
  std::vector<Tensor*> inputs{&i1, &i2, &i3};
  std::vector<std::vector<bool>> expand;
  for (size_t t = 0; t < 3; ++t) {
    if (inputs[t]->dim() + int64_t(expands[t].size()) != total)
      throw Error("number of dimensions must match");
    expand.push_back(dim_flags(expands[t], total));
  }
  std::vector<bool> sumdim = dim_flags(sumdim_list, total);
  Shape output_size;
  std::vector<int64_t> sum12, sum23;
  int64_t unroll_size = -1;
  for (int64_t i = 0; i < total; ++i) {
    int64_t size = 0;
    for (size_t t = 0; t < 3; ++t)
      if (expand[t][size_t(i)])
        *inputs[t] = ops::unsqueeze(*inputs[t], i);
      else
        size = inputs[t]->size(i);
    // A dim summed and absent from i3 is summed with i1 i2's product, else with i3.
    if (sumdim[size_t(i)] && i != unroll_dim) (expand[2][size_t(i)] ? sum12 : sum23).push_back(i);
    output_size.push_back(sumdim[size_t(i)] ? 1 : size);
    if (i == unroll_dim) unroll_size = size;
  }
  Tensor output = ops::zeros(output_size, i1.dtype());
  if (i1.numel() != 0 && i2.numel() != 0 && i3.numel() != 0)
    for (int64_t k = 0; k < unroll_size; ++k) {
      auto slice = [&](const Tensor& t, size_t which) {
        return ops::narrow(t, unroll_dim, expand[which][size_t(unroll_dim)] ? 0 : k, 1);
      };
      Tensor buf = sumproduct_pair(sumproduct_pair(slice(i1, 0), slice(i2, 1), sum12), slice(i3, 2), sum23);
      ops::add_(sumdim[size_t(unroll_dim)] ? output : ops::narrow(output, unroll_dim, k, 1), buf);
    }
  for (int64_t i = total - 1; i >= 0; --i)
    if (sumdim[size_t(i)]) output = ops::squeeze(output, i);
  return output;
}

}  // namespace

TN_KERNEL("aten::_trilinear", {
  return trilinear(a.tensor(0), a.tensor(1), a.tensor(2), {a.int_list(3), a.int_list(4), a.int_list(5)},
                   a.int_list(6), a.integer(7));
});
// bilinear(x1, x2, W, b)[..., k] = x1 W[k] x2 + b[k]: upstream's _trilinear over the rows of x1
// and x2, then the bias added.
TN_KERNEL("aten::bilinear", {
  const Tensor &x1 = a.tensor(0), &x2 = a.tensor(1), &w = a.tensor(2);
  auto bias = a.optional_tensor(3);
  if (x1.dim() != x2.dim())
    throw Error("bilinear(): input dimensions do not match: got " + std::to_string(x1.dim()) + " and " +
                std::to_string(x2.dim()));
  for (int64_t i = 0; i + 1 < x1.dim(); ++i)
    if (x1.size(i) != x2.size(i))
      throw Error("bilinear(): input batch dimensions do not match at dim " + std::to_string(i) + ": got " +
                  std::to_string(x1.size(i)) + " and " + std::to_string(x2.size(i)));
  if (w.dim() < 3) throw IndexError("Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  if (w.dim() > 3) throw Error("number of dimensions must match");
  if (x1.size(-1) != w.size(1) || x2.size(-1) != w.size(2) || (bias && bias->size(0) != w.size(0)))
    throw Error("bilinear(): input1, input2 or bias size does not match weight size");
  if (x1.dtype() != x2.dtype() || x1.dtype() != w.dtype())
    throw Error("expected scalar type of input1, input2 and weight to be the same");
  Shape out_size(x1.sizes().begin(), x1.sizes().end() - 1);
  out_size.push_back(w.size(0));
  Tensor rows1 = ops::reshape(x1, {-1, x1.size(-1)}), rows2 = ops::reshape(x2, {-1, x2.size(-1)});
  Tensor out = ops::reshape(trilinear(rows1, w, rows2, {{1, 3}, {0}, {1, 2}}, {2, 3}, 1), out_size);
  return bias ? ops::add(out, *bias, Scalar(int64_t{1})) : out;
});

}  // namespace tn
