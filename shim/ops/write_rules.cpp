#include "write_rules.h"

#include <functional>
#include <map>
#include <set>

#include "core/error.h"

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

// Inputs upstream reads while it writes without refusing a partial overlap: BLAS and LAPACK
// operands, the input of a reduction, scan, pooling or copying view, the source of a fill or
// scatter. Read off upstream 1.13's answers to tests/golden/cases/aliasing.py.
const std::map<std::string, std::set<std::string>> kInputsReadUnchecked = {
    {"_addmm_activation", {"mat1", "mat2"}},
    {"_compute_linear_combination", {"coefficients", "input"}},
    {"_index_put_impl", {"values"}},
    {"_linalg_det", {"A"}},
    {"_linalg_eigh", {"A"}},
    {"_linalg_slogdet", {"A"}},
    {"_linalg_solve_ex", {"A", "B"}},
    {"_linalg_svd", {"A"}},
    {"_log_softmax", {"self"}},
    {"_reshape_alias_copy", {"self"}},
    {"_softmax", {"self"}},
    {"_stack", {"tensors"}},
    {"adaptive_avg_pool2d", {"self"}},
    {"adaptive_max_pool2d", {"self"}},
    {"addbmm", {"batch1", "batch2"}},
    {"addmm", {"mat1", "mat2"}},
    {"addmv", {"mat", "self", "vec"}},
    {"addr", {"vec1", "vec2"}},
    {"all", {"self"}},
    {"amax", {"self"}},
    {"amin", {"self"}},
    {"aminmax", {"self"}},
    {"any", {"self"}},
    {"argmax", {"self"}},
    {"argmin", {"self"}},
    {"as_strided_copy", {"self"}},
    {"avg_pool2d", {"self"}},
    {"baddbmm", {"batch1", "batch2"}},
    {"bmm", {"mat2", "self"}},
    {"bucketize", {"boundaries", "self"}},
    {"chain_matmul", {"matrices"}},
    {"cholesky_inverse", {"self"}},
    {"cholesky_solve", {"input2", "self"}},
    {"cross", {"other", "self"}},
    {"cummax", {"self"}},
    {"cummin", {"self"}},
    {"diag", {"self"}},
    {"diagonal_copy", {"self"}},
    {"diff", {"self"}},
    {"dot", {"self", "tensor"}},
    {"fft_hfft", {"self"}},
    {"fft_hfft2", {"self"}},
    {"fft_hfftn", {"self"}},
    {"fft_irfft", {"self"}},
    {"fft_irfft2", {"self"}},
    {"fft_irfftn", {"self"}},
    {"fill", {"value"}},
    {"fractional_max_pool2d", {"random_samples", "self"}},
    {"frobenius_norm", {"self"}},
    {"geqrf", {"self"}},
    {"ger", {"self", "vec2"}},
    {"glu", {"self"}},
    {"histc", {"self"}},
    {"histogram", {"self"}},
    {"im2col", {"self"}},
    {"index_fill", {"value"}},
    {"index_put", {"values"}},
    {"inner", {"other", "self"}},
    {"inverse", {"self"}},
    {"isin", {"elements", "test_elements"}},
    {"ldexp", {"other"}},
    {"linalg_cholesky_ex", {"self"}},
    {"linalg_cond", {"self"}},
    {"linalg_cross", {"other", "self"}},
    {"linalg_det", {"A"}},
    {"linalg_eigh", {"self"}},
    {"linalg_eigvalsh", {"self"}},
    {"linalg_inv", {"A"}},
    {"linalg_inv_ex", {"A"}},
    {"linalg_ldl_factor", {"self"}},
    {"linalg_ldl_factor_ex", {"self"}},
    {"linalg_lu", {"A"}},
    {"linalg_lu_factor", {"A"}},
    {"linalg_lu_factor_ex", {"A"}},
    {"linalg_matmul", {"other", "self"}},
    {"linalg_matrix_norm", {"self"}},
    {"linalg_matrix_power", {"self"}},
    {"linalg_matrix_rank", {"input", "self", "tol"}},
    {"linalg_multi_dot", {"tensors"}},
    {"linalg_norm", {"self"}},
    {"linalg_pinv", {"rcond", "self"}},
    {"linalg_qr", {"A"}},
    {"linalg_slogdet", {"A"}},
    {"linalg_solve", {"A", "B"}},
    {"linalg_solve_ex", {"A", "B"}},
    {"linalg_solve_triangular", {"self"}},
    {"linalg_svd", {"A"}},
    {"linalg_svdvals", {"A"}},
    {"linalg_vecdot", {"x", "y"}},
    {"linalg_vector_norm", {"self"}},
    {"linear", {"input", "weight"}},
    {"log_sigmoid", {"self"}},
    {"log_sigmoid_forward", {"self"}},
    {"log_softmax", {"self"}},
    {"logsumexp", {"self"}},
    {"masked_fill", {"value"}},
    {"masked_scatter", {"source"}},
    {"matmul", {"other", "self"}},
    {"matrix_power", {"self"}},
    {"max_pool2d_with_indices", {"self"}},
    {"mean", {"self"}},
    {"median", {"self"}},
    {"mm", {"mat2", "self"}},
    {"multinomial", {"self"}},
    {"mv", {"self", "vec"}},
    {"mvlgamma", {"self"}},
    {"nanmean", {"self"}},
    {"nanmedian", {"self"}},
    {"nansum", {"self"}},
    {"narrow_copy", {"self"}},
    {"norm", {"self"}},
    {"nuclear_norm", {"self"}},
    {"outer", {"self", "vec2"}},
    {"prod", {"self"}},
    {"put", {"source"}},
    {"qr", {"self"}},
    {"reflection_pad1d", {"self"}},
    {"reflection_pad1d_backward", {"grad_output", "self"}},
    {"reflection_pad2d", {"self"}},
    {"replication_pad1d", {"self"}},
    {"replication_pad1d_backward", {"grad_output", "self"}},
    {"replication_pad2d", {"self"}},
    {"resize_as", {"the_template"}},
    {"rrelu_with_noise", {"noise"}},
    {"searchsorted", {"self", "sorted_sequence"}},
    {"select_copy", {"self"}},
    {"slogdet", {"self"}},
    {"soft_margin_loss_backward", {"self"}},
    {"softmax", {"self"}},
    {"special_logsumexp", {"self"}},
    {"special_multigammaln", {"self"}},
    {"special_ndtr", {"self"}},
    {"std", {"self"}},
    {"sum", {"self"}},
    {"svd", {"self"}},
    {"symeig", {"self"}},
    {"threshold", {"self"}},
    {"threshold_backward", {"grad_output", "self"}},
    {"triangular_solve", {"A", "self"}},
    {"tril", {"self"}},
    {"triu", {"self"}},
    {"var", {"self"}},
    {"vdot", {"other", "self"}},
};

// Inputs upstream refuses to share any memory with the output, even when they are the output
// itself (assert_no_overlap): what it gathers, scatters or copies element by element.
const std::map<std::string, std::set<std::string>> kInputsRefusedWhole = {
    {"index_put", {"values"}},    {"_index_put_impl", {"values"}},
    {"index_copy", {"source"}},   {"index_add", {"source"}},
    {"index_reduce", {"source"}}, {"scatter", {"src"}},
    {"scatter_add", {"src"}},     {"scatter_reduce", {"src"}},
    {"gather", {"self"}},         {"take", {"self"}},
    {"take_along_dim", {"self"}}, {"index", {"self"}},
    {"index_select", {"self"}},   {"masked_select", {"self"}},
    {"kthvalue", {"self"}},       {"median", {"self"}},
    {"nanmedian", {"self"}},      {"kron", {"self", "other"}},
    {"outer", {"self"}},          {"ger", {"self"}},
    {"addr", {"vec1"}},           {"select_copy", {"self"}},
    {"t_copy", {"self"}},         {"transpose_copy", {"self"}},
    {"unfold_copy", {"self"}},    {"unsqueeze_copy", {"self"}}};

bool listed(const std::map<std::string, std::set<std::string>>& table, const std::string& family,
            const std::string& argument) {
  auto it = table.find(family);
  return it != table.end() && it->second.count(argument);
}

std::string upstream(ScalarType t) { return upstream_type_name(t); }
std::string cpp(ScalarType t) { return cpp_type_name(t); }

// Output dtype rules: family -> (output index -> the message refusing `output`, or "" to accept).
using DtypeRule = std::function<std::string(ScalarType output, ScalarType result)>;

DtypeRule exactly(ScalarType wanted, std::function<std::string(ScalarType)> message) {
  return [=](ScalarType output, ScalarType) { return output == wanted ? std::string() : message(output); };
}
DtypeRule as_result(std::function<std::string(ScalarType, ScalarType)> message) {
  return [=](ScalarType output, ScalarType result) {
    return output == result ? std::string() : message(output, result);
  };
}
DtypeRule any_dtype() {
  return [](ScalarType, ScalarType) { return std::string(); };
}

std::string expected_out(ScalarType wanted, ScalarType output) {
  return "Expected out tensor to have dtype " + cpp(wanted) + ", but got " + cpp(output) + " instead";
}

// A family's rules, by output index; `outputs` > 0: only for its overloads with that many outputs
// (max.dim_max's values and indices, not max.out's one result).
struct DtypeRules {
  size_t outputs = 0;
  std::map<size_t, DtypeRule> by_index;
};

DtypeRule exactly_long(std::function<std::string(ScalarType)> message) {
  return exactly(ScalarType::Long, message);
}
DtypeRule only_bool(const std::string& family) {
  return exactly(ScalarType::Bool, [family](ScalarType o) {
    return family + " only supports bool tensor for result, got: " + upstream(o);
  });
}
DtypeRule boolean_only(const std::string& family) {
  return exactly(ScalarType::Bool,
                 [family](ScalarType) { return family + " does not support non-boolean outputs."; });
}
// Any dtype but bool, which the kernel upstream lacks.
DtypeRule no_bool(const std::string& kernel) {
  return [kernel](ScalarType o, ScalarType) {
    return o == ScalarType::Bool ? "\"" + kernel + "\" not implemented for 'Bool'" : std::string();
  };
}
DtypeRule input_dtype_matches() {
  return as_result([](ScalarType o, ScalarType r) {
    return "Expected the dtype for input and out to match, but got " + upstream(r) +
           " for input's dtype and " + upstream(o) + " for out's dtype.";
  });
}
DtypeRule scalar_type_found() {
  return as_result([](ScalarType o, ScalarType r) {
    return "expected scalar_type " + upstream(r) + " but found " + upstream(o);
  });
}
DtypeRule bucket_indices() {
  return as_result([](ScalarType o, ScalarType r) {
    return "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or Long(int64) "
           "depending "
           "on whether out_int32 flag is True, but we got output tensor's dtype " +
           upstream(o) + " and out_int32 flag is " + (r == ScalarType::Int ? "True" : "False");
  });
}

// Read off upstream 1.13: the families whose out= checks differ from canCast.
const std::map<std::string, DtypeRules>& dtype_rules() {
  const DtypeRule long_indices = exactly_long([](ScalarType o) { return expected_out(ScalarType::Long, o); });
  const DtypeRule values = as_result([](ScalarType o, ScalarType r) { return expected_out(r, o); });
  const DtypeRule any = any_dtype();
  static const auto* rules = new std::map<std::string, DtypeRules>{
      {"all", {0, {{0, only_bool("all")}}}},
      {"any", {0, {{0, only_bool("any")}}}},
      {"argmax", {0, {{0, long_indices}}}},
      {"argmin", {0, {{0, long_indices}}}},
      {"max", {2, {{0, values}, {1, long_indices}}}},
      {"min", {2, {{0, values}, {1, long_indices}}}},
      {"sort", {2, {{0, values}, {1, long_indices}}}},
      {"topk", {2, {{0, values}, {1, long_indices}}}},
      {"aminmax", {2, {{0, values}, {1, values}}}},
      {"mode", {2, {{1, exactly_long([](ScalarType o) {
                       return "expected scalar type 'Long' but got '" + upstream(o) + "' for indices output";
                     })}}}},
      {"kthvalue", {2, {{1, exactly_long([](ScalarType) {
                           return std::string("output indices must be of scalar type Long");
                         })}}}},
      {"cummax", {2, {{1, scalar_type_found()}}}},
      {"cummin", {2, {{1, scalar_type_found()}}}},
      {"logcumsumexp", {0, {{0, scalar_type_found()}}}},
      {"amax", {0, {{0, input_dtype_matches()}}}},
      {"amin", {0, {{0, input_dtype_matches()}}}},
      {"nonzero", {0, {{0, exactly_long([](ScalarType o) {
                          return "nonzero: Expected out tensor to have scalar type Long but got scalar type" +
                                 upstream(o);
                        })}}}},
      {"isin",
       {0, {{0, exactly(ScalarType::Bool, [](ScalarType o) { return expected_out(ScalarType::Bool, o); })}}}},
      {"logsumexp",
       {0,
        {{0,
          [](ScalarType o, ScalarType) {
            return is_floating(o) ? std::string()
                                  : "logsumexp(): Expected floating point type for result tensor, "
                                    "but got: " +
                                        upstream(o);
          }}}}},
      {"float_power", {0, {{0, as_result([](ScalarType o, ScalarType r) {
                              return "the output given to float_power has dtype " + upstream(o) +
                                     " but the operation's result requires dtype " + upstream(r);
                            })}}}},
      {"searchsorted", {0, {{0, bucket_indices()}}}},
      {"bucketize", {0, {{0, bucket_indices()}}}},
      {"signbit", {0, {{0, boolean_only("signbit")}}}},
      {"isposinf", {0, {{0, boolean_only("isposinf")}}}},
      {"isneginf", {0, {{0, boolean_only("isneginf")}}}},
      {"multinomial", {0, {{0, exactly_long([](ScalarType o) {
                              return "multinomial expects Long tensor out, got: " + upstream(o);
                            })}}}},
      // Reductions that compute in the out tensor's dtype take any (computes_in_out_dtype).
      {"sum", {0, {{0, any}}}},
      {"prod", {0, {{0, any}}}},
      {"cumsum", {0, {{0, no_bool("cumsum_out_cpu")}}}},
      {"cumprod", {0, {{0, no_bool("cumprod_out_cpu")}}}},
      {"norm", {0, {{0, any}}}},
  };
  return *rules;
}

}  // namespace

void check_output_dtype(const std::string& family, const std::string& name, size_t index, size_t outputs,
                        ScalarType output, ScalarType result) {
  if (name == "float_power_" && output != result)
    throw Error("the base given to float_power_ has dtype " + upstream(output) +
                " but the operation's result requires dtype " + upstream(result));
  auto family_rules = dtype_rules().find(family);
  if (family_rules != dtype_rules().end() &&
      (!family_rules->second.outputs || family_rules->second.outputs == outputs)) {
    auto rule = family_rules->second.by_index.find(index);
    if (rule != family_rules->second.by_index.end()) {
      std::string refusal = rule->second(output, result);
      if (!refusal.empty()) throw Error(refusal);
      return;
    }
  }
  if (!can_cast(result, output))
    throw Error("result type " + upstream(result) + " can't be cast to the desired output type " +
                upstream(output));
}

bool computes_in_out_dtype(const std::string& family) {
  static const std::set<std::string> families = {"sum", "prod", "cumsum", "cumprod", "norm"};
  return families.count(family) > 0;
}

InputCheck input_check(const std::string& family, const std::string& argument) {
  if (listed(kInputsRefusedWhole, family, argument)) return InputCheck::AnyOverlap;
  return listed(kInputsReadUnchecked, family, argument) ? InputCheck::None : InputCheck::PartialOverlap;
}

bool checks_internal_overlap(const std::string& family, const std::string& name) {
  return !kOutputsWrittenUnchecked.count(family) && !kOverloadsWrittenUnchecked.count(name);
}

}  // namespace tn
