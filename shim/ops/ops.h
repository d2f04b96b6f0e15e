// Operators of the shim: schemas, boxed values and the single door every operator
// call passes, keyed by upstream's operator name and overload ("aten::add.Tensor").
// This layer knows tensors but nothing of Python.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "random.h"

namespace tn {

// Enum-valued arguments travel as ints, with upstream's numbering.
enum class MemoryFormat : int64_t { Contiguous = 0, Preserve = 1, ChannelsLast = 2, ChannelsLast3d = 3 };

struct IValue;
using Stack = std::vector<IValue>;

// A Storage argument (set_): the bytes, and the dtype when Python passed a TypedStorage,
// which must then match the tensor's.
struct StorageRef {
  std::shared_ptr<Storage> storage;
  std::optional<ScalarType> typed_as;
};

// A boxed argument or return value.
struct IValue {
  struct None {};
  using Storage = std::variant<None, Tensor, double, int64_t, bool, Scalar, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<bool>, std::vector<Tensor>,
                               std::vector<std::optional<Tensor>>, Stack, Generator*, StorageRef>;
  Storage value;

  IValue() = default;
  IValue(Tensor t) : value(std::move(t)) {}                              // NOLINT
  IValue(double d) : value(d) {}                                         // NOLINT
  IValue(int64_t i) : value(i) {}                                        // NOLINT
  IValue(bool b) : value(b) {}                                           // NOLINT
  IValue(Scalar s) : value(s) {}                                         // NOLINT
  IValue(std::string s) : value(std::move(s)) {}                         // NOLINT
  IValue(std::vector<int64_t> v) : value(std::move(v)) {}                // NOLINT
  IValue(std::vector<double> v) : value(std::move(v)) {}                 // NOLINT
  IValue(std::vector<bool> v) : value(std::move(v)) {}                   // NOLINT
  IValue(std::vector<Tensor> v) : value(std::move(v)) {}                 // NOLINT
  IValue(std::vector<std::optional<Tensor>> v) : value(std::move(v)) {}  // NOLINT
  IValue(Generator* g) : value(g) {}                                     // NOLINT
  IValue(StorageRef s) : value(std::move(s)) {}                          // NOLINT
  static IValue tuple(Stack items) {
    IValue v;
    v.value = std::move(items);
    return v;
  }

  bool is_none() const { return std::holds_alternative<None>(value); }
  template <typename T>
  bool is() const {
    return std::holds_alternative<T>(value);
  }
  template <typename T>
  const T& get() const {
    return std::get<T>(value);
  }
};

// One parsed type of a schema argument: "Tensor(a!)", "int[1]?", "Tensor?[]" ...
struct SchemaType {
  enum class Kind : uint8_t {
    Tensor,
    Int,
    SymInt,
    Float,
    Bool,
    Str,
    Scalar,
    ScalarType,
    Layout,
    Device,
    MemoryFormat,
    Generator,
    Dimname,
    Storage,
    Stream,
    QScheme,
    Other
  };
  Kind kind = Kind::Other;
  std::string base;               // spelled name, e.g. "SymInt"
  bool optional = false;          // trailing '?'
  bool list = false;              // '[]' or '[N]'
  int64_t fixed_size = 0;         // N in '[N]', 0 when unsized
  bool element_optional = false;  // "Tensor?[]"
  std::string alias;              // "a", "a!", "a -> *"
  bool is_write() const { return alias.find('!') != std::string::npos; }
  std::string str() const;
};

struct SchemaArgument {
  std::string name;
  SchemaType type;
  std::optional<std::string> default_text;  // as spelled in the schema
  bool kwarg_only = false;
  bool is_out = false;  // a written keyword-only tensor: part of an out= overload
};

struct Schema {
  std::string ns;        // "aten"
  std::string name;      // "add"
  std::string overload;  // "Tensor", "" for the default overload
  std::vector<SchemaArgument> arguments;
  std::vector<SchemaArgument> returns;
  bool is_vararg = false;
  std::string qualified_name() const { return ns + "::" + name; }
  std::string full_name() const { return qualified_name() + (overload.empty() ? "" : "." + overload); }
  std::string str() const;  // canonical text, as in native_functions.yaml
  size_t out_count() const;
};

Schema parse_schema(const std::string& text, const std::string& default_ns = "aten");
// Converts a schema default ("1", "[0,1]", "None", "contiguous_format", "Mean") to a value.
IValue parse_default(const SchemaType& type, const std::string& text);

// A kernel pops its arguments (schema order, defaults already filled) and pushes its returns.
using Kernel = std::function<void(Stack&)>;

struct KernelDtypeRule;

struct Operator {
  Schema schema;
  Kernel kernel;                           // empty when we lack this operator
  std::vector<std::string> dispatch_keys;  // upstream's registration keys, from the yaml
  unsigned variants = 0;                   // bit 0: function, bit 1: method
  std::string python_module;               // "", "nn", "linalg", "special", "fft", ...
  // For in-place and out= overloads: the functional overload they are derived from.
  const Operator* functional = nullptr;
  // The dtypes upstream's kernel lacks (kernel_dtypes.h), nullptr when it has them all.
  const std::vector<KernelDtypeRule>* dtype_rules = nullptr;
  bool is_inplace() const { return !schema.name.empty() && schema.name.back() == '_'; }
  // "add" for add.Tensor, add_.Scalar and add.out.
  std::string family() const;
};

class Dispatcher {
 public:
  static Dispatcher& instance();

  // Registers a schema; existing schemas are kept (returns the existing one).
  Operator& define(const Schema& schema);
  Operator* find(const std::string& qualified_name, const std::string& overload);
  const std::vector<Operator*>& overloads(const std::string& qualified_name);
  const std::vector<std::unique_ptr<Operator>>& all() const { return operators_; }
  void impl(const std::string& full_name, Kernel kernel);

  // The door: checks the call's writes, runs the operator (or refuses by name when we lack
  // it) and moves the version counters of the tensors it wrote.
  // With grad mode on and an input that requires grad, the call is recorded (autograd.h).
  void call(const Operator& op, Stack& stack) const;

  // Loads upstream's schema table (generated from native_functions.yaml) and our kernels.
  void load_builtin();

 private:
  void call_below_autograd(const Operator& op, Stack& stack) const;
  void run_on_meta(const Operator& op, Stack& stack, const std::vector<Tensor>& inputs) const;
  void run(const Operator& op, Stack& stack) const;
  void run_out_variant(const Operator& op, const Operator& functional, Stack& stack) const;
  void link_derived_variants();
  std::vector<std::unique_ptr<Operator>> operators_;
  std::unordered_map<std::string, Operator*> by_full_name_;
  std::unordered_map<std::string, std::vector<Operator*>> by_name_;
};

// Typed access to a kernel's boxed arguments.
class Args {
 public:
  explicit Args(Stack& stack) : stack_(stack) {}
  const IValue& operator[](size_t i) const { return stack_[i]; }
  size_t size() const { return stack_.size(); }
  const Tensor& tensor(size_t i) const;
  std::optional<Tensor> optional_tensor(size_t i) const;
  Scalar scalar(size_t i) const;
  std::optional<Scalar> optional_scalar(size_t i) const;
  int64_t integer(size_t i) const;
  std::optional<int64_t> optional_integer(size_t i) const;
  double real(size_t i) const;
  std::optional<double> optional_real(size_t i) const;
  bool boolean(size_t i) const;
  std::optional<bool> optional_boolean(size_t i) const;
  std::vector<int64_t> int_list(size_t i) const;
  std::optional<std::vector<int64_t>> optional_int_list(size_t i) const;
  std::vector<Tensor> tensor_list(size_t i) const;
  std::vector<std::optional<Tensor>> optional_tensor_list(size_t i) const;
  std::optional<std::string> optional_string(size_t i) const;
  std::optional<ScalarType> optional_dtype(size_t i) const;
  std::optional<MemoryFormat> optional_memory_format(size_t i) const;
  Generator& generator(size_t i) const;  // the default generator when None
  const StorageRef& storage(size_t i) const;

 private:
  Stack& stack_;
};

// Registers kernels at static-initialization time from each kernel file.
struct KernelRegistration {
  KernelRegistration(const char* full_name, Kernel kernel);
};
std::vector<std::pair<std::string, Kernel>>& pending_kernels();

// Shorthand: a kernel body receives `Args a` and returns one value to push.
#define TN_CONCAT_INNER(a, b) a##b
#define TN_CONCAT(a, b) TN_CONCAT_INNER(a, b)
#define TN_KERNEL(NAME, ...)                                                                         \
  static ::tn::KernelRegistration TN_CONCAT(kernel_registration_, __COUNTER__)(                      \
      NAME, [](::tn::Stack& stack) {                                                                 \
        ::tn::IValue result = [&]([[maybe_unused]] const ::tn::Args& a) -> ::tn::IValue __VA_ARGS__( \
                                                                            ::tn::Args(stack));      \
        stack.clear();                                                                               \
        if (result.is<::tn::Stack>()) {                                                              \
          for (auto& item : std::get<::tn::Stack>(result.value)) stack.push_back(item);              \
        } else {                                                                                     \
          stack.push_back(std::move(result));                                                        \
        }                                                                                            \
      })

// Default dtype for floating results of integer inputs (torch.get_default_dtype()).
ScalarType default_dtype();
void set_default_dtype(ScalarType type);

}  // namespace tn
