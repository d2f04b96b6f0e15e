#include "kernel_dtypes.h"

#include <map>
#include <set>

namespace tn {

// One AT_DISPATCH of upstream: the kernel's name as its error spells it, the dtypes it lacks,
// and the argument whose dtype it dispatches on (the first of `arguments` the schema has).
struct KernelDtypeRule {
  std::string label;
  std::set<ScalarType> refused;
  std::vector<std::string> arguments = {"self", "input"};
  std::set<std::string> overloads = {};  // empty: every overload of the family
  bool only_listed_overloads = true;     // false: every overload but those listed
};

namespace {

using S = ScalarType;
const std::set<S> kBool = {S::Bool};
const std::set<S> kHalf = {S::Half};
const std::set<S> kIntegral = {S::Byte, S::Char, S::Short, S::Int, S::Long};
std::set<S> with(std::set<S> set, std::initializer_list<S> more) {
  set.insert(more);
  return set;
}
// AT_DISPATCH_FLOATING_TYPES_AND(BFloat16): integers, bool and half refused.
const std::set<S> kFloatAndBFloat16 = with(kIntegral, {S::Bool, S::Half});
// AT_DISPATCH_FLOATING_TYPES: float and double alone.
const std::set<S> kFloatOnly = with(kFloatAndBFloat16, {S::BFloat16});
std::set<S> without(std::set<S> set, std::initializer_list<S> allowed) {
  for (S type : allowed) set.erase(type);
  return set;
}

// Read off upstream 1.13's CPU kernels by calling each with every dtype.
const std::map<std::string, std::vector<KernelDtypeRule>>& rules_by_family() {
  static const auto* rules = new std::map<std::string, std::vector<KernelDtypeRule>>{
      {"mm", {{"addmm_impl_cpu_", kBool}}},
      {"addmm", {{"addmm_impl_cpu_", kBool}}},
      {"addbmm", {{"addmm_impl_cpu_", kBool}}},
      {"mv", {{"addmv_impl_cpu", kBool}}},
      {"addmv", {{"addmv_impl_cpu", kBool}}},
      {"bmm", {{"bmm", kBool}}},
      {"baddbmm", {{"baddbmm", kBool}}},
      {"dot", {{"dot", kBool}}},
      {"vdot", {{"dot", kBool}}},
      {"trace", {{"trace", kBool}}},
      {"_slow_conv2d_forward", {{"slow_conv2d_cpu", kBool}}},
      {"gelu", {{"GeluKernelImpl", kHalf}}},
      {"hardshrink", {{"hardshrink_cpu", kHalf}}},
      {"softshrink", {{"softshrink_cpu", kHalf}}},
      {"elu", {{"elu_cpu", kHalf}}},
      {"selu", {{"elu_cpu", kHalf}}},
      {"celu", {{"elu_cpu", kHalf}}},
      {"silu", {{"silu_cpu", kHalf}}},
      {"mish", {{"mish_cpu", kHalf}}},
      {"hardsigmoid", {{"hardsigmoid_cpu", kHalf}}},
      {"hardswish", {{"hardswish_cpu", kHalf}}},
      {"leaky_relu", {{"leaky_relu_cpu", kHalf}}},
      {"rrelu", {{"leaky_relu_cpu", kHalf}}},
      {"rrelu_with_noise", {{"leaky_relu_cpu", kHalf}}},
      {"log_sigmoid", {{"log_sigmoid_cpu", kHalf}}},
      {"log_sigmoid_forward", {{"log_sigmoid_cpu", kHalf}}},
      {"softplus", {{"softplus_cpu", kHalf}}},
      {"threshold", {{"threshold_cpu", kBool}}},
      {"glu", {{"glu_cpu", kFloatAndBFloat16}}},
      {"cross", {{"cross", kHalf}}},
      {"linalg_cross", {{"cross", kHalf}}},
      {"histc", {{"histogram_cpu", kHalf}}},
      {"topk", {{"topk_cpu", kBool}}},
      {"mse_loss", {{"mse_cpu", {S::BFloat16}}}},
      {"binary_cross_entropy", {{"binary_cross_entropy", {S::Half, S::BFloat16}}}},
      {"adaptive_avg_pool2d", {{"adaptive_avg_pool2d", kFloatAndBFloat16}}},
      {"_adaptive_avg_pool2d", {{"adaptive_avg_pool2d", kFloatAndBFloat16}}},
      {"adaptive_max_pool2d", {{"adaptive_max_pool2d", kFloatAndBFloat16}}},
      // avg_pool2d alone among the pools is compiled for int64.
      {"avg_pool2d", {{"avg_pool2d", {S::Byte, S::Char, S::Short, S::Int, S::Bool, S::Half}}}},
      {"max_pool2d", {{"max_pool2d", kFloatAndBFloat16}}},
      {"max_pool2d_with_indices", {{"max_pool2d", kFloatAndBFloat16}}},
      // The 3-D pools: float and double, avg_pool3d also int64, _adaptive_avg_pool3d also half
      // (adaptive_avg_pool3d's (1, 1, 1) output is a mean: no rule of its own).
      {"max_pool3d", {{"max_pool3d_with_indices_cpu", kFloatOnly}}},
      {"max_pool3d_with_indices", {{"max_pool3d_with_indices_cpu", kFloatOnly}}},
      {"max_pool3d_with_indices_backward", {{"max_pool3d_with_indices_backward", kFloatOnly}}},
      {"avg_pool3d", {{"avg_pool3d_out_frame", without(kFloatOnly, {S::Long})}}},
      {"avg_pool3d_backward", {{"avg_pool3d_backward_out_frame", without(kFloatOnly, {S::Long})}}},
      {"_adaptive_avg_pool3d", {{"adaptive_avg_pool3d_cpu", without(kFloatOnly, {S::Half})}}},
      {"_adaptive_avg_pool3d_backward",
       {{"adaptive_avg_pool3d_backward_cpu", without(kFloatOnly, {S::Half})}}},
      {"adaptive_max_pool3d", {{"adaptive_max_pool3d_cpu", kFloatOnly}}},
      {"im2col", {{"im2col_out_cpu", with(kIntegral, {S::Bool})}}},
      {"geometric", {{"geometric_cpu", kBool}}},
      // The labels are those of upstream's contiguous path (its channels-last path names another).
      {"upsample_nearest2d",
       {{"compute_indices_weights_nearest", {S::Char, S::Short, S::Int, S::Long, S::Bool, S::Half}}}},
      {"upsample_bilinear2d", {{"compute_indices_weights_linear", with(kIntegral, {S::Bool, S::Half})}}},
      // bernoulli with a tensor p dispatches on self, then on p (self where p is self);
      // with a float p on self alone.
      {"bernoulli",
       {{"bernoulli_tensor_cpu_self_", kHalf, {"self"}, {"float", "p"}, false},
        {"bernoulli_tensor_cpu_p_", with(kIntegral, {S::Bool}), {"p", "self"}, {"float", "p"}, false},
        {"bernoulli_scalar_cpu_", kHalf, {"self"}, {"float", "p"}, true}}},
  };
  return *rules;
}

bool applies(const KernelDtypeRule& rule, const std::string& overload) {
  if (rule.overloads.empty()) return true;
  return rule.overloads.count(overload) == rule.only_listed_overloads;
}

}  // namespace

const std::vector<KernelDtypeRule>* kernel_dtype_rules(const Operator& op) {
  auto it = rules_by_family().find(op.family());
  return it == rules_by_family().end() ? nullptr : &it->second;
}

void check_kernel_dtype(const Operator& op, const std::vector<KernelDtypeRule>& rules, const Stack& stack) {
  const auto& arguments = op.schema.arguments;
  for (const KernelDtypeRule& rule : rules) {
    if (!applies(rule, op.schema.overload)) continue;
    for (const std::string& name : rule.arguments) {
      size_t i = 0;
      while (i < arguments.size() && arguments[i].name != name) ++i;
      if (i == arguments.size()) continue;  // not this schema's: try the next name
      if (i < stack.size() && stack[i].is<Tensor>() && rule.refused.count(stack[i].get<Tensor>().dtype()))
        dtype_not_implemented(rule.label.c_str(), stack[i].get<Tensor>().dtype());
      break;
    }
  }
}

}  // namespace tn
