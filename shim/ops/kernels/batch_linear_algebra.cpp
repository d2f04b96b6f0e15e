// LAPACK-backed linear algebra: det, slogdet, logdet, solve, inv, cholesky, matrix_power, matrix_norm,
// linalg_norm.
#include <cmath>
#include <sstream>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda,
             const int* ipiv, float* b, const int* ldb, int* info);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda,
             const int* ipiv, double* b, const int* ldb, int* info);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
}

void check_square(const Tensor& a, const char* name) {
  if (a.dim() < 2) throw Error(std::string(name) + ": The input tensor A must have at least 2 dimensions.");
  if (a.size(-1) != a.size(-2))
    throw Error(std::string(name) + ": A must be batches of square matrices, but they are " +
                std::to_string(a.size(-2)) + " by " + std::to_string(a.size(-1)) + " matrices");
  if (a.dtype() != ScalarType::Float && a.dtype() != ScalarType::Double)
    throw Error(std::string(name) + ": Expected a floating point or complex tensor as input. Got " +
                upstream_type_name(a.dtype()));
}

// Column-major copies of each matrix in a batch: (batch, n, n) laid out as transposes.
Tensor column_major(const Tensor& a) {
  int64_t n = a.size(-1), rows = a.size(-2), count = 1;
  for (int64_t d = 0; d + 2 < a.dim(); ++d) count *= a.size(d);
  // The batch size spelled out: -1 cannot be inferred when a matrix is empty.
  Tensor batch = ops::reshape(a, Shape{count, rows, n});
  // (batch, n, rows): column-major. Always a copy: LAPACK overwrites it, and an input
  // already laid out column-major (a transposed view, a single column) must not change.
  return ops::transpose(batch, int64_t{1}, int64_t{2}).clone();
}

template <typename T>
void getrf(int n, T* a, int* pivots, int* info) {
  if constexpr (std::is_same_v<T, float>)
    sgetrf_(&n, &n, a, &n, pivots, info);
  else
    dgetrf_(&n, &n, a, &n, pivots, info);
}

// LU factors of each matrix: (factors column-major, pivots, infos).
struct Lu {
  Tensor factors;
  std::vector<int> pivots;
  std::vector<int> infos;
  int64_t batch = 0, n = 0;
};

Lu lu(const Tensor& a) {
  Lu f;
  f.factors = column_major(a);
  f.batch = f.factors.size(0);
  f.n = a.size(-1);
  f.pivots.assign(size_t(f.batch * f.n), 0);
  f.infos.assign(size_t(f.batch), 0);
  if (f.factors.is_meta()) return f;  // the meta device: the shapes are the results
  TN_DISPATCH_ALL_TYPES(a.dtype(), "lu", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>)
      for (int64_t b = 0; b < f.batch; ++b)
        if (f.n > 0)
          getrf<scalar_t>(int(f.n), f.factors.template data_as<scalar_t>() + b * f.n * f.n,
                          f.pivots.data() + b * f.n, &f.infos[size_t(b)]);
  });
  return f;
}

Shape batch_shape(const Tensor& a) { return Shape(a.sizes().begin(), a.sizes().end() - 2); }

// (sign, log|det|) per matrix, and det itself, from the LU diagonal and pivot parity.
std::tuple<Tensor, Tensor, Tensor> determinants(const Tensor& a) {
  Lu f = lu(a);
  Shape shape = batch_shape(a);
  Tensor det = Tensor::empty(shape, a.dtype()), sign = Tensor::empty(shape, a.dtype()),
         logabs = Tensor::empty(shape, a.dtype());
  if (!det.is_meta())  // the meta device: the shapes are the results
    TN_DISPATCH_ALL_TYPES(a.dtype(), "det", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
        for (int64_t b = 0; b < f.batch; ++b) {
          const scalar_t* m = f.factors.template data_as<scalar_t>() + b * f.n * f.n;
          bool odd = false;
          scalar_t product = 1, log_sum = 0, s = 1;
          for (int64_t i = 0; i < f.n; ++i) {
            odd ^= f.pivots[size_t(b * f.n + i)] != int(i + 1);
            scalar_t d = m[i * f.n + i];
            product *= d;
            log_sum += std::log(std::abs(d));
            s *= d < 0 ? scalar_t(-1) : d > 0 ? scalar_t(1) : scalar_t(0);
          }
          if (odd) {
            product = -product;
            s = -s;
          }
          det.template data_as<scalar_t>()[b] = product;
          sign.template data_as<scalar_t>()[b] = s;
          logabs.template data_as<scalar_t>()[b] =
              s == 0 ? -std::numeric_limits<scalar_t>::infinity() : log_sum;
        }
      }
    });
  return {det, sign, logabs};
}

// Upstream's refusal of a singular matrix, as the routine names it (inversion, or a solve).
[[noreturn]] void singular(const std::string& name, int64_t info) {
  if (name == "linalg.inv")
    throw LinAlgError(name + ": The diagonal element " + std::to_string(info) +
                      " is zero, the inversion could not be completed because the input matrix is singular.");
  throw LinAlgError(name + ": The solver failed because the input matrix is singular.");
}

// Solves A X = B for each matrix (B with as many right-hand sides as its columns).
// Solves a X = b, or a^T X = b when `transposed`, through a's LU factors.
Tensor lu_solve(const Tensor& a, const Tensor& b, const char* name, bool transposed) {
  check_square(a, name);
  Lu f = lu(a);
  for (int64_t i = 0; i < f.batch; ++i)
    if (f.infos[size_t(i)] > 0) singular(name, f.infos[size_t(i)]);
  Tensor rhs = column_major(b);  // (batch, nrhs, n) column-major
  int n = int(f.n), nrhs = int(b.size(-1)), info = 0;
  char trans = transposed ? 'T' : 'N';
  if (!rhs.is_meta())  // the meta device: the shapes are the results
    TN_DISPATCH_ALL_TYPES(a.dtype(), name, [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
        for (int64_t i = 0; i < f.batch; ++i) {
          const scalar_t* lu_data = f.factors.template data_as<scalar_t>() + i * f.n * f.n;
          scalar_t* x = rhs.template data_as<scalar_t>() + i * f.n * nrhs;
          if (n == 0) continue;
          if constexpr (std::is_same_v<scalar_t, float>)
            sgetrs_(&trans, &n, &nrhs, lu_data, &n, f.pivots.data() + i * f.n, x, &n, &info);
          else
            dgetrs_(&trans, &n, &nrhs, lu_data, &n, f.pivots.data() + i * f.n, x, &n, &info);
        }
      }
    });
  Tensor back = ops::transpose(rhs, int64_t{1}, int64_t{2});
  return ops::reshape(back, b.sizes());
}

// Upstream's linalg.solve (and inv, which solves against the identity): a contiguous A
// is factored as A^T (its memory is already A^T's column-major copy) and solved with
// trans = 'T', which rounds differently from factoring A.
Tensor solve(const Tensor& a, const Tensor& b, const char* name) {
  check_square(a, name);
  bool transposed = a.is_contiguous();
  // Batch dims broadcast: each matrix of A solves against its own right-hand side.
  Shape batch = broadcast_shapes(Shape(a.sizes().begin(), a.sizes().end() - 2),
                                 Shape(b.sizes().begin(), b.sizes().end() - std::min<int64_t>(b.dim(), 2)));
  Shape a_shape = batch, b_shape = batch;
  a_shape.insert(a_shape.end(), a.sizes().end() - 2, a.sizes().end());
  b_shape.insert(b_shape.end(), b.sizes().end() - std::min<int64_t>(b.dim(), 2), b.sizes().end());
  Tensor ae = ops::expand(a, a_shape, false), be = ops::expand(b, b_shape, false);
  if (!transposed) return lu_solve(ae, be, name, false);
  return lu_solve(ops::transpose(ae, int64_t{-2}, int64_t{-1}), be, name, true);
}

Tensor identity_like(const Tensor& a) {
  if (a.is_meta()) return Tensor::empty(a.sizes(), a.dtype());  // its values are not needed there
  Tensor eye = ops::eye(a.size(-1), a.dtype());
  return ops::expand(eye, a.sizes(), false).contiguous();
}

void require_matrix_norm_input(const Tensor& A) {
  if (A.dim() < 2) throw Error("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.");
  if (!is_floating(A.dtype()))
    throw Error(
        std::string("linalg.matrix_norm: Expected a floating point or complex tensor as input. Got ") +
        upstream_type_name(A.dtype()));
}

// A matrix norm reduces two dims; upstream lists any other count separated by spaces.
void check_matrix_dims(const std::vector<int64_t>& dims) {
  if (dims.size() == 2) return;
  std::string listed;
  for (int64_t d : dims) listed += (listed.empty() ? "" : " ") + std::to_string(d);
  throw Error("linalg.matrix_norm: dim must be a 2-tuple. Got " + listed);
}

// linalg.norm's checks: one or two dims, or, with an ord and no dims, a 1-D or 2-D input.
// `must` is how the message spells it (the string-ord overload misspells it upstream).
void check_norm_dims(const Tensor& x, const std::optional<std::vector<int64_t>>& dims, bool has_ord,
                     const char* must) {
  if (dims && dims->size() != 1 && dims->size() != 2)
    throw Error(std::string("linalg.norm: If dim is specified, it ") + must + " be of length 1 or 2. Got " +
                shape_str(*dims));
  if (!dims && has_ord && x.dim() != 1 && x.dim() != 2)
    throw Error("linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got " +
                std::to_string(x.dim()) + "D.");
}

enum class SingularValues { Largest, Smallest, Sum };

// The norms of the singular values (ord 2, ord -2, 'nuc'), as upstream computes them: from
// linalg_svdvals of the matrices moved to the last two dims (which the shim refuses by name).
Tensor singular_value_norm(const Tensor& x, int64_t d0, int64_t d1, bool keepdim, SingularValues kind) {
  Tensor s = ops::linalg_svdvals(ops::movedim(x, std::vector<int64_t>{d0, d1}, std::vector<int64_t>{-2, -1}));
  std::vector<int64_t> last{-1};
  Tensor r = kind == SingularValues::Sum       ? ops::sum(s, last, false, std::nullopt)
             : kind == SingularValues::Largest ? ops::amax(s, last)
                                               : ops::amin(s, last);
  if (keepdim) r = ops::unsqueeze(ops::unsqueeze(r, std::min(d0, d1)), std::max(d0, d1));
  return r;
}

// Matrix norms of a numeric ord: the 1/inf column/row-sum norms and the singular-value ones.
Tensor matrix_norm(const Tensor& self, double ord, std::vector<int64_t> dims, bool keepdim,
                   std::optional<ScalarType> dtype) {
  // The order first, as upstream checks it (before the input).
  if (std::abs(ord) != 2 && std::abs(ord) != 1 && !std::isinf(ord)) {
    std::ostringstream shown;
    shown << ord;  // as C++ streams a double: 3, 0.5
    throw Error("linalg.matrix_norm: Order " + shown.str() + " not supported.");
  }
  require_matrix_norm_input(self);
  check_matrix_dims(dims);
  check_linalg_norm_dtype(dtype, self.dtype(), "linalg.matrix_norm");
  Tensor x = dtype ? ops::to(self, *dtype) : self;  // through the door: it is differentiated
  int64_t d0 = wrap_dim(dims[0], x.dim()), d1 = wrap_dim(dims[1], x.dim());
  if (std::abs(ord) == 2)
    return singular_value_norm(x, d0, d1, keepdim,
                               ord > 0 ? SingularValues::Largest : SingularValues::Smallest);
  // ord 1 and inf: max (or min, for -1 and -inf) over columns of the column sums, or over rows.
  int64_t summed = std::isinf(ord) ? d1 : d0, over = std::isinf(ord) ? d0 : d1;
  Tensor sums = ops::sum(ops::abs(x), std::vector<int64_t>{summed}, true, std::nullopt);
  Tensor r = ord > 0 ? ops::amax(sums, std::vector<int64_t>{over}, true)
                     : ops::amin(sums, std::vector<int64_t>{over}, true);
  if (!keepdim) r = ops::squeeze(ops::squeeze(r, std::max(d0, d1)), std::min(d0, d1));
  return r;
}

Tensor frobenius(const Tensor& self, std::vector<int64_t> dims, bool keepdim,
                 std::optional<ScalarType> dtype) {
  return ops::linalg_vector_norm(self, Scalar(2.0), dims, keepdim, dtype);
}

}  // namespace

TN_KERNEL("aten::linalg_det", {
  check_square(a.tensor(0), "linalg.det");
  return std::get<0>(determinants(a.tensor(0)));
});
TN_KERNEL("aten::det", {
  check_square(a.tensor(0), "linalg.det");
  return std::get<0>(determinants(a.tensor(0)));
});
TN_KERNEL("aten::linalg_slogdet", {
  check_square(a.tensor(0), "linalg.slogdet");
  auto [det, sign, logabs] = determinants(a.tensor(0));
  return IValue::tuple({sign, logabs});
});
TN_KERNEL("aten::slogdet", {
  check_square(a.tensor(0), "linalg.slogdet");
  auto [det, sign, logabs] = determinants(a.tensor(0));
  return IValue::tuple({sign, logabs});
});
// Upstream's composite: log|det| where the sign is not -1, NaN where it is (through the door,
// so that under autograd its parts record as upstream's: WhereBackward0 over slogdet).
TN_KERNEL("aten::logdet", {
  check_square(a.tensor(0), "logdet");
  auto [sign, logabs] = ops::linalg_slogdet(a.tensor(0));
  Tensor nan = ops::full_like(logabs, Scalar(std::numeric_limits<double>::quiet_NaN()));
  return ops::where(ops::eq(sign, Scalar(int64_t{-1})), nan, logabs);
});
TN_KERNEL("aten::linalg_solve", {
  if (!a.boolean(2))
    throw NotImplemented("torchnative does not implement aten::linalg_solve with left=False yet");
  const Tensor &A = a.tensor(0), &B = a.tensor(1);
  // Upstream's rule: B is a (batch of) vector(s) when 1-D or shaped like A without its last dim.
  bool vector =
      B.dim() == 1 || (B.dim() == A.dim() - 1 && B.sizes() == Shape(A.sizes().begin(), A.sizes().end() - 1));
  Tensor rhs = vector ? ops::unsqueeze(B, int64_t{-1}) : B;
  Tensor x = solve(A, rhs, "torch.linalg.solve");
  return vector ? ops::squeeze(x, int64_t{-1}) : x;
});
TN_KERNEL("aten::linalg_inv", { return solve(a.tensor(0), identity_like(a.tensor(0)), "linalg.inv"); });
TN_KERNEL("aten::inverse", { return solve(a.tensor(0), identity_like(a.tensor(0)), "linalg.inv"); });
TN_KERNEL("aten::linalg_cholesky", {
  const Tensor& A = a.tensor(0);
  check_square(A, "linalg.cholesky");
  bool upper = a.boolean(1);
  Tensor factors = column_major(A);
  int n = int(A.size(-1)), info = 0;
  char uplo = 'L';
  if (!factors.is_meta())  // the meta device: the shape is the result
    TN_DISPATCH_ALL_TYPES(A.dtype(), "cholesky", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
        for (int64_t i = 0; i < factors.size(0); ++i) {
          scalar_t* m = factors.template data_as<scalar_t>() + i * n * n;
          if (n == 0) continue;
          if constexpr (std::is_same_v<scalar_t, float>)
            spotrf_(&uplo, &n, m, &n, &info);
          else
            dpotrf_(&uplo, &n, m, &n, &info);
          if (info > 0)
            throw LinAlgError(
                "linalg.cholesky: The factorization could not be completed because the input is not "
                "positive-definite (the leading minor of order " +
                std::to_string(info) + " is not positive-definite).");
        }
      }
    });
  Tensor lower =
      ops::tril(ops::reshape(ops::transpose(factors, int64_t{1}, int64_t{2}), A.sizes()), int64_t{0});
  return upper ? ops::transpose(lower, int64_t{-2}, int64_t{-1}).contiguous() : lower;
});
TN_KERNEL("aten::linalg_matrix_power", {
  const Tensor& A = a.tensor(0);
  int64_t n = a.integer(1);
  if (A.dim() < 2 || A.size(-1) != A.size(-2))
    throw Error("linalg.matrix_power: A must be batches of square matrices");
  if (n == 0) return identity_like(A);
  Tensor base = n < 0 ? ops::linalg_inv(A) : A;
  n = std::abs(n);
  if (n == 1) return base.clone();
  if (n == 2) return ops::matmul(base, base);
  if (n == 3) return ops::matmul(ops::matmul(base, base), base);
  // Binary decomposition, as upstream: the result multiplies the powers of two present in n.
  Tensor result, power = base;
  while (n > 0) {
    if (n & 1) result = result.defined() ? ops::matmul(result, power) : power;
    n >>= 1;
    if (n > 0) power = ops::matmul(power, power);
  }
  return result;
});
TN_KERNEL("aten::linalg_matrix_norm", {
  return matrix_norm(a.tensor(0), a.scalar(1).to_double(), a.int_list(2), a.boolean(3), a.optional_dtype(4));
});
TN_KERNEL("aten::linalg_matrix_norm.str_ord", {
  std::string ord = *a.optional_string(1);
  if (ord != "fro" && ord != "nuc") throw Error("linalg.matrix_norm: Order " + ord + " not supported.");
  const Tensor& self = a.tensor(0);
  require_matrix_norm_input(self);
  std::vector<int64_t> dims = a.int_list(2);
  check_matrix_dims(dims);
  check_linalg_norm_dtype(a.optional_dtype(4), self.dtype(), "linalg.matrix_norm");
  if (ord == "fro") return frobenius(self, dims, a.boolean(3), a.optional_dtype(4));
  Tensor x = a.optional_dtype(4) ? ops::to(self, *a.optional_dtype(4)) : self;
  return singular_value_norm(x, wrap_dim(dims[0], x.dim()), wrap_dim(dims[1], x.dim()), a.boolean(3),
                             SingularValues::Sum);
});
TN_KERNEL("aten::linalg_norm", {
  const Tensor& x = a.tensor(0);
  auto ord = a.optional_scalar(1);
  auto dims = a.optional_int_list(2);
  bool keepdim = a.boolean(3);
  auto dtype = a.optional_dtype(4);
  check_norm_dims(x, dims, ord.has_value(), "must");
  // Without an ord, the 2-norm and the Frobenius norm are one vector norm.
  if (ord && (dims ? dims->size() == 2 : x.dim() == 2))
    return matrix_norm(x, ord->to_double(), dims.value_or(std::vector<int64_t>{-2, -1}), keepdim, dtype);
  return ops::linalg_vector_norm(x, ord.value_or(Scalar(2.0)), dims, keepdim, dtype);
});
TN_KERNEL("aten::linalg_norm.ord_str", {
  auto dims = a.optional_int_list(2);
  check_norm_dims(a.tensor(0), dims, true, "mut");  // sic: upstream 1.13's word
  return ops::linalg_matrix_norm(a.tensor(0), *a.optional_string(1),
                                 dims.value_or(std::vector<int64_t>{0, 1}), a.boolean(3),
                                 a.optional_dtype(4));
});

}  // namespace tn
