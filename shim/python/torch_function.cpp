// The __torch_function__ protocol (torch/overrides.py): a call whose arguments include an
// object whose type overrides __torch_function__ (a Tensor subclass, or any object standing where
// a Tensor goes) is handed to that override instead of the kernel. Also the switches upstream
// binds for it: _has_torch_function*, _is_torch_function_enabled, DisableTorchFunction and
// _disabled_torch_function_impl (the implementation that opts a type out).
#include "python_shim.h"

namespace tn::py {

namespace {

// torch._C._disabled_torch_function_impl, also bound as _disabled_torch_dispatch_impl.
PyObject* disabled_torch_function = nullptr;

// Per thread, as upstream's: a DisableTorchFunction block on one thread leaves others alone.
thread_local bool torch_function_on = true;

// Whether the protocol sends `obj` to an override. A plain Tensor, a Parameter (which opts
// out) and the Python values that stand for scalars and sizes never do.
bool has_override(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  if (reinterpret_cast<PyObject*>(type) == tensor_class || type == tensor_base_type) return false;
  if (PyLong_CheckExact(obj) || PyFloat_CheckExact(obj) || obj == Py_None || PyBool_Check(obj) ||
      PyTuple_CheckExact(obj) || PyList_CheckExact(obj) || PyUnicode_CheckExact(obj))
    return false;
  // Parameters reach nearly every call of a training step: remember the answer per type, for as
  // long as the type is unchanged (CPython gives a modified type a new version tag; tags are
  // never reused, so a stale entry cannot match).
  struct Answer {
    PyTypeObject* type = nullptr;
    unsigned int version = 0;
    bool overrides = false;
  };
  static Answer answers[8];
  if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG))
    return type_overrides(type, "__torch_function__");
  Answer& answer = answers[(reinterpret_cast<uintptr_t>(type) >> 4) % 8];
  if (answer.type != type || answer.version != type->tp_version_tag) {
    bool overrides = type_overrides(type, "__torch_function__");  // may assign the version tag
    answer = {type, type->tp_version_tag, overrides};
  }
  return answer.overrides;
}

// Keeps one argument per overriding type, in the order upstream consults them: as they come,
// except that a subclass goes before its base class.
void add_overloaded(PyObject* obj, std::vector<PyObject*>& found) {
  if (!has_override(obj)) return;
  PyTypeObject* type = Py_TYPE(obj);
  for (PyObject* seen : found)
    if (Py_TYPE(seen) == type) return;
  auto at = found.begin();
  while (at != found.end() && !PyType_IsSubtype(type, Py_TYPE(*at))) ++at;
  found.insert(at, obj);
  Ref defined(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__torch_function__"));
  if (defined && PyFunction_Check(defined.get()) &&
      PyErr_WarnEx(
          PyExc_UserWarning,
          "Defining your `__torch_function__` as a plain method is deprecated and will be an error in "
          "future, please define it as a classmethod.",
          1) < 0)
    throw PythonErrorSet();
}

// An argument, or the items of a tuple or list argument (a Tensor[] position).
void collect_overloaded(PyObject* obj, std::vector<PyObject*>& found) {
  if (PyTuple_Check(obj) || PyList_Check(obj)) {
    Ref seq(PySequence_Fast(obj, ""));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i)
      add_overloaded(PySequence_Fast_GET_ITEM(seq.get(), i), found);
    return;
  }
  add_overloaded(obj, found);
}

// The keywords of a vectorcall as the dict the override receives; none when there were none
// (upstream then passes none, and the override's kwargs takes its default).
Ref keywords_dict(PyObject* const* args, size_t nargs, PyObject* kwnames) {
  if (!kwnames || PyTuple_GET_SIZE(kwnames) == 0) return Ref();
  Ref kwargs(PyDict_New());
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i)
    if (PyDict_SetItem(kwargs.get(), PyTuple_GET_ITEM(kwnames, i), args[nargs + size_t(i)]) < 0)
      throw PythonErrorSet();
  return kwargs;
}

PyObject* refuse_unhandled(const std::vector<PyObject*>& overloaded, const std::string& shown) {
  std::string types;
  for (PyObject* arg : overloaded) {
    Ref repr(PyObject_Repr(reinterpret_cast<PyObject*>(Py_TYPE(arg))));
    if (!repr) return nullptr;
    types += (types.empty() ? "" : ", ") + std::string(PyUnicode_AsUTF8(repr.get()));
  }
  PyErr_Format(PyExc_TypeError,
               "no implementation found for '%s' on types that implement __torch_function__: [%s]",
               shown.c_str(), types.c_str());
  return nullptr;
}

PyObject* f_has_torch_function(PyObject*, PyObject* arg) {
  Ref seq(PySequence_Fast(arg, "expected a sequence"));
  if (!seq) return nullptr;
  if (!torch_function_on) Py_RETURN_FALSE;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i)
    if (has_override(PySequence_Fast_GET_ITEM(seq.get(), i))) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}
PyObject* f_has_torch_function_unary(PyObject*, PyObject* arg) {
  return PyBool_FromLong(torch_function_on && has_override(arg));
}
PyObject* f_has_torch_function_variadic(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!torch_function_on) Py_RETURN_FALSE;
  for (Py_ssize_t i = 0; i < nargs; ++i)
    if (has_override(args[i])) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}
PyObject* f_is_torch_function_enabled(PyObject*, PyObject*) { return PyBool_FromLong(torch_function_on); }
PyObject* f_disabled_torch_function_impl(PyObject*, PyObject* args) {
  PyObject *func, *types, *fargs, *kwargs = nullptr;
  if (!PyArg_ParseTuple(args, "OOO|O", &func, &types, &fargs, &kwargs)) return nullptr;
  return PyObject_Call(func, fargs, kwargs == Py_None ? nullptr : kwargs);
}

// DisableTorchFunction: the protocol off for the block, then back to what it was before it.
struct DisableObject {
  PyObject_HEAD bool was_on;
};
PyObject* disable_enter(PyObject* self, PyObject*) {
  reinterpret_cast<DisableObject*>(self)->was_on = torch_function_on;
  torch_function_on = false;
  Py_RETURN_NONE;
}
PyObject* disable_exit(PyObject* self, PyObject*) {
  torch_function_on = reinterpret_cast<DisableObject*>(self)->was_on;
  Py_RETURN_NONE;
}
PyMethodDef disable_methods[] = {
    {"__enter__", disable_enter, METH_NOARGS, nullptr},
    {"__exit__", disable_exit, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};
PyType_Slot disable_slots[] = {
    {Py_tp_methods, disable_methods},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {0, nullptr},
};
PyType_Spec disable_spec = {"torch._C.DisableTorchFunction", sizeof(DisableObject), 0, Py_TPFLAGS_DEFAULT,
                            disable_slots};

#define FN(NAME, FN, FLAGS) \
  { NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(FN)), FLAGS, nullptr }
PyMethodDef protocol_functions[] = {
    FN("_has_torch_function", f_has_torch_function, METH_O),
    FN("_has_torch_function_unary", f_has_torch_function_unary, METH_O),
    FN("_has_torch_function_variadic", f_has_torch_function_variadic, METH_FASTCALL),
    FN("_is_torch_function_enabled", f_is_torch_function_enabled, METH_NOARGS),
    {nullptr, nullptr, 0, nullptr},
};
PyMethodDef disabled_def = FN("_disabled_torch_function_impl", f_disabled_torch_function_impl, METH_VARARGS);
#undef FN

}  // namespace

bool type_overrides(PyTypeObject* type, const char* protocol) {
  Ref attr(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), protocol));
  if (!attr) {
    PyErr_Clear();
    return false;
  }
  // A classmethod or staticmethod of the disabled implementation still counts as disabled.
  Ref func(PyObject_GetAttrString(attr.get(), "__func__"));
  if (!func) PyErr_Clear();
  return (func ? func.get() : attr.get()) != disabled_torch_function;
}

std::vector<PyObject*> overloaded_arguments(PyObject* self, PyObject* const* args, size_t nargs,
                                            PyObject* kwnames) {
  std::vector<PyObject*> found;
  if (!torch_function_on) return found;
  if (self) add_overloaded(self, found);
  size_t total = nargs + (kwnames ? size_t(PyTuple_GET_SIZE(kwnames)) : 0);
  for (size_t i = 0; i < total; ++i) collect_overloaded(args[i], found);
  return found;
}

std::vector<PyObject*> overloaded_arguments(PyObject* self, PyObject* args, PyObject* kwargs) {
  std::vector<PyObject*> found;
  if (!torch_function_on) return found;
  add_overloaded(self, found);
  for (Py_ssize_t i = 0; args && i < PyTuple_GET_SIZE(args); ++i)
    collect_overloaded(PyTuple_GET_ITEM(args, i), found);
  PyObject *key, *value;
  for (Py_ssize_t at = 0; kwargs && PyDict_Next(kwargs, &at, &key, &value);) collect_overloaded(value, found);
  return found;
}

PyObject* handle_torch_function(const std::vector<PyObject*>& overloaded, PyObject* api,
                                const std::string& shown, PyObject* self, PyObject* args, PyObject* kwargs) {
  // The override sees the call as written: (self, *args).
  Py_ssize_t first = self ? 1 : 0, count = args ? PyTuple_GET_SIZE(args) : 0;
  Ref call_args(PyTuple_New(first + count));
  if (!call_args) return nullptr;
  if (self) PyTuple_SET_ITEM(call_args.get(), 0, Ref::borrow(self).release());
  for (Py_ssize_t i = 0; i < count; ++i)
    PyTuple_SET_ITEM(call_args.get(), first + i, Ref::borrow(PyTuple_GET_ITEM(args, i)).release());
  Ref types(PyTuple_New(Py_ssize_t(overloaded.size())));
  if (!types) return nullptr;
  for (size_t i = 0; i < overloaded.size(); ++i)
    PyTuple_SET_ITEM(types.get(), Py_ssize_t(i),
                     Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(overloaded[i]))).release());
  bool has_keywords = kwargs && PyDict_GET_SIZE(kwargs) > 0;
  for (PyObject* arg : overloaded) {
    // From the instance, so a classmethod binds its class and a plain method its object.
    Ref method(PyObject_GetAttrString(arg, "__torch_function__"));
    if (!method) return nullptr;
    Ref result(PyObject_CallFunctionObjArgs(method.get(), api, types.get(), call_args.get(),
                                            has_keywords ? kwargs : nullptr, nullptr));
    if (!result || result.get() != Py_NotImplemented) return result.release();
  }
  return refuse_unhandled(overloaded, shown);
}

PyObject* handle_torch_function(const std::vector<PyObject*>& overloaded, PyObject* api,
                                const std::string& shown, PyObject* self, PyObject* const* args, size_t nargs,
                                PyObject* kwnames) {
  Ref positional(PyTuple_New(Py_ssize_t(nargs)));
  if (!positional) return nullptr;
  for (size_t i = 0; i < nargs; ++i)
    PyTuple_SET_ITEM(positional.get(), Py_ssize_t(i), Ref::borrow(args[i]).release());
  Ref kwargs = keywords_dict(args, nargs, kwnames);
  return handle_torch_function(overloaded, api, shown, self, positional.get(), kwargs.get());
}

PyObject* tensor_method(const char* name) {
  return PyObject_GetAttrString(tensor_class ? tensor_class : reinterpret_cast<PyObject*>(tensor_base_type),
                                name);
}

namespace {

// Offers torch.Tensor.<name> to the overrides in `overloaded`, passing the call's arguments on
// in either convention (a tuple and a dict, or a vector of `nargs`).
template <typename... CallArguments>
bool offer_tensor_method(const char* name, PyObject* self, const std::vector<PyObject*>& overloaded,
                         PyObject** result, CallArguments... call) {
  if (overloaded.empty()) return false;
  Ref api(tensor_method(name));
  *result =
      api ? handle_torch_function(overloaded, api.get(), std::string("torch.Tensor.") + name, self, call...)
          : nullptr;
  return true;
}

}  // namespace

bool tensor_method_overridden(const char* name, PyObject* self, PyObject* args, PyObject* kwargs,
                              PyObject** result) {
  return offer_tensor_method(name, self, overloaded_arguments(self, args, kwargs), result, args, kwargs);
}

bool tensor_method_overridden(const char* name, PyObject* self, PyObject* const* args, size_t nargs,
                              PyObject** result) {
  return offer_tensor_method(name, self, overloaded_arguments(self, args, nargs, nullptr), result, args,
                             nargs, static_cast<PyObject*>(nullptr));
}

bool tensor_property_overridden(const char* name, PyObject* self, PyObject* value, PyObject** result) {
  std::vector<PyObject*> overloaded = overloaded_arguments(self, &value, value ? 1 : 0, nullptr);
  if (overloaded.empty()) return false;
  const char* accessor = value ? "__set__" : "__get__";
  Ref descriptor(tensor_method(name));
  Ref api(descriptor ? PyObject_GetAttrString(descriptor.get(), accessor) : nullptr);
  *result =
      api ? handle_torch_function(overloaded, api.get(), std::string("torch.Tensor.") + name + "." + accessor,
                                  self, &value, value ? 1 : 0, nullptr)
          : nullptr;
  return true;
}

void init_torch_function(PyObject* module) {
  if (PyModule_AddFunctions(module, protocol_functions) < 0) throw PythonErrorSet();
  PyObject* disable = PyType_FromSpec(&disable_spec);
  if (!disable || PyModule_AddObject(module, "DisableTorchFunction", disable) < 0) throw PythonErrorSet();
  disabled_torch_function = PyCFunction_NewEx(&disabled_def, nullptr, nullptr);
  for (const char* name : {"_disabled_torch_function_impl", "_disabled_torch_dispatch_impl"})
    if (PyModule_AddObject(module, name, Ref::borrow(disabled_torch_function).release()) < 0)
      throw PythonErrorSet();
}

}  // namespace tn::py
