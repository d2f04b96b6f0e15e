// The dispatcher as torch.ops and torch.library see it: operator lookup by qualified
// name, FunctionSchema objects, dispatch-key queries and Python-defined operators.
#include <map>
#include <set>

#include "python_shim.h"
// After Python.h, which it needs.
#include <structmember.h>

namespace tn::py {

namespace {

PyObject* function_schema_class = nullptr;
PyObject* argument_class = nullptr;
PyObject* library_class = nullptr;
PyObject* dispatch_key_enum = nullptr;

// Python kernels registered through torch.library, by (operator, dispatch key).
// Never destroyed: its references must not be released after the interpreter finalizes.
std::map<std::pair<std::string, std::string>, Ref>& python_kernels() {
  static auto* kernels = new std::map<std::pair<std::string, std::string>, Ref>();
  return *kernels;
}

// ---- TorchScript type objects for schema arguments (FunctionSchema.arguments[i].type) ----
// Instances of the stub classes TensorType, ListType, OptionalType, ... carrying their
// spelling and contained types; plain Tensor is one singleton, as upstream's is.
PyObject* torch_c_module = nullptr;
PyObject* tensor_jit_type = nullptr;

PyObject* new_jit_type(const char* class_name, const std::string& text, std::vector<Ref> contained) {
  Ref cls(PyObject_GetAttrString(torch_c_module, class_name));
  if (!cls) throw PythonErrorSet();
  Ref obj(PyObject_CallNoArgs(cls.get()));
  if (!obj) throw PythonErrorSet();
  Ref items(PyList_New(0));
  for (const Ref& c : contained) PyList_Append(items.get(), c.get());
  PyObject_SetAttrString(obj.get(), "_contained", items.get());
  PyObject_SetAttrString(obj.get(), "_text", Ref(PyUnicode_FromString(text.c_str())).get());
  return obj.release();
}

PyObject* jit_type(const SchemaType& t) {
  using K = SchemaType::Kind;
  if (t.optional) {
    SchemaType inner = t;
    inner.optional = false;
    inner.alias.clear();
    return new_jit_type("OptionalType", inner.str() + "?", {Ref(jit_type(inner))});
  }
  if (t.list) {
    SchemaType element = t;
    element.list = false;
    element.fixed_size = 0;
    element.alias.clear();
    element.optional = t.element_optional;
    element.element_optional = false;
    return new_jit_type("ListType", element.str() + "[]", {Ref(jit_type(element))});
  }
  switch (t.kind) {
    case K::Tensor:
      Py_INCREF(tensor_jit_type);
      return tensor_jit_type;
    case K::Int:
      return new_jit_type("IntType", "int", {});
    case K::SymInt:
      return new_jit_type("IntType", "SymInt", {});  // the stubs have no SymIntType
    case K::Float:
      return new_jit_type("FloatType", "float", {});
    case K::Bool:
      return new_jit_type("BoolType", "bool", {});
    case K::Str:
      return new_jit_type("StringType", "str", {});
    case K::Scalar:
      return new_jit_type("NumberType", "Scalar", {});
    case K::Device:
      return new_jit_type("DeviceObjType", "Device", {});
    case K::ScalarType:
    case K::Layout:
    case K::MemoryFormat:
      return new_jit_type("IntType", t.base, {});
    default:
      return new_jit_type("AnyType", t.base, {});
  }
}

// Installed as plain functions on the classes: the instance arrives as the first argument.
PyObject* jit_type_contained(PyObject*, PyObject* self) { return PyObject_GetAttrString(self, "_contained"); }
PyObject* jit_type_str(PyObject*, PyObject* self) { return PyObject_GetAttrString(self, "_text"); }
PyObject* jit_type_is_subtype_of(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "isSubtypeOf(other) takes one argument");
    return nullptr;
  }
  PyObject* self = args[0];
  PyObject* other = args[1];
  if (self == other) Py_RETURN_TRUE;
  // T <: Optional[T]; otherwise equal spelling of the same kind.
  Ref other_name(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(other)), "__name__"));
  if (PyUnicode_CompareWithASCIIString(other_name.get(), "OptionalType") == 0) {
    Ref contained(PyObject_GetAttrString(other, "_contained"));
    if (contained && PyList_GET_SIZE(contained.get()) == 1) {
      PyObject* inner = PyList_GET_ITEM(contained.get(), 0);
      PyObject* call_args[2] = {self, inner};
      return jit_type_is_subtype_of(nullptr, call_args, 2);
    }
  }
  if (Py_TYPE(self) != Py_TYPE(other)) Py_RETURN_FALSE;
  Ref a(PyObject_GetAttrString(self, "_text")), b(PyObject_GetAttrString(other, "_text"));
  return PyBool_FromLong(a && b && PyUnicode_Compare(a.get(), b.get()) == 0);
}
PyObject* tensor_type_get(PyObject*, PyObject*) {
  Py_INCREF(tensor_jit_type);
  return tensor_jit_type;
}

PyMethodDef jit_type_methods[] = {
    {"containedTypes", jit_type_contained, METH_O, nullptr},
    {"__str__", jit_type_str, METH_O, nullptr},
    {"__repr__", jit_type_str, METH_O, nullptr},
    {"annotation_str", jit_type_str, METH_O, nullptr},
    {"isSubtypeOf", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(jit_type_is_subtype_of)),
     METH_FASTCALL, nullptr},
    {nullptr, nullptr, 0, nullptr},
};
PyMethodDef tensor_type_get_def = {"get", tensor_type_get, METH_NOARGS, nullptr};

Operator* lookup(const std::string& name_with_overload) {
  std::string name = name_with_overload, overload;
  auto dot = name.find('.', name.find("::") + 2);
  if (dot != std::string::npos) {
    overload = name.substr(dot + 1);
    name = name.substr(0, dot);
  }
  if (name.find("::") == std::string::npos) name = "aten::" + name;
  return Dispatcher::instance().find(name, overload);
}

// An operator as a Python callable: boxed call with schema argument names.
struct OpObject {
  PyObject_HEAD Operator* op;  // null for an overload packet: resolves by trying each overload
  PyObject* name;
  PyObject* dict;
};
PyTypeObject* op_type = nullptr;

PyObject* op_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* o = reinterpret_cast<OpObject*>(self);
  if (o->op) return call_operator_boxed(*o->op, args, kwargs);
  // Packet: the first overload whose schema accepts the arguments.
  TN_PY_TRY
  std::string name = PyUnicode_AsUTF8(o->name);
  for (Operator* op : Dispatcher::instance().overloads(name)) {
    Stack stack;
    if (bind_operator_call(*op, args, kwargs, stack)) return run_bound_operator(*op, stack);
    if (PyErr_Occurred()) return nullptr;
  }
  PyErr_Format(PyExc_RuntimeError, "%U: no overload matches the given arguments", o->name);
  return nullptr;
  TN_PY_CATCH(nullptr)
}
void op_dealloc(PyObject* self) {
  auto* o = reinterpret_cast<OpObject*>(self);
  Py_XDECREF(o->name);
  Py_XDECREF(o->dict);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}
PyObject* op_repr(PyObject* self) {
  return PyUnicode_FromFormat("<torch op %U>", reinterpret_cast<OpObject*>(self)->name);
}
PyMemberDef op_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(OpObject, dict), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};
PyType_Slot op_slots[] = {
    {Py_tp_call, reinterpret_cast<void*>(op_call)},
    {Py_tp_dealloc, reinterpret_cast<void*>(op_dealloc)},
    {Py_tp_repr, reinterpret_cast<void*>(op_repr)},
    {Py_tp_members, op_members},
    {0, nullptr},
};
PyType_Spec op_spec = {"torch._C._Operator", sizeof(OpObject), 0, Py_TPFLAGS_DEFAULT, op_slots};

PyObject* new_op(Operator* op, const std::string& name) {
  auto* o = PyObject_New(OpObject, op_type);
  o->op = op;
  o->name = PyUnicode_FromString(name.c_str());
  o->dict = nullptr;
  return reinterpret_cast<PyObject*>(o);
}

PyObject* f_jit_get_operation(PyObject*, PyObject* arg) {
  std::string name = PyUnicode_AsUTF8(arg);
  const auto& overloads = Dispatcher::instance().overloads(name);
  if (overloads.empty()) {
    PyErr_Format(PyExc_RuntimeError, "No such operator %s", name.c_str());
    return nullptr;
  }
  Ref names(PyList_New(0));
  for (Operator* op : overloads)
    PyList_Append(names.get(), Ref(PyUnicode_FromString(op->schema.overload.c_str())).get());
  return Py_BuildValue("(NO)", new_op(nullptr, name), names.get());
}

PyObject* f_get_operation_overload(PyObject*, PyObject* args) {
  const char *name, *overload;
  if (!PyArg_ParseTuple(args, "ss", &name, &overload)) return nullptr;
  Operator* op = Dispatcher::instance().find(name, overload);
  if (!op) {
    PyErr_Format(PyExc_RuntimeError, "Found no matching overload %s.%s", name, overload);
    return nullptr;
  }
  std::string full = op->schema.full_name();
  return Py_BuildValue("(NNN)", new_op(op, full), new_op(op, full), PyList_New(0));
}

PyObject* argument_object(const SchemaArgument& a) {
  Ref obj(PyObject_CallNoArgs(argument_class));
  PyObject_SetAttrString(obj.get(), "name", Ref(PyUnicode_FromString(a.name.c_str())).get());
  PyObject_SetAttrString(obj.get(), "type", Ref(jit_type(a.type)).get());
  PyObject_SetAttrString(obj.get(), "kwarg_only", a.kwarg_only ? Py_True : Py_False);
  PyObject_SetAttrString(
      obj.get(), "default_value",
      Ref(a.default_text ? PyUnicode_FromString(a.default_text->c_str()) : Ref::borrow(Py_None).release())
          .get());
  PyObject* alias = Py_None;
  Ref alias_obj;
  if (!a.type.alias.empty()) {
    alias_obj = Ref(PyObject_CallNoArgs(argument_class));
    PyObject_SetAttrString(alias_obj.get(), "is_write", a.type.is_write() ? Py_True : Py_False);
    alias = alias_obj.get();
  }
  PyObject_SetAttrString(obj.get(), "alias_info", alias);
  return obj.release();
}

PyObject* schema_object(const Operator& op) {
  Ref obj(PyObject_CallNoArgs(function_schema_class));
  const Schema& s = op.schema;
  PyObject_SetAttrString(obj.get(), "name", Ref(PyUnicode_FromString(s.qualified_name().c_str())).get());
  PyObject_SetAttrString(obj.get(), "overload_name", Ref(PyUnicode_FromString(s.overload.c_str())).get());
  PyObject_SetAttrString(obj.get(), "_text", Ref(PyUnicode_FromString(s.str().c_str())).get());
  PyObject_SetAttrString(obj.get(), "is_mutable", s.out_count() || op.is_inplace() ? Py_True : Py_False);
  Ref arguments(PyList_New(0)), returns(PyList_New(0));
  for (const auto& a : s.arguments) PyList_Append(arguments.get(), Ref(argument_object(a)).get());
  for (const auto& r : s.returns) PyList_Append(returns.get(), Ref(argument_object(r)).get());
  PyObject_SetAttrString(obj.get(), "arguments", arguments.get());
  PyObject_SetAttrString(obj.get(), "returns", returns.get());
  return obj.release();
}

PyObject* f_get_schema(PyObject*, PyObject* args) {
  const char *name, *overload;
  if (!PyArg_ParseTuple(args, "ss", &name, &overload)) return nullptr;
  Operator* op = Dispatcher::instance().find(name, overload);
  if (!op) {
    PyErr_Format(PyExc_RuntimeError, "Found no matching schema %s.%s", name, overload);
    return nullptr;
  }
  return schema_object(*op);
}

PyObject* f_schema_str(PyObject*, PyObject* self) { return PyObject_GetAttrString(self, "_text"); }

bool has_key(const std::string& name, const std::string& key) {
  Operator* op = lookup(name);
  if (!op) return false;
  if (python_kernels().count({op->schema.full_name(), key})) return true;
  for (const std::string& k : op->dispatch_keys) {
    if (k == key) return true;
    // upstream's CPU kernels for "CPU, CUDA"-style rows, and composite keys covering CPU
    if (key == "CPU" && (k == "CompositeExplicitAutograd" || k == "CompositeImplicitAutograd")) return true;
  }
  return false;
}

PyObject* f_has_kernel_for_dispatch_key(PyObject*, PyObject* args) {
  const char* name;
  PyObject* key;
  if (!PyArg_ParseTuple(args, "sO", &name, &key)) return nullptr;
  Ref key_name(PyUnicode_Check(key) ? Ref::borrow(key) : Ref(PyObject_GetAttrString(key, "name")));
  return PyBool_FromLong(has_key(name, PyUnicode_AsUTF8(key_name.get())));
}
// Registered with the dispatcher at all (yaml operators and Python registrations), as
// opposed to TorchScript-only overloads, which upstream's dispatcher never sees.
PyObject* f_has_kernel(PyObject*, PyObject* arg) {
  Operator* op = lookup(PyUnicode_AsUTF8(arg));
  if (!op) Py_RETURN_FALSE;
  if (!op->dispatch_keys.empty()) Py_RETURN_TRUE;
  for (const auto& [key, fn] : python_kernels())
    if (key.first == op->schema.full_name()) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

// The "computed" table: a direct registration, or one through a composite alias key
// (which covers every backend, Meta included).
PyObject* f_has_computed_kernel_for_dispatch_key(PyObject*, PyObject* args) {
  const char *name, *key;
  if (!PyArg_ParseTuple(args, "ss", &name, &key)) return nullptr;
  if (has_key(name, key)) Py_RETURN_TRUE;
  Operator* op = lookup(name);
  if (op)
    for (const std::string& k : op->dispatch_keys)
      if (k.rfind("Composite", 0) == 0) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}
PyObject* f_false_any(PyObject*, PyObject*) { Py_RETURN_FALSE; }

PyObject* f_dispatch_dump(PyObject*, PyObject* arg) {
  Operator* op = lookup(PyUnicode_AsUTF8(arg));
  if (!op) return PyUnicode_FromString("");
  std::string text = "name: " + op->schema.full_name() + "\nschema: " + op->schema.str() + "\n";
  for (const std::string& k : op->dispatch_keys) text += k + ": registered\n";
  for (const auto& [key, fn] : python_kernels())
    if (key.first == op->schema.full_name()) text += key.second + ": registered from Python\n";
  return PyUnicode_FromString(text.c_str());
}

PyObject* f_dispatch_key_parse(PyObject*, PyObject* arg) {
  Ref member(PyObject_GetAttr(dispatch_key_enum, arg));
  if (!member) {
    PyErr_Clear();
    PyErr_Format(PyExc_RuntimeError, "could not parse dispatch key '%U'", arg);
    return nullptr;
  }
  return member.release();
}
PyObject* f_dispatch_key_name(PyObject*, PyObject* arg) { return PyObject_GetAttrString(arg, "name"); }

// ---- torch.library: _dispatch_library(kind, ns, key, file, line) ----
PyObject* library_init(PyObject*, PyObject* args) {
  PyObject *self, *kind, *ns, *key, *file, *line;
  if (!PyArg_ParseTuple(args, "OOOOOO", &self, &kind, &ns, &key, &file, &line)) return nullptr;
  PyObject_SetAttrString(self, "kind", kind);
  PyObject_SetAttrString(self, "ns", ns);
  PyObject_SetAttrString(self, "dispatch_key", key);
  Py_RETURN_NONE;
}

PyObject* library_define(PyObject*, PyObject* args) {
  TN_PY_TRY
  PyObject *self, *schema_text, *alias = nullptr;
  if (!PyArg_ParseTuple(args, "OO|O", &self, &schema_text, &alias)) return nullptr;
  Ref ns(PyObject_GetAttrString(self, "ns"));
  Schema schema = parse_schema(PyUnicode_AsUTF8(schema_text), PyUnicode_AsUTF8(ns.get()));
  for (auto& a : schema.arguments)
    if (a.default_text) parse_default(a.type, *a.default_text);  // refuse bad defaults now
  Operator& op = Dispatcher::instance().define(schema);
  return PyUnicode_FromString(op.schema.full_name().c_str());
  TN_PY_CATCH(nullptr)
}

PyObject* library_impl(PyObject*, PyObject* args) {
  TN_PY_TRY
  PyObject *self, *name_obj, *key_obj, *fn;
  if (!PyArg_ParseTuple(args, "OOOO", &self, &name_obj, &key_obj, &fn)) return nullptr;
  Ref ns(PyObject_GetAttrString(self, "ns"));
  std::string name = PyUnicode_AsUTF8(name_obj);
  if (name.find("::") == std::string::npos) name = std::string(PyUnicode_AsUTF8(ns.get())) + "::" + name;
  Operator* op = lookup(name);
  if (!op) {
    PyErr_Format(PyExc_RuntimeError, "torch.library impl: operator %s is not defined", name.c_str());
    return nullptr;
  }
  std::string key = PyUnicode_Check(key_obj) ? PyUnicode_AsUTF8(key_obj) : "";
  python_kernels()[{op->schema.full_name(), key}] = Ref::borrow(fn);
  // Python kernels for the CPU-reaching keys become the operator's kernel when we
  // have none of our own; Meta and other keys are recorded for queries only.
  bool reaches_cpu = key == "CPU" || key == "CompositeImplicitAutograd" || key == "CompositeExplicitAutograd";
  if (reaches_cpu && !op->kernel) {
    Ref callable = Ref::borrow(fn);
    const Operator* target = op;
    op->kernel = [callable, target](Stack& stack) {
      Ref args(PyTuple_New(Py_ssize_t(stack.size())));
      for (size_t i = 0; i < stack.size(); ++i) {
        Stack single{stack[i]};
        Operator shim;
        shim.schema.returns.resize(1);
        PyTuple_SET_ITEM(args.get(), Py_ssize_t(i), returns_to_python(shim, single));
      }
      Ref result(PyObject_Call(callable.get(), args.get(), nullptr));
      if (!result) throw PythonErrorSet();
      stack.clear();
      PyObject* value = result.get();
      auto push = [&](PyObject* item) {
        if (is_tensor(item))
          stack.emplace_back(unpack(item));
        else if (PyBool_Check(item))
          stack.emplace_back(item == Py_True);
        else if (PyLong_Check(item))
          stack.emplace_back(unpack_long(item));
        else if (PyFloat_Check(item))
          stack.emplace_back(PyFloat_AsDouble(item));
        else
          stack.emplace_back();
      };
      if (target->schema.returns.size() > 1 && PyTuple_Check(value)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) push(PyTuple_GET_ITEM(value, i));
      } else {
        push(value);
      }
    };
  }
  Py_RETURN_NONE;
  TN_PY_CATCH(nullptr)
}

PyObject* f_dispatch_library(PyObject*, PyObject* args) {
  return PyObject_Call(library_class, args, nullptr);
}

PyObject* make_class(const char* name, PyMethodDef* methods) {
  Ref dict(PyDict_New());
  PyDict_SetItemString(dict.get(), "__module__", Ref(PyUnicode_FromString("torch._C")).get());
  for (PyMethodDef* m = methods; m && m->ml_name; ++m) {
    Ref f(PyCFunction_NewEx(m, nullptr, nullptr));
    PyDict_SetItemString(dict.get(), m->ml_name, Ref(PyInstanceMethod_New(f.get())).get());
  }
  PyObject* cls = PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyType_Type), "s(O)O", name,
                                        reinterpret_cast<PyObject*>(&PyBaseObject_Type), dict.get());
  if (!cls) throw PythonErrorSet();
  return cls;
}

PyMethodDef schema_methods[] = {
    {"__str__", f_schema_str, METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr},
};
PyMethodDef library_methods[] = {
    {"__init__", library_init, METH_VARARGS, nullptr},
    {"define", library_define, METH_VARARGS, nullptr},
    {"impl", library_impl, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyMethodDef dispatch_functions[] = {
    {"_jit_get_operation", f_jit_get_operation, METH_O, nullptr},
    {"_get_operation_overload", f_get_operation_overload, METH_VARARGS, nullptr},
    {"_get_schema", f_get_schema, METH_VARARGS, nullptr},
    {"_dispatch_has_kernel_for_dispatch_key", f_has_kernel_for_dispatch_key, METH_VARARGS, nullptr},
    {"_dispatch_has_kernel", f_has_kernel, METH_O, nullptr},
    {"_dispatch_has_computed_kernel_for_dispatch_key", f_has_computed_kernel_for_dispatch_key, METH_VARARGS,
     nullptr},
    {"_dispatch_has_kernel_for_any_dispatch_key", f_false_any, METH_VARARGS, nullptr},
    {"_dispatch_has_backend_fallback", f_false_any, METH_VARARGS, nullptr},
    {"_dispatch_dump", f_dispatch_dump, METH_O, nullptr},
    {"_dispatch_key_parse", f_dispatch_key_parse, METH_O, nullptr},
    {"_dispatch_key_name", f_dispatch_key_name, METH_O, nullptr},
    {"_dispatch_library", f_dispatch_library, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

// Runs after the stub surface exists: gives its JIT type classes the behaviour schema
// consumers use (isSubtypeOf, containedTypes, str) and TensorType.get().
void init_jit_types(PyObject* module) {
  torch_c_module = module;
  for (const char* name : {"TensorType", "OptionalType", "ListType", "IntType", "FloatType", "BoolType",
                           "StringType", "NumberType", "DeviceObjType", "AnyType"}) {
    Ref cls(PyObject_GetAttrString(module, name));
    if (!cls) throw PythonErrorSet();
    for (PyMethodDef* def = jit_type_methods; def->ml_name; ++def) {
      Ref f(PyCFunction_NewEx(def, nullptr, nullptr));
      PyObject_SetAttrString(cls.get(), def->ml_name, Ref(PyInstanceMethod_New(f.get())).get());
    }
  }
  Ref tensor_type(PyObject_GetAttrString(module, "TensorType"));
  tensor_jit_type = new_jit_type("TensorType", "Tensor", {});
  Ref get(PyCFunction_NewEx(&tensor_type_get_def, nullptr, nullptr));
  PyObject_SetAttrString(tensor_type.get(), "get", Ref(PyStaticMethod_New(get.get())).get());
}

void init_dispatch(PyObject* module) {
  op_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&op_spec));
  function_schema_class = make_class("FunctionSchema", schema_methods);
  argument_class = make_class("Argument", nullptr);
  library_class = make_class("_DispatchModule", library_methods);
  PyModule_AddObject(module, "FunctionSchema", Ref::borrow(function_schema_class).release());
  PyModule_AddObject(module, "Argument", Ref::borrow(argument_class).release());
  PyModule_AddObject(module, "_DispatchModule", Ref::borrow(library_class).release());
  // The guard torch.utils._mode_utils.no_dispatch holds: nothing to switch off, since the shim
  // never calls a subclass's __torch_dispatch__.
  PyModule_AddObject(module, "_DisableTorchDispatch", make_class("_DisableTorchDispatch", nullptr));
  PyModule_AddFunctions(module, dispatch_functions);
  // DispatchKey comes from the stub surface (an enum); fetch it lazily at first use.
  Ref enum_module(PyImport_ImportModule("enum"));
  const char* keys =
      "Undefined CatchAll CPU CUDA Meta Python PythonTLSSnapshot PythonDispatcher Functionalize "
      "Autograd AutogradCPU AutogradCUDA AutogradOther ADInplaceOrView BackendSelect "
      "CompositeImplicitAutograd CompositeExplicitAutograd CompositeExplicitAutogradNonFunctional "
      "Conjugate Negative ZeroTensor Sparse SparseCPU QuantizedCPU AutocastCPU AutocastCUDA "
      "FuncTorchBatched FuncTorchDynamicLayerFrontMode FuncTorchDynamicLayerBackMode "
      "FuncTorchGradWrapper Batched VmapMode Tracer Lazy XLA MPS HPU XPU IPU PrivateUse1 Dense";
  dispatch_key_enum = PyObject_CallMethod(enum_module.get(), "IntEnum", "ss", "DispatchKey", keys);
  if (!dispatch_key_enum) throw PythonErrorSet();
  PyObject_SetAttrString(dispatch_key_enum, "__module__", Ref(PyUnicode_FromString("torch._C")).get());
  PyModule_AddObject(module, "DispatchKey", Ref::borrow(dispatch_key_enum).release());
}

}  // namespace tn::py
