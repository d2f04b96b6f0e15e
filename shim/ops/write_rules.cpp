#include "write_rules.h"

#include <map>
#include <set>

namespace tn {

namespace {

// Upstream writes these without TensorIterator's output checks (reductions build theirs
// with the checks off, linear algebra writes through BLAS/LAPACK, fills are idempotent,
// restriding in-place ops write no element), so an expanded output is written, not refused.
// Read off upstream 1.13's answers to tests/golden/cases/aliasing.py.
const std::set<std::string> kOutputsWrittenUnchecked = {
    // reductions and scans
    "all", "amax", "amin", "aminmax", "any", "argmax", "argmin", "cummax", "cummin", "nanmean", "nansum",
    "norm", "nuclear_norm", "prod", "std", "sum", "var", "histc", "histogram",
    // linear algebra
    "_compute_linear_combination", "_linalg_det", "_linalg_slogdet", "bmm", "cross", "dot", "linalg_cond",
    "linalg_cross", "linalg_det", "linalg_matrix_norm", "linalg_matrix_rank", "linalg_norm", "linalg_slogdet",
    "linalg_vecdot", "linalg_vector_norm", "mv", "slogdet", "vdot",
    // fills and factories
    "empty", "eye", "fill", "fill_diagonal", "full", "index_fill", "index_put", "_index_put_impl",
    "masked_fill", "ones", "randperm", "zero", "zeros", "diag", "tril", "triu", "unfold_copy",
    "unsqueeze_copy",
    // nn kernels with their own loops
    "adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool2d", "fractional_max_pool2d", "im2col",
    "max_pool2d_with_indices", "reflection_pad2d", "replication_pad2d", "binary_cross_entropy", "huber_loss",
    "mse_loss", "smooth_l1_loss", "soft_margin_loss", "threshold", "threshold_backward", "embedding_renorm",
    "dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout",
    // restriding and metadata
    "as_strided", "detach", "requires_grad", "rename", "resize", "resize_as", "set", "squeeze", "unsqueeze",
    "swapaxes", "swapdims", "t", "transpose"};
// Overloads that differ from their family: the in-place forms write through BLAS, the out=
// forms through TensorIterator.
const std::set<std::string> kOverloadsWrittenUnchecked = {"addmv_", "baddbmm_", "conj_physical_"};

// Inputs upstream reads while it writes, without refusing a partial overlap: BLAS operands,
// the source of a scatter or fill, the input of a reduction or a copying view.
const std::map<std::string, std::set<std::string>> kInputsReadUnchecked = {
    {"_addmm_activation", {"mat1", "mat2"}},
    {"addmm", {"mat1", "mat2"}},
    {"addbmm", {"batch1", "batch2"}},
    {"baddbmm", {"batch1", "batch2"}},
    {"addmv", {"mat", "vec"}},
    {"addr", {"vec1", "vec2"}},
    {"bmm", {"mat2"}},
    {"mm", {"mat2"}},
    {"mv", {"vec"}},
    {"dot", {"tensor"}},
    {"vdot", {"other"}},
    {"inner", {"other"}},
    {"outer", {"self", "vec2"}},
    {"ger", {"self", "vec2"}},
    {"matmul", {"other"}},
    {"linalg_matmul", {"other"}},
    {"linear", {"weight"}},
    {"linalg_vecdot", {"y"}},
    {"cross", {"other"}},
    {"linalg_cross", {"other"}},
    {"_compute_linear_combination", {"coefficients", "input"}},
    {"linalg_solve", {"B"}},
    {"linalg_solve_ex", {"B"}},
    {"_linalg_solve_ex", {"B"}},
    {"cholesky_solve", {"input2"}},
    {"triangular_solve", {"A"}},
    {"linalg_matrix_rank", {"tol"}},
    {"linalg_pinv", {"rcond"}},
    {"fill", {"value"}},
    {"index_fill", {"value"}},
    {"masked_fill", {"value"}},
    {"index_put", {"values"}},
    {"_index_put_impl", {"values"}},
    {"masked_scatter", {"source"}},
    {"put", {"source"}},
    {"fractional_max_pool2d", {"random_samples"}},
    {"rrelu_with_noise", {"noise"}},
    {"ldexp", {"other"}},
    {"amax", {"self"}},
    {"amin", {"self"}},
    {"sum", {"self"}},
    {"nansum", {"self"}},
    {"diff", {"self"}},
    {"tril", {"self"}},
    {"triu", {"self"}},
    {"threshold_backward", {"self"}},
    {"resize_as", {"the_template"}},
    {"as_strided_copy", {"self"}},
    {"_reshape_alias_copy", {"self"}},
    {"diagonal_copy", {"self"}},
    {"narrow_copy", {"self"}},
    {"select_copy", {"self"}},
    {"reflection_pad1d_backward", {"self"}},
    {"replication_pad1d_backward", {"self"}},
    {"soft_margin_loss_backward", {"self"}}};

}  // namespace

bool checks_internal_overlap(const std::string& family, const std::string& name) {
  return !kOutputsWrittenUnchecked.count(family) && !kOverloadsWrittenUnchecked.count(name);
}

bool checks_partial_overlap(const std::string& family, const std::string& argument) {
  auto it = kInputsReadUnchecked.find(family);
  return it == kInputsReadUnchecked.end() || !it->second.count(argument);
}

}  // namespace tn
