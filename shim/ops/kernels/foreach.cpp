// The _foreach_* operators (aten::_foreach_add_.List, _foreach_addcdiv_.ScalarList,
// _foreach_sqrt, _foreach_norm.Scalar ... every one in native_functions.yaml): the per-tensor
// operator applied to each element of the lists, as upstream's CPU "slow path" does — on CPU
// upstream never takes the fused path, so a foreach optimizer step has the single-tensor step's
// bits. Element i of a Tensor[] argument and of a Scalar[] argument take the place of the
// per-tensor operator's argument at the same position; other arguments pass unchanged.
#include <algorithm>
#include <memory>
#include <mutex>

#include "common.h"
#include "schema_table.h"

namespace tn {

namespace {

constexpr const char* kPrefix = "_foreach_";

bool is_list_of(const SchemaArgument& argument, SchemaType::Kind kind) {
  return argument.type.list && argument.type.kind == kind;
}

// Whether `candidate` takes one foreach element's arguments: a Tensor where the foreach
// operator has a Tensor[], a Scalar where it has a Scalar[] or Scalar, and defaults for the rest.
bool takes_elements_of(const Schema& foreach, const Schema& candidate) {
  const auto& args = foreach.arguments;
  if (candidate.out_count() > 0 || candidate.arguments.size() < args.size()) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    const SchemaType& type = candidate.arguments[i].type;
    if (type.list) return false;
    bool tensor = args[i].type.kind == SchemaType::Kind::Tensor;
    if (tensor != (type.kind == SchemaType::Kind::Tensor)) return false;
  }
  return std::all_of(candidate.arguments.begin() + ptrdiff_t(args.size()), candidate.arguments.end(),
                     [](const SchemaArgument& a) { return a.default_text.has_value(); });
}

// The per-tensor operator upstream's slow path calls: _foreach_add_.List -> add_.Tensor,
// _foreach_norm -> linalg_vector_norm. Null when there is no in-place form (maximum_): the
// functional result is then copied into self.
const Operator* per_tensor_operator(const Operator& op) {
  std::string name = op.schema.name.substr(std::string(kPrefix).size());
  if (name == "norm") name = "linalg_vector_norm";
  for (Operator* candidate : Dispatcher::instance().overloads("aten::" + name))
    if (takes_elements_of(op.schema, candidate->schema)) return candidate;
  if (op.is_inplace()) return nullptr;
  throw Error("torchnative: no per-tensor operator for " + op.schema.full_name());
}

size_t element_count(const Operator& op, const Stack& stack) {
  const auto& args = op.schema.arguments;
  size_t count = stack.at(0).get<std::vector<Tensor>>().size();
  if (count == 0)
    throw NotImplemented(
        "There were no tensor arguments to this function (e.g., you passed an empty list of Tensors), but no "
        "fallback function is registered for schema " +
        op.schema.full_name() + ".");
  for (size_t i = 1; i < args.size(); ++i) {
    if (is_list_of(args[i], SchemaType::Kind::Tensor) && stack[i].get<std::vector<Tensor>>().size() != count)
      throw Error("Tensor lists must have the same number of tensors, got " + std::to_string(count) +
                  " and " + std::to_string(stack[i].get<std::vector<Tensor>>().size()));
    if (is_list_of(args[i], SchemaType::Kind::Scalar) && stack[i].get<Stack>().size() != count)
      throw Error("Tensor list must have same number of elements as scalar list.");
  }
  return count;
}

// Element `e`'s arguments for the per-tensor operator, its defaults filled in.
Stack element_arguments(const Operator& op, const Operator& target, const Stack& stack, size_t e) {
  const auto& args = op.schema.arguments;
  Stack element;
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_list_of(args[i], SchemaType::Kind::Tensor))
      element.emplace_back(stack[i].get<std::vector<Tensor>>()[e]);
    else if (is_list_of(args[i], SchemaType::Kind::Scalar))
      element.push_back(stack[i].get<Stack>()[e]);
    else
      element.push_back(stack[i]);
  }
  for (size_t i = element.size(); i < target.schema.arguments.size(); ++i) {
    const SchemaArgument& argument = target.schema.arguments[i];
    element.push_back(parse_default(argument.type, *argument.default_text));
  }
  return element;
}

// What a foreach operator's calls share, found at its first call (the dispatcher is
// complete by then): the operator, and the per-tensor operator writing in place or not.
struct Resolved {
  const Operator* op = nullptr;
  const Operator* in_place = nullptr;
  const Operator* functional = nullptr;
};

Resolved resolve(const std::string& full_name) {
  Dispatcher& dispatcher = Dispatcher::instance();
  size_t dot = full_name.find('.');
  Resolved r;
  r.op = dispatcher.find(full_name.substr(0, dot), dot == std::string::npos ? "" : full_name.substr(dot + 1));
  r.in_place = per_tensor_operator(*r.op);
  r.functional = r.in_place ? r.in_place : per_tensor_operator(*r.op->functional);
  return r;
}

void run_foreach(const Resolved& r, Stack& stack) {
  size_t count = element_count(*r.op, stack);
  std::vector<Tensor> results;
  for (size_t e = 0; e < count; ++e) {
    Stack element = element_arguments(*r.op, *r.functional, stack, e);
    Dispatcher::instance().call(*r.functional, element);
    if (!r.in_place && r.op->is_inplace())
      ops::copy_(stack[0].get<std::vector<Tensor>>()[e], element.at(0).get<Tensor>(), false);
    results.push_back(element.at(0).get<Tensor>());
  }
  stack.clear();
  if (!r.op->is_inplace()) stack.emplace_back(std::move(results));
}

// One kernel per foreach overload of the schema table, registered with the other kernels.
const bool registered = [] {
  for (size_t i = 0; i < kSchemaTableSize; ++i) {
    std::string schema = kSchemaTable[i].schema;
    if (schema.rfind(kPrefix, 0) != 0) continue;
    std::string full_name = "aten::" + schema.substr(0, schema.find('('));
    auto resolved = std::make_shared<std::pair<std::once_flag, Resolved>>();
    KernelRegistration(full_name.c_str(), [full_name, resolved](Stack& stack) {
      std::call_once(resolved->first, [&] { resolved->second = resolve(full_name); });
      run_foreach(resolved->second, stack);
    });
  }
  return true;
}();

}  // namespace

}  // namespace tn
