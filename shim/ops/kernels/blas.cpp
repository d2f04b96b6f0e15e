// Matrix products the way upstream computes them, so results agree bit for bit where
// the arithmetic allows: float/double GEMM, GEMV and DOT through the same BLAS
// (OpenBLAS) with the same operand layouts; small batched products by upstream's
// plain kernel; other dtypes accumulate in double and round once.
#include <cblas.h>

#include "common.h"

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

// out (m x n, contiguous) = beta * out + alpha * a @ b; beta == 0 ignores out's contents.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || n == 0) return;
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
    out.copy_from(call_tensor_op("aten::mul", "Scalar", {out, beta}));
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
  if (is_bmm)
    out.copy_from(scalar_tensor(Scalar(int64_t{0})));
  else
    out.copy_from(self);
  if (out.numel() == 0) return out;
  if (a.size(2) * a.size(1) * b.size(2) < 400) {
    Tensor x = a.contiguous(), y = b.contiguous();
    if (is_bmm)
      small_bmm<true>(out, x, y, beta, alpha);
    else
      small_bmm<false>(out, x, y, beta, alpha);
    return out;
  }
  for (int64_t n = 0; n < a.size(0); ++n) {
    Tensor r = call_tensor_op("aten::select", "int", {out, int64_t{0}, n});
    Tensor x = call_tensor_op("aten::select", "int", {a, int64_t{0}, n});
    Tensor y = call_tensor_op("aten::select", "int", {b, int64_t{0}, n});
    gemm(r, x, y, is_bmm ? Scalar(int64_t{0}) : beta, is_bmm ? Scalar(int64_t{1}) : alpha);
  }
  return out;
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

}  // namespace tn
