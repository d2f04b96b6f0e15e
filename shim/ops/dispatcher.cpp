#include <algorithm>

#include "autograd.h"
#include "boxing.h"
#include "core/overlap.h"
#include "kernel_dtypes.h"
#include "ops.h"
#include "schema_table.h"
#include "typed_ops.h"
#include "write_rules.h"

namespace tn {

namespace {

ScalarType g_default_dtype = ScalarType::Float;

// Two overloads are variants of one another when their non-out arguments agree in name
// and type (ignoring alias annotations; the first argument may be named self or input,
// as dropout_ and dropout are).
bool same_signature(const Schema& a, const Schema& b) {
  std::vector<const SchemaArgument*> x, y;
  for (const auto& arg : a.arguments)
    if (!arg.is_out) x.push_back(&arg);
  for (const auto& arg : b.arguments)
    if (!arg.is_out) y.push_back(&arg);
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    const auto &p = *x[i], &q = *y[i];
    if ((p.name != q.name && i > 0) || p.type.base != q.type.base || p.type.list != q.type.list ||
        p.type.optional != q.type.optional || p.type.element_optional != q.type.element_optional)
      return false;
  }
  return true;
}

const char* const kTensorOptionNames[] = {"dtype", "layout", "device", "pin_memory"};

bool is_tensor_option(const std::string& name) {
  for (const char* option : kTensorOptionNames)
    if (name == option) return true;
  return false;
}

// `functional` has the arguments of `out` (minus out tensors) plus TensorOptions.
bool adds_only_tensor_options(const Schema& out, const Schema& functional) {
  Schema trimmed = functional;
  std::erase_if(trimmed.arguments, [](const SchemaArgument& a) { return is_tensor_option(a.name); });
  return trimmed.arguments.size() < functional.arguments.size() && same_signature(out, trimmed);
}

void resize_output(const Tensor& out, const Shape& sizes) {
  if (out.sizes() != sizes) out.resize(sizes);
}

// Writes a derived in-place or out= call's result `index` into its target, after the
// family's dtype check (write_rules.h).
void write_result(const Operator& op, size_t index, const Tensor& target, const Tensor& result, bool resize) {
  check_output_dtype(op.family(), op.schema.name, index, std::max<size_t>(op.schema.out_count(), 1),
                     target.dtype(), result.dtype());
  if (resize) resize_output(target, result.sizes());
  if (!target.same(result)) target.copy_from(result);
}

bool writes(const SchemaArgument& argument) {
  return argument.type.is_write() && argument.type.kind == SchemaType::Kind::Tensor;
}

// What upstream refuses before it writes, decided here once for every operator rather than
// in each kernel (write_rules.h says where upstream does not check): an output whose
// elements share memory (an expanded view), and an input that overlaps an output in part.
// An input that is the output itself is fine: the derived in-place and out= paths compute
// the functional result first, as through a temporary.
void check_writes(const Operator& op, const Stack& stack) {
  const auto& arguments = op.schema.arguments;
  const std::string family = op.family();
  for (size_t i = 0; i < arguments.size() && i < stack.size(); ++i) {
    if (!writes(arguments[i]) || !stack[i].is<Tensor>()) continue;
    const Tensor& output = stack[i].get<Tensor>();
    if (checks_internal_overlap(family, op.schema.name)) assert_no_internal_overlap(output);
    for (size_t j = 0; j < arguments.size() && j < stack.size(); ++j) {
      InputCheck check = input_check(family, arguments[j].name);
      if (writes(arguments[j]) || check == InputCheck::None) continue;
      if (stack[j].is<Tensor>() && check == InputCheck::AnyOverlap)
        assert_no_overlap(output, stack[j].get<Tensor>());
      if (stack[j].is<Tensor>() && check == InputCheck::PartialOverlap)
        assert_no_partial_overlap(output, stack[j].get<Tensor>());
      // A list's tensors are copied into the output one by one (cat, stack, index_put_'s
      // indices): upstream refuses even one that is the output.
      if (stack[j].is<std::vector<Tensor>>())
        for (const Tensor& t : stack[j].get<std::vector<Tensor>>()) assert_no_overlap(output, t);
      if (stack[j].is<std::vector<std::optional<Tensor>>>())
        for (const auto& t : stack[j].get<std::vector<std::optional<Tensor>>>())
          if (t) assert_no_overlap(output, *t);
    }
  }
}

// The tensors a call writes (schema marks `(a!)`): their version counters move once the
// call has succeeded, as upstream's ADInplaceOrView kernels move them.
std::vector<Tensor> written_tensors(const Operator& op, const Stack& stack) {
  std::vector<Tensor> written;
  // Upstream leaves the version of a resized or detached tensor.
  if (op.schema.name == "resize_" || op.schema.name == "detach_") return written;
  const auto& arguments = op.schema.arguments;
  for (size_t i = 0; i < arguments.size() && i < stack.size(); ++i)
    if (writes(arguments[i]) && stack[i].is<Tensor>()) written.push_back(stack[i].get<Tensor>());
  return written;
}

// The functional overload's arguments, found by name in an out= overload's stack; a
// TensorOption the functional form adds (factories: zeros.out) takes the out tensor's dtype.
Stack functional_arguments(const Operator& op, const Operator& functional, const Stack& stack,
                           const std::vector<Tensor>& outs) {
  Stack args;
  for (const SchemaArgument& f : functional.schema.arguments) {
    auto it = std::find_if(op.schema.arguments.begin(), op.schema.arguments.end(),
                           [&](const SchemaArgument& a) { return a.name == f.name && !a.is_out; });
    if (it != op.schema.arguments.end())
      args.push_back(stack[size_t(it - op.schema.arguments.begin())]);
    else if (f.name == "dtype")
      args.emplace_back(int64_t(outs.at(0).dtype()));
    else
      args.emplace_back();
    // A reduction given out= and no dtype computes in the out tensor's dtype, as upstream's.
    if (f.name == "dtype" && args.back().is_none() && computes_in_out_dtype(op.family()))
      args.back() = IValue(int64_t(outs.at(0).dtype()));
  }
  return args;
}

// `t` is one of the call's tensor inputs (the very tensor, not another view of its memory).
bool is_argument(const Tensor& t, const Operator& op, const Stack& stack) {
  for (size_t i = 0; i < op.schema.arguments.size() && i < stack.size(); ++i)
    if (!op.schema.arguments[i].is_out && stack[i].is<Tensor>() && stack[i].get<Tensor>().same(t))
      return true;
  return false;
}

// The alias set a schema type reads without writing ("a" in Tensor(a)), or "".
std::string read_alias(const SchemaType& type) {
  return type.is_write() || type.alias.find("->") != std::string::npos ? std::string() : type.alias;
}

// The inputs a view operator may return views of: those with a read-only alias set, by the
// position of the return naming the same set (empty where none does).
std::vector<Tensor> viewed_tensors(const Operator& op, const Stack& stack) {
  std::vector<Tensor> viewed(op.schema.returns.size());
  for (size_t r = 0; r < op.schema.returns.size(); ++r) {
    std::string alias = read_alias(op.schema.returns[r].type);
    if (alias.empty()) continue;
    for (size_t i = 0; i < op.schema.arguments.size() && i < stack.size(); ++i)
      if (read_alias(op.schema.arguments[i].type) == alias && stack[i].is<Tensor>())
        viewed[r] = stack[i].get<Tensor>();
  }
  return viewed;
}

void mark_view(const Tensor& result, const Tensor& input) {
  if (result.same(input) || result.storage() != input.storage()) return;  // reshape may copy
  result.impl()->view_base = input.impl()->view_base ? input.impl()->view_base : input.impl_ptr();
}

// Results of view operators become views of their input (upstream's rule for Tensor._base):
// every operator returning a read-only alias of an input, but detach, whose result autograd
// does not track as a view. Any other result is no view, even when its kernel made it as a
// view of a tensor of its own (linear's reshape of its matmul): autograd records the result's
// history on the result, so an in-place write on it must not move that history to a base
// that has none (the gradients would be lost). `inputs` are the call's tensor arguments,
// which a result may be itself.
void record_views(const Operator& op, const std::vector<Tensor>& viewed, const std::vector<Tensor>& inputs,
                  const Stack& stack) {
  if (op.schema.name == "detach") return;
  auto mark = [&](const Tensor& result, const Tensor& input) {
    if (input.defined()) {
      mark_view(result, input);
    } else if (result.defined() && result.impl()->view_base &&
               std::none_of(inputs.begin(), inputs.end(), [&](const Tensor& t) { return t.same(result); })) {
      result.impl()->view_base = nullptr;
    }
  };
  for (size_t r = 0; r < viewed.size() && r < stack.size(); ++r) {
    if (stack[r].is<Tensor>()) mark(stack[r].get<Tensor>(), viewed[r]);
    if (stack[r].is<std::vector<Tensor>>())
      for (const Tensor& t : stack[r].get<std::vector<Tensor>>()) mark(t, viewed[r]);
  }
}

// The call's tensor arguments (Tensor and Tensor[]), before the kernel replaces them by results.
std::vector<Tensor> tensor_arguments(const Stack& stack) {
  std::vector<Tensor> tensors;
  for (const IValue& v : stack) {
    if (v.is<Tensor>()) tensors.push_back(v.get<Tensor>());
    if (v.is<std::vector<Tensor>>())
      for (const Tensor& t : v.get<std::vector<Tensor>>()) tensors.push_back(t);
  }
  return tensors;
}

// Shim tensors never carry dimension names, so a lookup by name fails exactly as it
// does upstream on an unnamed tensor.
void refuse_dimnames(const Operator& op, const Stack& stack) {
  int64_t ndim = -1;
  for (const IValue& v : stack)
    if (v.is<Tensor>()) {
      ndim = v.get<Tensor>().dim();
      break;
    }
  for (size_t i = 0; i < op.schema.arguments.size() && i < stack.size(); ++i) {
    if (op.schema.arguments[i].type.kind != SchemaType::Kind::Dimname || ndim < 0) continue;
    std::string name;
    if (stack[i].is<std::string>())
      name = stack[i].get<std::string>();
    else
      continue;
    std::string names;
    for (int64_t d = 0; d < ndim; ++d) names += (d ? ", None" : "None");
    throw Error("Name '" + name + "' not found in Tensor[" + names + "].");
  }
}

// ---- the meta device ----

// Whether the call's results belong on the meta device: its device argument says "meta", or
// it names no device and reads a meta tensor.
bool targets_meta(const Operator& op, const Stack& stack, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < op.schema.arguments.size() && i < stack.size(); ++i)
    if (op.schema.arguments[i].type.kind == SchemaType::Kind::Device && stack[i].is<std::string>())
      return stack[i].get<std::string>() == "meta";
  return std::any_of(inputs.begin(), inputs.end(),
                     [](const Tensor& t) { return t.defined() && t.is_meta(); });
}

// Upstream's device check for a call on meta tensors: cpu tensors only as 0-dim values. A
// factory's tensor arguments (empty_like(cpu, device="meta")) and the arguments read only for
// their shapes (copy_'s source, view_as's other, is_same_size) are exempt.
void check_same_device(const Operator& op, const std::vector<Tensor>& inputs) {
  const std::string& name = op.schema.name;
  for (const SchemaArgument& argument : op.schema.arguments)
    if (argument.type.kind == SchemaType::Kind::Device) return;
  if (op.family() == "copy" || name.ends_with("_as") || name == "is_same_size" ||
      name == "_has_compatible_shallow_copy_type")
    return;
  for (const Tensor& t : inputs)
    if (t.defined() && !t.is_meta() && t.dim() > 0)
      throw Error(
          "Expected all tensors to be on the same device, but found at least two devices, meta and cpu!");
}

const IValue* argument_named(const Operator& op, const Stack& args, const std::string& name) {
  for (size_t i = 0; i < op.schema.arguments.size() && i < args.size(); ++i)
    if (op.schema.arguments[i].name == name) return &args[i];
  return nullptr;
}

// What a factory on the meta device whose kernel fills its result (rand, randn_like, randperm
// ...) returns: an empty meta tensor of the shape and dtype the result would have. Undefined
// for any other operator.
Tensor unfilled_factory_result(const Operator& op, const Stack& args) {
  if (!argument_named(op, args, "device") || op.schema.returns.size() != 1) return Tensor();
  const IValue* dtype_argument = argument_named(op, args, "dtype");
  std::optional<ScalarType> dtype;
  if (dtype_argument && dtype_argument->is<int64_t>()) dtype = ScalarType(dtype_argument->get<int64_t>());
  const std::string meta = "meta";
  if (op.schema.name.ends_with("_like") && args.at(0).is<Tensor>())
    return ops::empty_like(args[0].get<Tensor>(), dtype, std::nullopt, meta);
  Shape size;
  if (const IValue* s = argument_named(op, args, "size"); s && s->is<std::vector<int64_t>>())
    size = s->get<std::vector<int64_t>>();
  else if (const IValue* n = argument_named(op, args, "n"); n && n->is<int64_t>())
    size = {n->get<int64_t>()};
  else
    return Tensor();
  return ops::empty(size, dtype.value_or(default_dtype()), std::nullopt, meta);
}

}  // namespace

ScalarType default_dtype() { return g_default_dtype; }

std::string Operator::family() const {
  const std::string& name = schema.name;
  bool inplace = name.size() > 1 && name.back() == '_' && name.substr(0, 2) != "__";
  return inplace ? name.substr(0, name.size() - 1) : name;
}
void set_default_dtype(ScalarType type) { g_default_dtype = type; }

Dispatcher& Dispatcher::instance() {
  static Dispatcher* dispatcher = [] {
    auto* d = new Dispatcher();  // never destroyed: Python may call in during shutdown
    d->load_builtin();
    return d;
  }();
  return *dispatcher;
}

Operator& Dispatcher::define(const Schema& schema) {
  std::string full = schema.full_name();
  if (auto it = by_full_name_.find(full); it != by_full_name_.end()) return *it->second;
  operators_.push_back(std::make_unique<Operator>());
  Operator* op = operators_.back().get();
  op->schema = schema;
  by_full_name_[full] = op;
  by_name_[schema.qualified_name()].push_back(op);
  return *op;
}

Operator* Dispatcher::find(const std::string& qualified_name, const std::string& overload) {
  auto it = by_full_name_.find(overload.empty() ? qualified_name : qualified_name + "." + overload);
  return it == by_full_name_.end() ? nullptr : it->second;
}

const std::vector<Operator*>& Dispatcher::overloads(const std::string& qualified_name) {
  static const std::vector<Operator*> none;
  auto it = by_name_.find(qualified_name);
  return it == by_name_.end() ? none : it->second;
}

void Dispatcher::impl(const std::string& full_name, Kernel kernel) {
  auto it = by_full_name_.find(full_name);
  if (it == by_full_name_.end()) throw Error("kernel registered for unknown operator " + full_name);
  it->second->kernel = std::move(kernel);
}

void Dispatcher::call(const Operator& op, Stack& stack) const {
  if (autograd::should_record(stack)) {
    autograd::call_recorded(op, stack, [&](Stack& s) { call_below_autograd(op, s); });
    return;
  }
  call_below_autograd(op, stack);
}

void Dispatcher::call_below_autograd(const Operator& op, Stack& stack) const {
  if (op.dtype_rules) check_kernel_dtype(op, *op.dtype_rules, stack);
  check_writes(op, stack);
  std::vector<Tensor> written = written_tensors(op, stack);
  std::vector<Tensor> viewed = viewed_tensors(op, stack);
  std::vector<Tensor> inputs = tensor_arguments(stack);
  if (targets_meta(op, stack, inputs))
    run_on_meta(op, stack, inputs);
  else
    run(op, stack);  // reading a meta tensor's elements throws MetaDataAccess
  for (const Tensor& t : written) t.bump_version();
  record_views(op, viewed, inputs, stack);
}

// A call whose results belong on the meta device runs its kernel as on the cpu, but with
// every storage it allocates a meta one: what computes only shapes (factories, views,
// resize_) completes, and the first read or write of an element stops it. An in-place call
// with a kernel of its own on a meta tensor then leaves it as it is (it has no values to
// write; the kernel's shape and dtype checks ran before its loops). One derived from its
// functional kernel checks the result's shape against self only after that kernel: stopped
// inside it, it is refused by name as anything else is.
void Dispatcher::run_on_meta(const Operator& op, Stack& stack, const std::vector<Tensor>& inputs) const {
  Tensor self = op.is_inplace() && op.kernel && stack.at(0).is<Tensor>() ? stack[0].get<Tensor>() : Tensor();
  check_same_device(op, inputs);
  const Stack args = stack;
  MetaAllocation allocation;
  try {
    run(op, stack);
  } catch (const MetaDataAccess&) {
    if (self.defined()) {
      if (!self.is_meta()) throw;  // a cpu tensor written from a meta one
      stack.assign(1, IValue(self));
      return;
    }
    Tensor made = unfilled_factory_result(op, args);
    if (!made.defined())
      throw MetaDataAccess("torchnative has no meta (shape-only) implementation of " + op.schema.full_name() +
                           " yet");
    stack.assign(1, IValue(made));
  }
}

void Dispatcher::run(const Operator& op, Stack& stack) const {
  if (op.kernel) {
    op.kernel(stack);
    return;
  }
  const Operator* functional = op.functional;
  if (!functional || !functional->kernel) refuse_dimnames(op, stack);
  if (!functional || !functional->kernel)
    throw NotImplemented("torchnative does not implement operator " + op.schema.full_name() +
                         " yet (schema: " + op.schema.str() + ")");
  if (op.is_inplace()) {
    Tensor self = std::get<Tensor>(stack[0].value);
    functional->kernel(stack);
    write_result(op, 0, self, std::get<Tensor>(stack[0].value), false);
    stack.assign(1, IValue(self));
    return;
  }
  run_out_variant(op, *functional, stack);
}

void Dispatcher::run_out_variant(const Operator& op, const Operator& functional, Stack& stack) const {
  std::vector<Tensor> outs;
  for (size_t i = 0; i < op.schema.arguments.size(); ++i)
    if (op.schema.arguments[i].is_out) outs.push_back(std::get<Tensor>(stack[i].value));
  Stack results = functional_arguments(op, functional, stack, outs);
  functional.kernel(results);
  if (results.size() != outs.size()) throw Error(op.schema.full_name() + ": result count mismatch");
  // Upstream's kernels resize their outputs before they read their inputs: an output that is
  // also an input and changes shape is read at its new shape (sum(x, 0, out=x) sums the
  // resized x). A composite out= overload computes first and copies its result, as here.
  bool resized_input = false;
  bool composite = op.dispatch_keys == std::vector<std::string>{"CompositeImplicitAutograd"};
  for (size_t i = 0; i < outs.size() && !composite; ++i) {
    const Shape& shape = std::get<Tensor>(results[i].value).sizes();
    if (outs[i].sizes() == shape || !is_argument(outs[i], op, stack)) continue;
    resize_output(outs[i], shape);
    resized_input = true;
  }
  if (resized_input) {
    results = functional_arguments(op, functional, stack, outs);
    functional.kernel(results);
  }
  for (size_t i = 0; i < outs.size(); ++i)
    write_result(op, i, outs[i], std::get<Tensor>(results[i].value), true);
  stack.assign(outs.begin(), outs.end());
}

void Dispatcher::link_derived_variants() {
  for (auto& [name, group] : by_name_) {
    // out= overloads: the functional overload with the same arguments, or one that
    // only adds TensorOptions (factories: zeros.out takes its dtype from `out`).
    for (Operator* op : group) {
      if (op->schema.out_count() == 0) continue;
      for (Operator* candidate : group)
        if (candidate->schema.out_count() == 0 && same_signature(op->schema, candidate->schema)) {
          op->functional = candidate;
          break;
        }
      if (op->functional) continue;
      for (Operator* candidate : group)
        if (candidate->schema.out_count() == 0 && adds_only_tensor_options(op->schema, candidate->schema)) {
          op->functional = candidate;
          break;
        }
    }
    // In-place overloads (add_.Tensor, pow_.Scalar, __iand__.Tensor): the functional
    // overload of the base name with the same arguments, whatever its overload name.
    const std::string& base = group.front()->schema.name;
    std::string functional_name;
    if (base.size() > 4 && base.substr(0, 3) == "__i" && base.substr(base.size() - 2) == "__")
      functional_name = group.front()->schema.ns + "::__" + base.substr(3);
    else if (!base.empty() && base.back() == '_' && base.substr(0, 2) != "__")
      functional_name = name.substr(0, name.size() - 1);
    else
      continue;
    for (Operator* op : group)
      for (Operator* f : overloads(functional_name))
        if (f->schema.out_count() == 0 && same_signature(op->schema, f->schema)) {
          op->functional = f;
          break;
        }
  }
}

std::vector<std::pair<std::string, Kernel>>& pending_kernels() {
  static std::vector<std::pair<std::string, Kernel>> kernels;
  return kernels;
}

KernelRegistration::KernelRegistration(const char* full_name, Kernel kernel) {
  pending_kernels().emplace_back(full_name, std::move(kernel));
}

void Dispatcher::load_builtin() {
  for (size_t i = 0; i < kSchemaTableSize; ++i) {
    const SchemaTableRow& row = kSchemaTable[i];
    Operator& op = define(parse_schema(row.schema));
    op.variants = row.variants;
    op.python_module = row.python_module;
    std::string keys = row.dispatch_keys;
    for (size_t start = 0; start < keys.size();) {
      size_t end = keys.find(',', start);
      if (end == std::string::npos) end = keys.size();
      op.dispatch_keys.push_back(keys.substr(start, end - start));
      start = end + 1;
    }
  }
  for (auto& [name, kernel] : pending_kernels()) impl(name, kernel);
  link_derived_variants();
  for (auto& op : operators_) op->dtype_rules = kernel_dtype_rules(*op);
}

// ---- typed argument access ----

namespace {
[[noreturn]] void bad_argument(size_t i, const char* expected) {
  throw TypeError("argument " + std::to_string(i) + " must be " + expected);
}
}  // namespace

const Tensor& Args::tensor(size_t i) const {
  if (!stack_[i].is<Tensor>()) bad_argument(i, "Tensor");
  return stack_[i].get<Tensor>();
}
std::optional<Tensor> Args::optional_tensor(size_t i) const {
  if (stack_[i].is_none()) return std::nullopt;
  return tensor(i);
}
Scalar Args::scalar(size_t i) const {
  const IValue& v = stack_[i];
  if (v.is<Scalar>()) return v.get<Scalar>();
  if (v.is<int64_t>()) return Scalar(v.get<int64_t>());
  if (v.is<double>()) return Scalar(v.get<double>());
  if (v.is<bool>()) return Scalar(v.get<bool>());
  if (v.is<Tensor>()) return v.get<Tensor>().item();
  bad_argument(i, "Number");
}
std::optional<Scalar> Args::optional_scalar(size_t i) const {
  if (stack_[i].is_none()) return std::nullopt;
  return scalar(i);
}
int64_t Args::integer(size_t i) const {
  const IValue& v = stack_[i];
  if (v.is<int64_t>()) return v.get<int64_t>();
  if (v.is<bool>()) return v.get<bool>();
  if (v.is<Scalar>()) return v.get<Scalar>().to_int();
  bad_argument(i, "int");
}
std::optional<int64_t> Args::optional_integer(size_t i) const {
  if (stack_[i].is_none()) return std::nullopt;
  return integer(i);
}
double Args::real(size_t i) const {
  const IValue& v = stack_[i];
  if (v.is<double>()) return v.get<double>();
  if (v.is<int64_t>()) return double(v.get<int64_t>());
  if (v.is<Scalar>()) return v.get<Scalar>().to_double();
  bad_argument(i, "float");
}
std::optional<double> Args::optional_real(size_t i) const {
  if (stack_[i].is_none()) return std::nullopt;
  return real(i);
}
bool Args::boolean(size_t i) const {
  const IValue& v = stack_[i];
  if (v.is<bool>()) return v.get<bool>();
  if (v.is<int64_t>()) return v.get<int64_t>() != 0;
  bad_argument(i, "bool");
}
std::optional<bool> Args::optional_boolean(size_t i) const {
  if (stack_[i].is_none()) return std::nullopt;
  return boolean(i);
}
std::vector<int64_t> Args::int_list(size_t i) const {
  const IValue& v = stack_[i];
  if (v.is<std::vector<int64_t>>()) return v.get<std::vector<int64_t>>();
  if (v.is<int64_t>()) return {v.get<int64_t>()};
  bad_argument(i, "tuple of ints");
}
std::optional<std::vector<int64_t>> Args::optional_int_list(size_t i) const {
  if (stack_[i].is_none()) return std::nullopt;
  return int_list(i);
}
std::vector<Tensor> Args::tensor_list(size_t i) const {
  if (!stack_[i].is<std::vector<Tensor>>()) bad_argument(i, "tuple of Tensors");
  return stack_[i].get<std::vector<Tensor>>();
}
std::vector<std::optional<Tensor>> Args::optional_tensor_list(size_t i) const {
  if (stack_[i].is<std::vector<std::optional<Tensor>>>())
    return stack_[i].get<std::vector<std::optional<Tensor>>>();
  std::vector<std::optional<Tensor>> out;
  for (const Tensor& t : tensor_list(i)) out.emplace_back(t);
  return out;
}
std::optional<std::string> Args::optional_string(size_t i) const {
  if (stack_[i].is_none()) return std::nullopt;
  if (!stack_[i].is<std::string>()) bad_argument(i, "str");
  return stack_[i].get<std::string>();
}
std::optional<ScalarType> Args::optional_dtype(size_t i) const {
  if (stack_[i].is_none()) return std::nullopt;
  return ScalarType(integer(i));
}
std::optional<MemoryFormat> Args::optional_memory_format(size_t i) const {
  if (stack_[i].is_none()) return std::nullopt;
  return MemoryFormat(integer(i));
}

Generator& Args::generator(size_t i) const {
  if (stack_[i].is<Generator*>()) return *stack_[i].get<Generator*>();
  return default_generator();
}

const StorageRef& Args::storage(size_t i) const { return stack_[i].get<StorageRef>(); }

const Operator& ops::operator_named(const char* full_name) {
  std::string name = full_name, overload;
  if (auto dot = name.find('.', name.find("::")); dot != std::string::npos) {
    overload = name.substr(dot + 1);
    name.resize(dot);
  }
  Operator* op = Dispatcher::instance().find(name, overload);
  if (!op) throw Error(std::string("internal: the typed API names an unknown operator ") + full_name);
  return *op;
}

}  // namespace tn
