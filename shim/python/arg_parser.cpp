// Python argument parsing driven by upstream's schemas: every torch.*, Tensor.* and
// torch._C._nn.* callable is a Binding over the overloads sharing its Python name.
#include <algorithm>
#include <unordered_map>

#include "python_shim.h"

namespace tn::py {

namespace {

struct Param {
  std::string name;  // Python keyword
  SchemaType type;
  int stack_index = -1;          // -1 for the out= and requires_grad parameters
  std::vector<int> out_indices;  // the schema positions an out= value fills
  bool kwarg_only = false;
  std::optional<IValue> default_value;  // nullopt when required
  bool requires_grad = false;
};

// How loosely a call may match a signature.
struct MatchRules {
  bool numbers_as_tensors = false;  // a Python number may stand for a Tensor argument
  bool accept_out_none = false;     // an overload without out= takes an explicit out=None
};

struct Signature {
  Operator* op = nullptr;
  std::vector<Param> params;
  size_t positional = 0;  // params accepting a positional argument
  int self_index = -1;    // stack slot of the bound self (methods)
  bool intlist_varargs = false;
};

}  // namespace

struct Binding {
  std::string name;
  std::vector<Signature> signatures;
  bool is_method = false;
  // Python numbers are accepted where a schema says Tensor (add, mul, to ...), as upstream's
  // bindings do; the Scalar overloads are then left out.
  bool numbers_as_tensors = false;
  // Some overload writes into `out=`: the others then accept an explicit `out=None`.
  bool has_out = false;
  // Binary dunders answer NotImplemented when no overload takes the other operand, so
  // Python tries the reflected operation (as upstream's do).
  bool not_implemented_on_mismatch = false;
  // What a __torch_function__ override receives as the function: `name` of this owner
  // (torch.Tensor for methods), and how its refusal names the owner.
  PyObject* api_owner = nullptr;
  std::string api_owner_name = "torch.Tensor";
};

void answer_not_implemented_on_mismatch(Binding* binding) { binding->not_implemented_on_mismatch = true; }

void set_torch_api(Binding* binding, PyObject* owner, const std::string& owner_name) {
  binding->api_owner = owner;
  binding->api_owner_name = owner_name;
}

namespace {

bool is_tensor_options(const Schema& schema) {
  for (const auto& a : schema.arguments)
    if (a.name == "pin_memory" && a.type.kind == SchemaType::Kind::Bool) return true;
  return false;
}

Signature make_signature(Operator* op, bool is_method) {
  Signature sig;
  sig.op = op;
  const Schema& schema = op->schema;
  Param out;
  out.name = "out";
  out.kwarg_only = true;
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    const SchemaArgument& a = schema.arguments[i];
    if (a.is_out) {
      out.type = a.type;
      out.out_indices.push_back(int(i));
      continue;
    }
    if (is_method && a.name == "self" && sig.self_index < 0) {
      sig.self_index = int(i);
      continue;
    }
    Param p;
    p.name = (!is_method && a.name == "self") ? "input" : a.name;
    p.type = a.type;
    p.stack_index = int(i);
    p.kwarg_only = a.kwarg_only;
    if (a.default_text) p.default_value = parse_default(a.type, *a.default_text);
    sig.params.push_back(std::move(p));
  }
  if (!out.out_indices.empty()) sig.params.push_back(out);
  if (is_tensor_options(schema)) {
    Param rg;
    rg.name = "requires_grad";
    rg.type.kind = SchemaType::Kind::Bool;
    rg.kwarg_only = true;
    rg.default_value = IValue(false);
    rg.requires_grad = true;
    sig.params.push_back(rg);
  }
  for (const Param& p : sig.params) sig.positional += !p.kwarg_only;
  sig.intlist_varargs = sig.positional == 1 && sig.params[0].type.list &&
                        (sig.params[0].type.kind == SchemaType::Kind::Int ||
                         sig.params[0].type.kind == SchemaType::Kind::SymInt);
  return sig;
}

}  // namespace

// ---- conversions from Python values ----

bool is_int_like(PyObject* obj) {
  if (PyBool_Check(obj)) return false;
  if (PyLong_Check(obj)) return true;
  if (is_tensor(obj)) {
    const Tensor& t = unpack(obj);
    return t.dim() == 0 && is_integral(t.dtype(), false);
  }
  // numpy integers and other __index__ providers, but not floats
  return !PyFloat_Check(obj) && PyIndex_Check(obj);
}

int64_t as_int(PyObject* obj) {
  if (is_tensor(obj)) return unpack(obj).item().to_int();
  return unpack_long(obj);
}

namespace {

// An integral tensor with one element, whatever its shape: upstream takes it as an element
// of an int list, and as a whole SymInt[] (resize_(max_size) in torch.distributed).
bool is_one_integral_element(PyObject* obj) {
  if (!is_tensor(obj)) return false;
  const Tensor& t = unpack(obj);
  return t.numel() == 1 && is_integral(t.dtype(), false);
}

bool is_int_list_item(PyObject* obj) { return is_int_like(obj) || is_one_integral_element(obj); }

bool convert_int_list(PyObject* obj, const SchemaType& type, IValue* out) {
  if (type.kind == SchemaType::Kind::SymInt && !is_int_like(obj) && is_one_integral_element(obj)) {
    out->value = std::vector<int64_t>{as_int(obj)};
    return true;
  }
  if (is_int_like(obj)) {
    // A bare int fills an int[N] (e.g. dim=0 for int[1] dim).
    if (type.fixed_size == 0) return false;
    out->value = std::vector<int64_t>(size_t(type.fixed_size), as_int(obj));
    return true;
  }
  if (!PyTuple_Check(obj) && !PyList_Check(obj)) return false;
  Ref seq(PySequence_Fast(obj, ""));
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  std::vector<int64_t> values;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
    if (!is_int_list_item(item)) return false;
    values.push_back(as_int(item));
  }
  out->value = std::move(values);
  return true;
}

// A list argument (int[], Tensor[], Tensor?[], float[], bool[], Scalar[], Dimname[]).
bool convert_list(PyObject* obj, const SchemaType& type, IValue* out) {
  using K = SchemaType::Kind;
  switch (type.kind) {
    case K::Int:
    case K::SymInt:
      return convert_int_list(obj, type, out);
    case K::Tensor: {
      if (!PyTuple_Check(obj) && !PyList_Check(obj)) return false;
      Ref seq(PySequence_Fast(obj, ""));
      Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
      if (type.element_optional) {
        std::vector<std::optional<Tensor>> items;
        for (Py_ssize_t i = 0; i < n; ++i) {
          PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
          if (item == Py_None)
            items.emplace_back();
          else if (is_tensor(item))
            items.emplace_back(unpack(item));
          else
            return false;
        }
        out->value = std::move(items);
      } else {
        std::vector<Tensor> items;
        for (Py_ssize_t i = 0; i < n; ++i) {
          PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
          if (!is_tensor(item)) return false;
          items.push_back(unpack(item));
        }
        out->value = std::move(items);
      }
      return true;
    }
    case K::Float: {
      if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
        if (!PyFloat_Check(obj) && !is_int_like(obj)) return false;
        out->value =
            std::vector<double>(size_t(std::max<int64_t>(type.fixed_size, 1)), PyFloat_AsDouble(obj));
        return true;
      }
      Ref seq(PySequence_Fast(obj, ""));
      std::vector<double> items;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
        double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq.get(), i));
        if (v == -1.0 && PyErr_Occurred()) {
          PyErr_Clear();
          return false;
        }
        items.push_back(v);
      }
      out->value = std::move(items);
      return true;
    }
    case K::Bool: {
      if (!PyTuple_Check(obj) && !PyList_Check(obj)) return false;
      Ref seq(PySequence_Fast(obj, ""));
      std::vector<bool> items;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
        PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
        if (!PyBool_Check(item)) return false;
        items.push_back(item == Py_True);
      }
      out->value = std::move(items);
      return true;
    }
    case K::Scalar: {  // Scalar[]: the foreach operators' per-tensor scalars
      if (!PyTuple_Check(obj) && !PyList_Check(obj)) return false;
      Ref seq(PySequence_Fast(obj, ""));
      Stack items;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
        Scalar item;
        if (!python_to_scalar(PySequence_Fast_GET_ITEM(seq.get(), i), &item)) return false;
        items.emplace_back(item);
      }
      out->value = std::move(items);
      return true;
    }
    case K::Dimname: {
      // Names only ever reach refuse_dimnames (shim tensors are unnamed): keep the first.
      if (PyUnicode_Check(obj) && type.fixed_size == 1) {
        out->value = std::string(PyUnicode_AsUTF8(obj));
        return true;
      }
      if (!PyTuple_Check(obj) && !PyList_Check(obj)) return false;
      Ref seq(PySequence_Fast(obj, ""));
      if (PySequence_Fast_GET_SIZE(seq.get()) == 0) return false;
      PyObject* first = PySequence_Fast_GET_ITEM(seq.get(), 0);
      if (!PyUnicode_Check(first)) return false;
      out->value = std::string(PyUnicode_AsUTF8(first));
      return true;
    }
    default:
      return false;
  }
}

bool convert(PyObject* obj, const SchemaType& type, bool allow_numbers, IValue* out) {
  using K = SchemaType::Kind;
  if (obj == Py_None) {
    if (type.optional) {
      *out = IValue();
      return true;
    }
    return false;
  }
  if (type.list) return convert_list(obj, type, out);
  Scalar scalar;
  switch (type.kind) {
    case K::Tensor:
      if (is_tensor(obj)) {
        out->value = unpack(obj);
        return true;
      }
      if (allow_numbers && !is_tensor(obj) && python_to_scalar(obj, &scalar)) {
        out->value = wrapped_number(scalar);
        return true;
      }
      return false;
    case K::Int:
    case K::SymInt:
      if (!is_int_like(obj)) return false;
      out->value = as_int(obj);
      return true;
    case K::Float:
      if (PyFloat_Check(obj) || is_int_like(obj)) {
        out->value = PyFloat_AsDouble(obj);
        return true;
      }
      // A meta tensor has no value to give: a later Tensor overload may take it (upstream
      // tries normal(Tensor, Tensor) before normal(Tensor, float)).
      if (is_tensor(obj) && unpack(obj).dim() == 0 && !unpack(obj).is_meta()) {
        out->value = unpack(obj).item().to_double();
        return true;
      }
      if (PyNumber_Check(obj) && !PyBool_Check(obj)) {
        double v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred()) {
          PyErr_Clear();
          return false;
        }
        out->value = v;
        return true;
      }
      return false;
    case K::Bool:
      if (!PyBool_Check(obj)) return false;
      out->value = obj == Py_True;
      return true;
    case K::Scalar:
      if (is_tensor(obj)) {
        const Tensor& t = unpack(obj);
        if (t.dim() != 0 || t.impl()->requires_grad) return false;
        out->value = t.item();
        return true;
      }
      if (!python_to_scalar(obj, &scalar)) return false;
      out->value = scalar;
      return true;
    case K::Str:
    case K::Dimname:
      if (!PyUnicode_Check(obj)) return false;
      out->value = std::string(PyUnicode_AsUTF8(obj));
      return true;
    case K::ScalarType:
      if (!is_dtype(obj)) return false;
      out->value = int64_t(dtype_of(obj));
      return true;
    case K::Layout:
      if (!is_layout(obj)) return false;
      out->value = int64_t{0};
      return true;
    case K::MemoryFormat:
      if (!is_memory_format(obj)) return false;
      refuse_channels_last(memory_format_of(obj));
      out->value = memory_format_of(obj);
      return true;
    case K::Device:
      if (!is_device(obj) && !PyUnicode_Check(obj) && !PyLong_Check(obj)) return false;
      out->value = std::string(device_is_meta(obj) ? "meta" : "cpu");
      return true;
    case K::Generator:
      if (!is_generator(obj)) return false;
      out->value = generator_of(obj);
      return true;
    case K::Storage: {
      StorageRef storage;
      if (!storage_argument(obj, &storage)) return false;
      out->value = std::move(storage);
      return true;
    }
    default:
      return false;
  }
}

// A keyword naming the parameter: its own name, or the NumPy spelling upstream also accepts.
bool names_parameter(const char* keyword, const std::string& name) {
  static const std::unordered_map<std::string, std::vector<std::string>> numpy_names = {
      {"dim", {"axis"}}, {"keepdim", {"keepdims"}}, {"input", {"x", "a", "x1"}}, {"other", {"x2"}}};
  if (name == keyword) return true;
  auto it = numpy_names.find(name);
  return it != numpy_names.end() &&
         std::find(it->second.begin(), it->second.end(), keyword) != it->second.end();
}

// How upstream names a parameter's type in its argument errors.
std::string python_type_name(const SchemaType& type) {
  using K = SchemaType::Kind;
  static const std::unordered_map<int, std::pair<const char*, const char*>> names = {
      {int(K::Tensor), {"Tensor", "tuple of Tensors"}},
      {int(K::Int), {"int", "tuple of ints"}},
      {int(K::SymInt), {"SymInt", "tuple of SymInts"}},
      {int(K::Float), {"float", "tuple of floats"}},
      {int(K::Bool), {"bool", "tuple of bools"}},
      {int(K::Str), {"str", "tuple of strs"}},
      {int(K::Scalar), {"Number", "tuple of Scalars"}},
      {int(K::ScalarType), {"torch.dtype", ""}},
      {int(K::Layout), {"torch.layout", ""}},
      {int(K::Device), {"torch.device", ""}},
      {int(K::MemoryFormat), {"torch.memory_format", ""}},
      {int(K::Generator), {"torch.Generator", ""}},
      {int(K::Dimname), {"name", "tuple of names"}},
      {int(K::Storage), {"torch.Storage", ""}},
      {int(K::QScheme), {"torch.qscheme", ""}}};
  auto it = names.find(int(type.kind));
  if (it == names.end()) return type.str();
  return type.list && *it->second.second ? it->second.second : it->second.first;
}

std::string plural(size_t count, const char* one, const char* many) { return count == 1 ? one : many; }

// Upstream's message for a call its only signature refuses, as its parser words each case.
struct Mismatch {
  std::string* reason = nullptr;
  const std::string* name = nullptr;
  bool set(const std::string& text) const {
    if (reason && reason->empty()) *reason = *name + text;
    return false;
  }
};

// A parameter the call must give: no default, and neither out= nor requires_grad.
bool is_required(const Param& p) { return !p.default_value && p.out_indices.empty() && !p.requires_grad; }

size_t required_count(const Signature& sig) {
  return size_t(std::count_if(sig.params.begin(), sig.params.end(), is_required));
}

bool too_many_positional(const Signature& sig, size_t nargs, const Mismatch& why) {
  size_t required = required_count(sig);
  if (required != sig.positional)
    return why.set("() takes from " + std::to_string(required) + " to " + std::to_string(sig.positional) +
                   " positional arguments but " + std::to_string(nargs) + " were given");
  return why.set("() takes " + std::to_string(sig.positional) + " positional argument" +
                 plural(sig.positional, "", "s") + " but " + std::to_string(nargs) + " " +
                 plural(nargs, "was", "were") + " given");
}

bool missing_required(const Signature& sig, size_t first, const Mismatch& why) {
  std::string names;
  size_t count = 0;
  for (size_t j = first; j < sig.params.size(); ++j) {
    if (!is_required(sig.params[j])) continue;
    names += (count++ ? ", \"" : "\"") + sig.params[j].name + "\"";
  }
  return why.set("() missing " + std::to_string(count) + " required positional argument" +
                 plural(count, "s", "") + ": " + names);  // upstream's wording: "1 ... arguments"
}

bool wrong_type(const Param& p, size_t j, bool positional, PyObject* obj, const Mismatch& why) {
  std::string where = positional ? " (position " + std::to_string(j + 1) + ")" : "";
  std::string expected = p.requires_grad         ? "bool"
                         : p.out_indices.empty() ? python_type_name(p.type)
                                                 : "Tensor";
  return why.set("(): argument '" + p.name + "'" + where + " must be " + expected + ", not " +
                 (is_tensor(obj) ? "Tensor" : Py_TYPE(obj)->tp_name));
}

// Tries one signature; true and a filled stack when the call matches it (else `why` gets
// upstream's wording of the refusal).
bool try_signature(const Signature& sig, MatchRules rules, PyObject* self, PyObject* const* args,
                   size_t nargs, PyObject* kwnames, Stack& stack, bool* requires_grad,
                   const Mismatch& why = {}) {
  const Schema& schema = sig.op->schema;
  std::vector<PyObject*> given(sig.params.size(), nullptr);
  Ref varargs;
  if (sig.intlist_varargs && nargs >= 1 && is_int_list_item(args[0])) {
    varargs = Ref(PyTuple_New(Py_ssize_t(nargs)));
    for (size_t i = 0; i < nargs; ++i) {
      Py_INCREF(args[i]);
      PyTuple_SET_ITEM(varargs.get(), Py_ssize_t(i), args[i]);
    }
    given[0] = varargs.get();
  } else {
    if (nargs > sig.positional) return too_many_positional(sig, nargs, why);
    for (size_t i = 0; i < nargs; ++i) given[i] = args[i];
  }
  if (kwnames) {
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nk; ++k) {
      const char* key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
      size_t j = 0;
      while (j < sig.params.size() && !names_parameter(key, sig.params[j].name)) ++j;
      PyObject* value = args[nargs + size_t(k)];
      if (j == sig.params.size() && rules.accept_out_none && value == Py_None && std::string(key) == "out")
        continue;  // out=None: this overload returns a new tensor
      if (j == sig.params.size())
        return why.set("() got an unexpected keyword argument '" + std::string(key) + "'");
      if (given[j]) return why.set("() got multiple values for argument '" + std::string(key) + "'");
      given[j] = args[nargs + size_t(k)];
    }
  }
  stack.assign(schema.arguments.size(), IValue());
  if (sig.self_index >= 0) stack[size_t(sig.self_index)] = unpack(self);
  for (size_t j = 0; j < sig.params.size(); ++j) {
    const Param& p = sig.params[j];
    PyObject* obj = given[j];
    bool positional = j < nargs && !varargs;
    if (p.requires_grad) {
      if (obj && !PyBool_Check(obj)) return wrong_type(p, j, positional, obj, why);
      *requires_grad = obj == Py_True;
      continue;
    }
    if (!p.out_indices.empty()) {
      if (!obj || obj == Py_None) return false;  // the functional overload takes out=None
      if (p.out_indices.size() == 1) {
        if (!is_tensor(obj)) return wrong_type(p, j, positional, obj, why);
        stack[size_t(p.out_indices[0])] = unpack(obj);
      } else {
        if (!PyTuple_Check(obj) && !PyList_Check(obj)) return false;
        if (PySequence_Size(obj) != Py_ssize_t(p.out_indices.size())) return false;
        for (size_t k = 0; k < p.out_indices.size(); ++k) {
          Ref item(PySequence_GetItem(obj, Py_ssize_t(k)));
          if (!is_tensor(item.get())) return false;
          stack[size_t(p.out_indices[k])] = unpack(item.get());
        }
      }
      continue;
    }
    if (!obj) {
      if (!p.default_value) return missing_required(sig, j, why);
      stack[size_t(p.stack_index)] = *p.default_value;
      continue;
    }
    if (!convert(obj, p.type, rules.numbers_as_tensors, &stack[size_t(p.stack_index)]))
      return wrong_type(p, j, positional, obj, why);
  }
  return true;
}

std::string describe_call(PyObject* const* args, size_t nargs, PyObject* kwnames) {
  std::string s = "(";
  size_t total = nargs + (kwnames ? size_t(PyTuple_GET_SIZE(kwnames)) : 0);
  for (size_t i = 0; i < total; ++i) {
    if (i) s += ", ";
    if (i >= nargs)
      s += std::string(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, Py_ssize_t(i - nargs)))) + "=";
    s += is_tensor(args[i]) ? "Tensor" : Py_TYPE(args[i])->tp_name;
  }
  return s + ")";
}

std::string describe_signature(const Signature& sig, const std::string& name) {
  std::string s = " * " + name + "(";
  bool kw = false;
  for (size_t j = 0; j < sig.params.size(); ++j) {
    const Param& p = sig.params[j];
    if (j) s += ", ";
    if (p.kwarg_only && !kw) {
      s += "*, ";
      kw = true;
    }
    s += (p.requires_grad ? std::string("bool") : p.type.str()) + " " + p.name;
  }
  return s + ")\n";
}

std::unordered_map<std::string, PyObject*>& return_types() {
  static std::unordered_map<std::string, PyObject*> types;
  return types;
}

// torch.return_types.<name>: a structseq with the schema's return names.
PyObject* return_type_for(const Operator& op) {
  std::string name = op.schema.name;
  if (op.schema.out_count() > 0) name += "_out";
  auto& types = return_types();
  if (auto it = types.find(name); it != types.end()) return it->second;
  const auto& returns = op.schema.returns;
  auto* fields = new PyStructSequence_Field[returns.size() + 1];
  for (size_t i = 0; i < returns.size(); ++i) fields[i] = {strdup(returns[i].name.c_str()), nullptr};
  fields[returns.size()] = {nullptr, nullptr};
  std::string qualified = "torch.return_types." + name;
  auto* desc = new PyStructSequence_Desc{strdup(qualified.c_str()), nullptr, fields, int(returns.size())};
  PyObject* type = reinterpret_cast<PyObject*>(PyStructSequence_NewType(desc));
  if (!type) throw PythonErrorSet();
  types[name] = type;
  return type;
}

PyObject* ivalue_to_python(const IValue& v) {
  return std::visit(
      [](const auto& x) -> PyObject* {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, IValue::None>) {
          Py_RETURN_NONE;
        } else if constexpr (std::is_same_v<T, Tensor>) {
          return wrap(x);
        } else if constexpr (std::is_same_v<T, double>) {
          return PyFloat_FromDouble(x);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return PyLong_FromLongLong(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          return PyBool_FromLong(x);
        } else if constexpr (std::is_same_v<T, Scalar>) {
          return scalar_to_python(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return PyUnicode_FromString(x.c_str());
        } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
          PyObject* tuple = PyTuple_New(Py_ssize_t(x.size()));
          for (size_t i = 0; i < x.size(); ++i) PyTuple_SET_ITEM(tuple, Py_ssize_t(i), wrap(x[i]));
          return tuple;
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          PyObject* list = PyList_New(Py_ssize_t(x.size()));
          for (size_t i = 0; i < x.size(); ++i)
            PyList_SET_ITEM(list, Py_ssize_t(i), PyLong_FromLongLong(x[i]));
          return list;
        } else if constexpr (std::is_same_v<T, Stack>) {
          PyObject* tuple = PyTuple_New(Py_ssize_t(x.size()));
          for (size_t i = 0; i < x.size(); ++i)
            PyTuple_SET_ITEM(tuple, Py_ssize_t(i), ivalue_to_python(x[i]));
          return tuple;
        } else {
          PyErr_SetString(PyExc_RuntimeError, "torchnative: unsupported return value type");
          throw PythonErrorSet();
        }
      },
      v.value);
}

const std::unordered_map<std::string, bool>& numbers_as_tensors() {
  // Upstream lets these accept a Python number where the schema says Tensor.
  static const std::unordered_map<std::string, bool> names = [] {
    std::unordered_map<std::string, bool> m;
    for (const char* base :
         {"add", "div", "divide", "mul", "multiply", "sub", "subtract", "true_divide", "floor_divide"}) {
      m[base] = true;
      m[std::string(base) + "_"] = true;
    }
    for (const char* name : {"to", "_to_copy", "copy_"}) m[name] = true;
    return m;
  }();
  return names;
}

}  // namespace

// A return value as Python sees it: ScalarType returns travel as ints but are dtypes.
PyObject* return_to_python(const SchemaArgument& declared, const IValue& value) {
  if (declared.type.kind == SchemaType::Kind::ScalarType && value.is<int64_t>()) {
    PyObject* dtype = dtype_object(ScalarType(value.get<int64_t>()));
    Py_INCREF(dtype);
    return dtype;
  }
  return ivalue_to_python(value);
}

PyObject* returns_to_python(const Operator& op, Stack& stack) {
  const auto& returns = op.schema.returns;
  if (returns.empty()) Py_RETURN_NONE;
  if (returns.size() == 1) return return_to_python(returns[0], stack.at(0));
  bool named =
      std::all_of(returns.begin(), returns.end(), [](const SchemaArgument& r) { return !r.name.empty(); });
  if (named) {
    PyObject* result = PyStructSequence_New(reinterpret_cast<PyTypeObject*>(return_type_for(op)));
    for (size_t i = 0; i < returns.size(); ++i)
      PyStructSequence_SET_ITEM(result, Py_ssize_t(i), return_to_python(returns[i], stack.at(i)));
    return result;
  }
  PyObject* tuple = PyTuple_New(Py_ssize_t(returns.size()));
  for (size_t i = 0; i < returns.size(); ++i)
    PyTuple_SET_ITEM(tuple, Py_ssize_t(i), return_to_python(returns[i], stack.at(i)));
  return tuple;
}

Binding* make_binding(const std::string& python_name, const std::vector<Operator*>& ops, bool is_method,
                      bool allow_numbers_as_tensors) {
  auto* binding = new Binding();  // lives as long as the interpreter
  binding->name = python_name;
  binding->is_method = is_method;
  binding->numbers_as_tensors = allow_numbers_as_tensors || numbers_as_tensors().count(python_name);
  for (Operator* op : ops) {
    if (binding->numbers_as_tensors && op->schema.overload.find("Scalar") != std::string::npos) continue;
    binding->signatures.push_back(make_signature(op, is_method));
    binding->has_out |= op->schema.out_count() > 0;
  }
  // Tensor overloads before Scalar ones, as upstream orders them: a 0-dim tensor
  // argument then reaches the Tensor overload.
  auto scalar_count = [](const Signature& s) {
    int n = 0;
    for (const Param& p : s.params) n += p.type.kind == SchemaType::Kind::Scalar;
    return n;
  };
  std::stable_sort(binding->signatures.begin(), binding->signatures.end(),
                   [&](const Signature& a, const Signature& b) { return scalar_count(a) < scalar_count(b); });
  return binding;
}

// Whether a call of `count` arguments could be meant for the signature (upstream's test
// before it words a refusal for one signature): at least its required parameters, at most
// all of them, out= included (upstream counts a functional overload and its out= twin as one).
bool plausible(const Signature& sig, size_t count) {
  size_t required = required_count(sig);
  bool has_out = std::any_of(sig.params.begin(), sig.params.end(),
                             [](const Param& p) { return !p.out_indices.empty(); });
  return count >= required && count <= sig.params.size() + !has_out;
}

// The one signature a refused call was plausibly meant for, or null: the out= twin when the
// call passes out.
const Signature* only_signature(const Binding& binding, PyObject* const* args, size_t nargs,
                                PyObject* kwnames) {
  size_t keywords = kwnames ? size_t(PyTuple_GET_SIZE(kwnames)) : 0;
  bool passes_out = false;
  for (size_t k = 0; k < keywords; ++k)
    passes_out |= std::string(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, Py_ssize_t(k)))) == "out" &&
                  args[nargs + k] != Py_None;
  auto in_binding = [&](const Operator* op) {
    return std::any_of(binding.signatures.begin(), binding.signatures.end(),
                       [&](const Signature& other) { return other.op == op; });
  };
  auto has_twin = [&](const Signature& sig) {
    return std::any_of(binding.signatures.begin(), binding.signatures.end(),
                       [&](const Signature& other) { return other.op->functional == sig.op; });
  };
  std::vector<const Signature*> candidates;
  for (const Signature& sig : binding.signatures) {
    bool twin = sig.op->schema.out_count() > 0 && in_binding(sig.op->functional);
    // A functional overload and its out= twin are one signature: the twin answers for a call passing out.
    if ((twin && !passes_out) || (!twin && passes_out && has_twin(sig))) continue;
    candidates.push_back(&sig);
  }
  // Upstream words the refusal of its only signature; of several, of the one plausible one.
  if (candidates.size() == 1) return candidates[0];
  const Signature* found = nullptr;
  for (const Signature* sig : candidates) {
    if (!plausible(*sig, nargs + keywords)) continue;
    if (found) return nullptr;
    found = sig;
  }
  return found;
}

namespace {

PyObject* call_torch_function(const Binding& binding, const std::vector<PyObject*>& overloaded,
                              PyObject* self, PyObject* const* args, size_t nargs, PyObject* kwnames) {
  Ref api(binding.api_owner ? PyObject_GetAttrString(binding.api_owner, binding.name.c_str())
                            : tensor_method(binding.name.c_str()));
  if (!api) return nullptr;
  return handle_torch_function(overloaded, api.get(), binding.api_owner_name + "." + binding.name, self, args,
                               nargs, kwnames);
}

}  // namespace

PyObject* call_binding(Binding* binding, PyObject* self, PyObject* const* args, size_t nargs,
                       PyObject* kwnames) {
  TN_PY_TRY
  if (std::vector<PyObject*> overloaded = overloaded_arguments(self, args, nargs, kwnames);
      !overloaded.empty())
    return call_torch_function(*binding, overloaded, self, args, nargs, kwnames);
  Stack stack;
  for (const Signature& sig : binding->signatures) {
    bool requires_grad = false;
    if (!try_signature(sig, {binding->numbers_as_tensors, binding->has_out}, self, args, nargs, kwnames,
                       stack, &requires_grad)) {
      if (PyErr_Occurred()) return nullptr;
      continue;
    }
    { Dispatcher::instance().call(*sig.op, stack); }
    if (requires_grad && !stack.empty() && stack[0].is<Tensor>())
      stack[0].get<Tensor>().impl()->requires_grad = true;
    return returns_to_python(*sig.op, stack);
  }
  if (binding->not_implemented_on_mismatch) Py_RETURN_NOTIMPLEMENTED;
  const std::string& name = binding->name;
  bool takes_nothing = std::all_of(binding->signatures.begin(), binding->signatures.end(),
                                   [](const Signature& sig) { return sig.params.empty(); });
  if (binding->is_method && takes_nothing) {
    // Upstream binds such a method without arguments: CPython's refusal, in its words.
    if (nargs)
      PyErr_Format(PyExc_TypeError, "_TensorBase.%s() takes no arguments (%zu given)", name.c_str(), nargs);
    else
      PyErr_Format(PyExc_TypeError, "_TensorBase.%s() takes no keyword arguments", name.c_str());
    return nullptr;
  }
  if (const Signature* only = only_signature(*binding, args, nargs, kwnames)) {
    std::string reason;
    bool requires_grad = false;
    try_signature(*only, {binding->numbers_as_tensors, binding->has_out}, self, args, nargs, kwnames, stack,
                  &requires_grad, {&reason, &name});
    if (PyErr_Occurred()) return nullptr;
    if (!reason.empty()) {
      PyErr_SetString(PyExc_TypeError, reason.c_str());
      return nullptr;
    }
  }
  std::string message = name + "() received an invalid combination of arguments - got " +
                        describe_call(args, nargs, kwnames) + ", but expected one of:\n";
  for (const Signature& sig : binding->signatures) message += describe_signature(sig, name);
  PyErr_SetString(PyExc_TypeError, message.c_str());
  return nullptr;
  TN_PY_CATCH(nullptr)
}

namespace {

// A torch.ops signature: schema names, self not renamed, no sorting.
const Signature& schema_signature(const Operator& op) {
  static std::unordered_map<const Operator*, Signature> cache;
  auto it = cache.find(&op);
  if (it != cache.end()) return it->second;
  Signature sig;
  sig.op = const_cast<Operator*>(&op);
  for (size_t i = 0; i < op.schema.arguments.size(); ++i) {
    const SchemaArgument& a = op.schema.arguments[i];
    Param p;
    p.name = a.name;
    p.type = a.type;
    p.stack_index = int(i);
    p.kwarg_only = a.kwarg_only;
    if (a.default_text) p.default_value = parse_default(a.type, *a.default_text);
    sig.params.push_back(p);
    sig.positional += !a.kwarg_only;
  }
  return cache.emplace(&op, std::move(sig)).first->second;
}

// Positional then keyword values in one array, with the keywords' names, as vectorcall lays them out.
struct FlatCall {
  std::vector<PyObject*> values;
  size_t nargs = 0;
  Ref kwnames;
};

FlatCall flatten_call(PyObject* args, PyObject* kwargs) {
  FlatCall call;
  call.nargs = size_t(PyTuple_GET_SIZE(args));
  for (size_t i = 0; i < call.nargs; ++i) call.values.push_back(PyTuple_GET_ITEM(args, Py_ssize_t(i)));
  if (kwargs && PyDict_Size(kwargs) > 0) {
    call.kwnames = Ref(PyTuple_New(PyDict_Size(kwargs)));
    PyObject *key, *value;
    Py_ssize_t pos = 0, k = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      Py_INCREF(key);
      PyTuple_SET_ITEM(call.kwnames.get(), k++, key);
      call.values.push_back(value);
    }
  }
  return call;
}

}  // namespace

bool bind_operator_call(const Operator& op, PyObject* args, PyObject* kwargs, Stack& stack) {
  FlatCall call = flatten_call(args, kwargs);
  bool requires_grad = false;
  return try_signature(schema_signature(op), {true, false}, nullptr, call.values.data(), call.nargs,
                       call.kwnames.get(), stack, &requires_grad);
}

PyObject* run_bound_operator(const Operator& op, Stack& stack) {
  TN_PY_TRY
  Dispatcher::instance().call(op, stack);
  return returns_to_python(op, stack);
  TN_PY_CATCH(nullptr)
}

PyObject* call_operator_boxed(const Operator& op, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  Stack stack;
  if (bind_operator_call(op, args, kwargs, stack)) return run_bound_operator(op, stack);
  if (PyErr_Occurred()) return nullptr;
  FlatCall call = flatten_call(args, kwargs);
  PyErr_SetString(PyExc_RuntimeError,
                  (op.schema.full_name() + "() expected arguments matching " + op.schema.str() + " but got " +
                   describe_call(call.values.data(), call.nargs, call.kwnames.get()))
                      .c_str());
  return nullptr;
  TN_PY_CATCH(nullptr)
}

// Exposes every structseq return type under torch._C._return_types.
void fill_return_types(PyObject* module) {
  for (const auto& op : Dispatcher::instance().all()) {
    const auto& returns = op->schema.returns;
    if (returns.size() < 2 || op->schema.ns != "aten" || op->schema.name[0] == '_') continue;
    if (!std::all_of(returns.begin(), returns.end(), [](const SchemaArgument& r) { return !r.name.empty(); }))
      continue;
    PyObject* type = return_type_for(*op);
    std::string name = op->schema.name + (op->schema.out_count() ? "_out" : "");
    Py_INCREF(type);
    PyModule_AddObject(module, name.c_str(), type);
  }
}

}  // namespace tn::py
