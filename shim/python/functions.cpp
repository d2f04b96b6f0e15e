// Python callables over Bindings: torch.* functions (builtin functions) and Tensor
// methods (a method-descriptor type), plus the hand-written Tensor methods upstream
// also writes by hand (size, tolist, numpy, __getitem__, ...).
#include <algorithm>
#include <map>

#include "python_shim.h"
// After Python.h, which it needs.
#include <structmember.h>

namespace tn::py {

namespace {

// ---- torch.* functions: PyCFunction objects whose self is a capsule of the Binding ----

PyObject* function_trampoline(PyObject* capsule, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  auto* binding = static_cast<Binding*>(PyCapsule_GetPointer(capsule, nullptr));
  return call_binding(binding, nullptr, args, size_t(PyVectorcall_NARGS(nargs)), kwnames);
}

// ---- Tensor methods: a descriptor that binds self like a method descriptor ----
struct MethodObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  Binding* binding;
  PyObject* name;
  PyObject* doc;
  PyObject* dict;
};
PyTypeObject* method_type = nullptr;

PyObject* method_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* m = reinterpret_cast<MethodObject*>(callable);
  size_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1 || !is_tensor(args[0])) {
    PyErr_Format(PyExc_TypeError, "descriptor '%U' requires a 'torch._C._TensorBase' object", m->name);
    return nullptr;
  }
  return call_binding(m->binding, args[0], args + 1, nargs - 1, kwnames);
}
PyObject* method_get(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}
void method_dealloc(PyObject* self) {
  auto* m = reinterpret_cast<MethodObject*>(self);
  Py_XDECREF(m->name);
  Py_XDECREF(m->doc);
  Py_XDECREF(m->dict);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}
PyObject* method_get_doc(PyObject* self, void*) {
  PyObject* doc = reinterpret_cast<MethodObject*>(self)->doc;
  doc = doc ? doc : Py_None;
  Py_INCREF(doc);
  return doc;
}
int method_set_doc(PyObject* self, PyObject* value, void*) {
  auto* m = reinterpret_cast<MethodObject*>(self);
  Py_XINCREF(value);
  Py_XSETREF(m->doc, value);
  return 0;
}
PyObject* method_get_name(PyObject* self, void*) {
  Py_INCREF(reinterpret_cast<MethodObject*>(self)->name);
  return reinterpret_cast<MethodObject*>(self)->name;
}
PyObject* method_get_qualname(PyObject* self, void*) {
  return PyUnicode_FromFormat("_TensorBase.%U", reinterpret_cast<MethodObject*>(self)->name);
}
PyObject* method_repr(PyObject* self) {
  return PyUnicode_FromFormat("<method '%U' of 'torch._C._TensorBase' objects>",
                              reinterpret_cast<MethodObject*>(self)->name);
}
PyGetSetDef method_getset[] = {
    {"__doc__", method_get_doc, method_set_doc, nullptr, nullptr},
    {"__name__", method_get_name, nullptr, nullptr, nullptr},
    {"__qualname__", method_get_qualname, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};
PyMemberDef method_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(MethodObject, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(MethodObject, dict), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};
PyType_Slot method_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(method_dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(method_get)},
    {Py_tp_getset, method_getset},
    {Py_tp_members, method_members},
    {Py_tp_repr, reinterpret_cast<void*>(method_repr)},
    {0, nullptr},
};
PyType_Spec method_spec = {"torch._C._TensorMethod", sizeof(MethodObject), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
                           method_slots};

}  // namespace

PyObject* new_function(const std::string& name, Binding* binding, const char* module_name) {
  auto* def = new PyMethodDef{strdup(name.c_str()), reinterpret_cast<PyCFunction>(function_trampoline),
                              METH_FASTCALL | METH_KEYWORDS, nullptr};
  Ref capsule(PyCapsule_New(binding, nullptr, nullptr));
  Ref module(PyUnicode_FromString(module_name));
  PyObject* f = PyCFunction_NewEx(def, capsule.get(), module.get());
  if (!f) throw PythonErrorSet();
  return f;
}

PyObject* new_method_descriptor(const std::string& name, Binding* binding) {
  if (!method_type) method_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&method_spec));
  auto* m = PyObject_New(MethodObject, method_type);
  m->vectorcall = method_vectorcall;
  m->binding = binding;
  m->name = PyUnicode_FromString(name.c_str());
  m->doc = nullptr;
  m->dict = nullptr;
  return reinterpret_cast<PyObject*>(m);
}

namespace {

// ---- hand-written Tensor methods ----
#define SELF unpack(self)

// size(dim) and stride(dim) take what upstream's int parser takes: int, __index__ provider or
// integer 0-dim tensor, never bool.
int64_t dim_argument(const char* method, PyObject* dim) {
  if (is_int_like(dim)) return as_int(dim);
  if (PyUnicode_Check(dim) || dim == Py_None) {  // upstream reads these as dimension names
    PyErr_Format(PyExc_RuntimeError, "%s(): named dimensions are not supported by torchnative", method);
    throw PythonErrorSet();
  }
  PyErr_Format(PyExc_TypeError, "%s(): argument 'dim' must be int, not %s", method, Py_TYPE(dim)->tp_name);
  throw PythonErrorSet();
}
PyObject* m_size(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  TN_PY_TRY
  if (nargs == 0) return make_size(SELF.sizes());
  return PyLong_FromLongLong(SELF.size(dim_argument("size", args[0])));
  TN_PY_CATCH(nullptr)
}
PyObject* m_stride(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  TN_PY_TRY
  if (nargs == 0) {
    const Shape& s = SELF.strides();
    PyObject* t = PyTuple_New(Py_ssize_t(s.size()));
    for (size_t i = 0; i < s.size(); ++i) PyTuple_SET_ITEM(t, Py_ssize_t(i), PyLong_FromLongLong(s[i]));
    return t;
  }
  return PyLong_FromLongLong(SELF.stride(dim_argument("stride", args[0])));
  TN_PY_CATCH(nullptr)
}
PyObject* m_dim(PyObject* self, PyObject*) { return PyLong_FromLongLong(SELF.dim()); }
PyObject* m_numel(PyObject* self, PyObject*) { return PyLong_FromLongLong(SELF.numel()); }
PyObject* m_element_size(PyObject* self, PyObject*) { return PyLong_FromSize_t(SELF.itemsize()); }
PyObject* m_storage_offset(PyObject* self, PyObject*) { return PyLong_FromLongLong(SELF.offset()); }
// 0 for a meta tensor, as upstream: it has no memory.
PyObject* m_data_ptr(PyObject* self, PyObject*) {
  return PyLong_FromVoidPtr(SELF.is_meta() ? nullptr : SELF.data());
}
PyObject* m_tolist(PyObject* self, PyObject*) {
  TN_PY_TRY return tensor_to_list(SELF);
  TN_PY_CATCH(nullptr)
}
// Python's number conversions of a tensor: one element only, else ValueError.
bool require_one_element(const Tensor& t) {
  if (t.numel() == 1) return true;
  PyErr_SetString(PyExc_ValueError, "only one element tensors can be converted to Python scalars");
  return false;
}
PyObject* m_item(PyObject* self, PyObject*) {
  TN_PY_TRY
  if (!require_one_element(SELF)) return nullptr;
  return scalar_to_python(SELF.item());
  TN_PY_CATCH(nullptr)
}
// Upstream's dense-in-this-order test for channels_last(_3d): the strides, taken channels first,
// then the spatial dims from the last, then the batch, grow as the sizes multiply (size-1 dims
// are free). A tensor of another rank is never channels_last.
bool is_channels_last_contiguous(const Tensor& t, int64_t rank) {
  if (t.dim() != rank) return false;
  std::vector<int64_t> order = {1};
  for (int64_t d = rank - 1; d >= 2; --d) order.push_back(d);
  order.push_back(0);
  int64_t expected = 1;
  for (int64_t d : order) {
    if (t.sizes()[d] == 1) continue;
    if (t.strides()[d] != expected) return false;
    expected *= t.sizes()[d];
  }
  return true;
}

PyObject* m_is_contiguous(PyObject* self, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"memory_format", nullptr};
  PyObject* format = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$O", const_cast<char**>(keywords), &format))
    return nullptr;
  if (format && !is_memory_format(format))
    raise(PyExc_TypeError, "is_contiguous(): argument 'memory_format' must be torch.memory_format");
  const int64_t code = format ? memory_format_of(format) : 0;  // contiguous_format, preserve_format: 0, 1
  if (code >= 2) return PyBool_FromLong(is_channels_last_contiguous(SELF, code == 2 ? 4 : 5));
  return PyBool_FromLong(SELF.is_contiguous());
  TN_PY_CATCH(nullptr)
}
PyObject* m_is_floating_point(PyObject* self, PyObject*) {
  return PyBool_FromLong(is_floating(SELF.dtype()));
}
PyObject* m_is_complex(PyObject*, PyObject*) { Py_RETURN_FALSE; }
PyObject* m_false(PyObject*, PyObject*) { Py_RETURN_FALSE; }
PyObject* m_get_device(PyObject*, PyObject*) { return PyLong_FromLong(-1); }
PyObject* m_is_signed(PyObject* self, PyObject*) { return PyBool_FromLong(is_signed(SELF.dtype())); }

PyObject* m_bool_scalar(PyObject* self, PyObject*) {
  TN_PY_TRY
  const Tensor& t = SELF;
  if (t.numel() != 1) {
    PyErr_SetString(PyExc_RuntimeError,
                    t.numel() == 0 ? "Boolean value of Tensor with no values is ambiguous"
                                   : "Boolean value of Tensor with more than one value is ambiguous");
    return nullptr;
  }
  return PyBool_FromLong(t.item().to<bool>());
  TN_PY_CATCH(nullptr)
}
PyObject* m_float_scalar(PyObject* self, PyObject*) {
  TN_PY_TRY
  if (!require_one_element(SELF)) return nullptr;
  return PyFloat_FromDouble(SELF.item().to_double());
  TN_PY_CATCH(nullptr)
}
PyObject* m_int_scalar(PyObject* self, PyObject*) {
  TN_PY_TRY
  if (!require_one_element(SELF)) return nullptr;
  Scalar s = SELF.item();
  if (s.is_float()) return PyNumber_Long(Ref(PyFloat_FromDouble(s.to_double())).get());
  return PyLong_FromLongLong(s.to_int());
  TN_PY_CATCH(nullptr)
}
PyObject* m_index(PyObject* self, PyObject*) {
  TN_PY_TRY
  const Tensor& t = SELF;
  if (t.numel() != 1 || !is_integral(t.dtype(), true)) {
    PyErr_SetString(PyExc_TypeError, "only integer tensors of a single element can be converted to an index");
    return nullptr;
  }
  return PyLong_FromLongLong(t.item().to_int());
  TN_PY_CATCH(nullptr)
}

// Tensor.numpy(): an ndarray sharing this tensor's memory (the array keeps the tensor alive).
PyObject* m_numpy(PyObject* self, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY(void) args;
  (void)kwargs;
  const Tensor& t = SELF;
  if (t.impl()->requires_grad) {
    PyErr_SetString(PyExc_RuntimeError,
                    "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.");
    return nullptr;
  }
  if (t.dtype() == ScalarType::BFloat16) {
    PyErr_SetString(PyExc_TypeError, "Got unsupported ScalarType BFloat16");
    return nullptr;
  }
  static const std::map<ScalarType, const char*> typestr = {
      {ScalarType::Byte, "|u1"},  {ScalarType::Char, "|i1"},   {ScalarType::Short, "<i2"},
      {ScalarType::Int, "<i4"},   {ScalarType::Long, "<i8"},   {ScalarType::Half, "<f2"},
      {ScalarType::Float, "<f4"}, {ScalarType::Double, "<f8"}, {ScalarType::Bool, "|b1"}};
  Ref shape(PyTuple_New(t.dim())), strides(PyTuple_New(t.dim()));
  for (int64_t d = 0; d < t.dim(); ++d) {
    PyTuple_SET_ITEM(shape.get(), d, PyLong_FromLongLong(t.sizes()[d]));
    PyTuple_SET_ITEM(strides.get(), d, PyLong_FromLongLong(t.strides()[d] * int64_t(t.itemsize())));
  }
  Ref iface(Py_BuildValue("{s:O,s:s,s:(N,O),s:O,s:i}", "shape", shape.get(), "typestr", typestr.at(t.dtype()),
                          "data", PyLong_FromVoidPtr(t.data()), Py_False, "strides", strides.get(), "version",
                          3));
  // A holder object exposing __array_interface__ keeps `self` alive as the array's base.
  Ref types(PyImport_ImportModule("types"));
  Ref ns(PyObject_CallMethod(types.get(), "SimpleNamespace", nullptr));
  PyObject_SetAttrString(ns.get(), "__array_interface__", iface.get());
  PyObject_SetAttrString(ns.get(), "_tensor", self);
  Ref numpy(PyImport_ImportModule("numpy"));
  if (!numpy) return nullptr;
  return PyObject_CallMethod(numpy.get(), "asarray", "O", ns.get());
  TN_PY_CATCH(nullptr)
}

// A new object of the Tensor subclass `type` over `alias`, a new impl over src's memory.
PyObject* new_subclass_object(PyTypeObject* type, const Tensor& alias) {
  PyObject* obj = type->tp_alloc(type, 0);
  if (!obj) return nullptr;
  new (&reinterpret_cast<TensorObject*>(obj)->tensor) Tensor(alias);
  alias.impl()->python_object = obj;
  return obj;
}

PyObject* m_make_subclass(PyObject*, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"cls",
                                   "data",
                                   "require_grad",
                                   "dispatch_strides",
                                   "dispatch_device",
                                   "dispatch_layout",
                                   "dispatch_sizes_strides_policy",
                                   nullptr};
  PyObject *cls, *data, *rg = Py_False, *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOOOO", const_cast<char**>(keywords), &cls, &data, &rg,
                                   &a, &b, &c, &d))
    return nullptr;
  if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), tensor_base_type) ||
      !is_tensor(data)) {
    PyErr_SetString(PyExc_TypeError, "_make_subclass(): expected a Tensor subclass and a Tensor");
    return nullptr;
  }
  // A subclass of its own __torch_dispatch__ would expect every operator routed through it.
  if (type_overrides(reinterpret_cast<PyTypeObject*>(cls), "__torch_dispatch__")) {
    PyErr_Format(PyExc_NotImplementedError,
                 "torchnative does not implement __torch_dispatch__ (Tensor subclass %s defines one)",
                 reinterpret_cast<PyTypeObject*>(cls)->tp_name);
    return nullptr;
  }
  // Parameter(data): data's memory without its history, as upstream's detach().
  const Tensor& src = unpack(data);
  Tensor alias = src.view_as_strided(src.sizes(), src.strides(), src.offset());
  alias.impl()->requires_grad = rg == Py_True;
  return new_subclass_object(reinterpret_cast<PyTypeObject*>(cls), alias);
  TN_PY_CATCH(nullptr)
}

PyObject* m_as_subclass(PyObject* self, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"cls", nullptr};
  PyObject* cls;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", const_cast<char**>(keywords), &cls)) return nullptr;
  if (!PyType_Check(cls)) {
    PyErr_Format(PyExc_TypeError, "cls must be a type (got %s)", Py_TYPE(cls)->tp_name);
    return nullptr;
  }
  if (!PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), tensor_base_type)) {
    PyErr_SetString(
        PyExc_RuntimeError,
        "Creating a Tensor subclass from a class that does not inherit from Tensor is not possible. "
        "Make sure your class inherits from Tensor.");
    return nullptr;
  }
  // upstream's self.alias(): the history continues through AliasBackward0.
  return new_subclass_object(reinterpret_cast<PyTypeObject*>(cls), ops::alias(SELF));
  TN_PY_CATCH(nullptr)
}

PyObject* m_is_inference(PyObject* self, PyObject*) { return PyBool_FromLong(SELF.impl()->inference); }

PyObject* m_requires_grad_(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"requires_grad", nullptr};
  int flag = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p", const_cast<char**>(keywords), &flag)) return nullptr;
  if (flag && !is_floating(SELF.dtype())) {  // the method's words; the property's name complex dtypes too
    PyErr_SetString(PyExc_RuntimeError, "only Tensors of floating point dtype can require gradients");
    return nullptr;
  }
  if (!set_requires_grad(SELF, flag)) return nullptr;
  Py_INCREF(self);
  return self;
}

// A leaf keeps its gradient anyway (upstream's retain_grad returns at once); keeping a
// non-leaf's is a hook on its node, which the engine does not run yet: refused by name.
PyObject* m_retain_grad(PyObject* self, PyObject*) {
  TN_PY_TRY
  if (!autograd::requires_grad(SELF)) {
    PyErr_SetString(PyExc_RuntimeError, "can't retain_grad on Tensor that has requires_grad=False");
    return nullptr;
  }
  if (autograd::grad_fn(SELF))
    throw NotImplemented(
        "torchnative does not keep the gradient of a non-leaf tensor (Tensor.retain_grad) yet");
  Py_RETURN_NONE;
  TN_PY_CATCH(nullptr)
}

// Through the door (to.dtype), so the conversion is differentiated.
PyObject* convert_method(PyObject* self, ScalarType type) {
  TN_PY_TRY return wrap(ops::to_dtype(SELF, type));
  TN_PY_CATCH(nullptr)
}
#define CONVERT(NAME, TYPE) \
  PyObject* m_##NAME(PyObject* self, PyObject*, PyObject*) { return convert_method(self, ScalarType::TYPE); }
CONVERT(double, Double)
CONVERT(float, Float)
CONVERT(half, Half)
CONVERT(bfloat16, BFloat16)
CONVERT(int, Int)
CONVERT(long, Long)
CONVERT(short, Short)
CONVERT(char, Char)
CONVERT(byte, Byte)
CONVERT(bool, Bool)
#undef CONVERT

// The arguments of Tensor.to and nn.Module.to, in any of upstream's three forms:
// (device=None, dtype=None, non_blocking=False, copy=False), (dtype, non_blocking, copy) and
// (tensor, non_blocking, copy), each with a keyword-only memory_format.
struct ToArguments {
  Ref device;  // a torch.device, or null
  std::optional<ScalarType> dtype;
  bool non_blocking = false;
  bool copy = false;
  bool copy_given = false;
  Ref memory_format;  // null when not given
};

[[noreturn]] void refuse_to_arguments(PyObject* offending) {
  raise(PyExc_TypeError, std::string("to() received an invalid combination of arguments - got (") +
                             Py_TYPE(offending)->tp_name + ")");
}

ToArguments parse_to_arguments(PyObject* args, PyObject* kwargs) {
  ToArguments parsed;
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  Py_ssize_t i = 0;
  if (n > 0) {
    PyObject* first = PyTuple_GET_ITEM(args, 0);
    if (is_tensor(first)) {
      parsed.dtype = unpack(first).dtype();
      parsed.device = Ref::borrow(unpack(first).is_meta() ? meta_device() : cpu_device());
      i = 1;
    } else if (is_dtype(first)) {
      parsed.dtype = dtype_of(first);
      i = 1;
    } else if (first == Py_None || is_device(first) || PyUnicode_Check(first) ||
               (PyLong_Check(first) && !PyBool_Check(first))) {  // (device=None, dtype=None, ...)
      if (first != Py_None && !(parsed.device = as_device(first))) throw PythonErrorSet();
      i = 1;
      if (PyObject* second = n > 1 ? PyTuple_GET_ITEM(args, 1) : nullptr;
          second == Py_None || (second && is_dtype(second))) {
        if (second != Py_None) parsed.dtype = dtype_of(second);
        i = 2;
      }
    }
  }
  for (bool* flag : {&parsed.non_blocking, &parsed.copy}) {
    if (i >= n) break;
    PyObject* arg = PyTuple_GET_ITEM(args, i++);
    if (!PyBool_Check(arg)) refuse_to_arguments(arg);
    *flag = arg == Py_True;
    parsed.copy_given = flag == &parsed.copy;
  }
  if (i < n) refuse_to_arguments(PyTuple_GET_ITEM(args, i));
  PyObject *key, *value;
  for (Py_ssize_t pos = 0; kwargs && PyDict_Next(kwargs, &pos, &key, &value);) {
    const std::string k = PyUnicode_AsUTF8(key);
    if (k == "dtype") {
      if (value != Py_None) parsed.dtype = dtype_of(value);
    } else if (k == "device") {
      parsed.device = value == Py_None ? Ref() : as_device(value);
      if (value != Py_None && !parsed.device) throw PythonErrorSet();
    } else if (k == "non_blocking" || k == "copy") {
      (k == "copy" ? parsed.copy : parsed.non_blocking) = PyObject_IsTrue(value) == 1;
      parsed.copy_given = parsed.copy_given || k == "copy";
    } else if (k == "memory_format") {
      if (value != Py_None) parsed.memory_format = Ref::borrow(value);
    } else {
      raise(PyExc_TypeError, "to() got an unexpected keyword argument '" + k + "'");
    }
  }
  return parsed;
}

// Tensor.to(...): dtype and copy within a device; to the meta device a tensor of the same
// shape; out of it nothing (a meta tensor has no values to copy).
PyObject* m_to(PyObject* self, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  const ToArguments parsed = parse_to_arguments(args, kwargs);
  if (parsed.memory_format) refuse_channels_last(memory_format_of(parsed.memory_format.get()));
  const Tensor& t = SELF;
  const ScalarType dtype = parsed.dtype.value_or(t.dtype());
  const bool meta = parsed.device ? device_is_meta(parsed.device.get()) : t.is_meta();
  if (meta && !t.is_meta()) return wrap(ops::empty_like(t, dtype, std::nullopt, std::string("meta")));
  // Out of it, the storage's own refusal (MetaDataAccess, upstream's words).
  if (!meta && t.is_meta()) t.storage()->data();
  return wrap(ops::to_dtype(t, dtype, false, parsed.copy));
  TN_PY_CATCH(nullptr)
}

// nonzero(input, *, as_tuple=False, out=None): upstream binds it by hand; as_tuple
// selects aten::nonzero_numpy.
PyObject* nonzero_impl(PyObject* input, PyObject* kwargs) {
  TN_PY_TRY
  bool as_tuple = false;
  PyObject* out = nullptr;
  if (kwargs) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      std::string k = PyUnicode_AsUTF8(key);
      if (k == "as_tuple")
        as_tuple = PyObject_IsTrue(value) == 1;
      else if (k == "out" && value != Py_None)
        out = value;
      else if (k != "out") {
        PyErr_Format(PyExc_TypeError, "nonzero() got an unexpected keyword argument '%s'", k.c_str());
        return nullptr;
      }
    }
  }
  if (!is_tensor(input)) {
    PyErr_SetString(PyExc_TypeError, "nonzero(): argument 'input' (position 1) must be Tensor");
    return nullptr;
  }
  if (as_tuple) {
    if (out) {
      PyErr_SetString(PyExc_RuntimeError, "nonzero: out= is not supported with as_tuple=True");
      return nullptr;
    }
    std::vector<Tensor> indices = ops::nonzero_numpy(unpack(input));
    Ref tuple(PyTuple_New(Py_ssize_t(indices.size())));
    for (size_t i = 0; i < indices.size(); ++i)
      PyTuple_SET_ITEM(tuple.get(), Py_ssize_t(i), wrap(indices[i]));
    return tuple.release();
  }
  if (out) {
    if (!is_tensor(out)) {
      PyErr_SetString(PyExc_TypeError, "nonzero(): argument 'out' must be Tensor");
      return nullptr;
    }
    ops::nonzero_out(unpack(out), unpack(input));
    Py_INCREF(out);
    return out;
  }
  return wrap(ops::nonzero(unpack(input)));
  TN_PY_CATCH(nullptr)
}

PyObject* m_nonzero(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 0) {
    PyErr_SetString(PyExc_TypeError, "nonzero() takes no positional arguments");
    return nullptr;
  }
  return nonzero_impl(self, kwargs);
}

// ~x: upstream refuses floats with TypeError before reaching bitwise_not.
PyObject* m_invert(PyObject* self, PyObject*) {
  TN_PY_TRY
  const Tensor& t = SELF;
  if (!is_integral(t.dtype(), true)) {
    PyErr_SetString(PyExc_TypeError,
                    "~ (operator.invert) is only implemented on integer and Boolean-type tensors");
    return nullptr;
  }
  return wrap(ops::bitwise_not(t));
  TN_PY_CATCH(nullptr)
}

PyObject* m_cpu(PyObject* self, PyObject*, PyObject*) {
  Py_INCREF(self);
  return self;
}
// The other devices, refused as upstream's CPU build refuses them (CUDA from its lazy init).
PyObject* m_cuda(PyObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_AssertionError, "Torch not compiled with CUDA enabled");
  return nullptr;
}
template <MethodName device>
PyObject* m_unlinked_device(PyObject*, PyObject*, PyObject*) {
  PyErr_Format(PyExc_RuntimeError, "PyTorch is not linked with support for %s devices", device.text);
  return nullptr;
}
PyObject* m_refuse_complex(PyObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_NotImplementedError,
                  "torchnative does not store complex dtypes yet: Tensor.cfloat/cdouble() are not available");
  return nullptr;
}

std::string legacy_tensor_type(ScalarType type) { return "torch." + legacy_class_name(type); }

PyObject* m_type(PyObject* self, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"dtype", "non_blocking", nullptr};
  PyObject* dtype = nullptr;
  int non_blocking = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Op", const_cast<char**>(keywords), &dtype, &non_blocking))
    return nullptr;
  if (!dtype || dtype == Py_None) return PyUnicode_FromString(legacy_tensor_type(SELF.dtype()).c_str());
  if (is_dtype(dtype)) return wrap(ops::to_dtype(SELF, dtype_of(dtype)));
  std::string name;
  if (PyUnicode_Check(dtype))
    name = PyUnicode_AsUTF8(dtype);
  else if (PyType_Check(dtype))
    name = std::string("torch.") + reinterpret_cast<PyTypeObject*>(dtype)->tp_name;
  for (ScalarType type : kLegacyDtypes) {
    const std::string spelled = legacy_tensor_type(type);
    if (name == spelled || name == spelled.substr(6)) return wrap(ops::to_dtype(SELF, type));
  }
  PyErr_Format(PyExc_ValueError, "invalid type: '%s'", name.c_str());
  return nullptr;
  TN_PY_CATCH(nullptr)
}

PyObject* m_new_tensor(PyObject* self, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"data", "dtype", "device", "requires_grad", nullptr};
  PyObject *data, *dtype = Py_None, *device = Py_None;
  int requires_grad = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OOp", const_cast<char**>(keywords), &data, &dtype,
                                   &device, &requires_grad))
    return nullptr;
  Tensor t = on_device(tensor_from_python_data(data, dtype == Py_None ? SELF.dtype() : dtype_of(dtype)),
                       device == Py_None ? SELF.is_meta() : device_is_meta(device));
  t.impl()->requires_grad = requires_grad;
  return wrap(t);
  TN_PY_CATCH(nullptr)
}

PyObject* m_is_view(PyObject* self, PyObject*) {
  return PyBool_FromLong(unpack(self).impl()->view_base != nullptr);
}

PyObject* m_storage(PyObject* self, PyObject*) {
  TN_PY_TRY return wrap_storage(SELF.storage());
  TN_PY_CATCH(nullptr)
}

// The legacy storage class of the tensor's dtype (torch.FloatStorage ...).
PyObject* m_storage_type(PyObject* self, PyObject*) {
  Ref torch(PyImport_ImportModule("torch"));
  if (!torch) return nullptr;
  return PyObject_GetAttrString(torch.get(),
                                (std::string(upstream_type_name(SELF.dtype())) + "Storage").c_str());
}

// Tensor.new(...): the legacy constructor with this tensor's dtype.
PyObject* m_new(PyObject* self, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY return wrap(legacy_construct(SELF.dtype(), args, kwargs));
  TN_PY_CATCH(nullptr)
}

// The hand-written methods in each calling convention, offering the call to a
// __torch_function__ override first as upstream's do.
template <MethodName name, PyObject* (*method)(PyObject*, PyObject* const*, Py_ssize_t)>
PyObject* fast_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  PyObject* result;
  if (tensor_method_overridden(name.text, self, args, size_t(nargs), &result)) return result;
  return method(self, args, nargs);
}
template <MethodName name, PyObject* (*method)(PyObject*, PyObject*)>
PyObject* noargs_method(PyObject* self, PyObject* unused) {
  PyObject* result;
  if (tensor_method_overridden(name.text, self, nullptr, nullptr, &result)) return result;
  return method(self, unused);
}
template <MethodName name, PyObject* (*method)(PyObject*, PyObject*, PyObject*)>
PyObject* keywords_method(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* result;
  if (tensor_method_overridden(name.text, self, args, kwargs, &result)) return result;
  return method(self, args, kwargs);
}

#define FAST(NAME, FN)                                                                                  \
  {                                                                                                     \
    NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(fast_method<NAME, FN>)), METH_FASTCALL, \
        nullptr                                                                                         \
  }
#define NOARGS(NAME, FN)                                                                                \
  {                                                                                                     \
    NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(noargs_method<NAME, FN>)), METH_NOARGS, \
        nullptr                                                                                         \
  }
#define KW(NAME, FN)                                                                         \
  {                                                                                          \
    NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(keywords_method<NAME, FN>)), \
        METH_VARARGS | METH_KEYWORDS, nullptr                                                \
  }

PyMethodDef handwritten_methods[] = {
    FAST("size", m_size),
    FAST("stride", m_stride),
    NOARGS("dim", m_dim),
    NOARGS("ndimension", m_dim),
    NOARGS("numel", m_numel),
    NOARGS("nelement", m_numel),
    NOARGS("element_size", m_element_size),
    NOARGS("storage_offset", m_storage_offset),
    NOARGS("data_ptr", m_data_ptr),
    NOARGS("tolist", m_tolist),
    NOARGS("item", m_item),
    KW("is_contiguous", m_is_contiguous),
    NOARGS("is_floating_point", m_is_floating_point),
    NOARGS("is_complex", m_is_complex),
    NOARGS("is_signed", m_is_signed),
    NOARGS("is_pinned", m_false),
    NOARGS("is_shared", m_false),
    NOARGS("is_conj", m_false),
    NOARGS("is_neg", m_false),
    NOARGS("is_inference", m_is_inference),
    NOARGS("_is_zerotensor", m_false),
    NOARGS("has_names", m_false),
    NOARGS("get_device", m_get_device),
    NOARGS("_is_view", m_is_view),
    NOARGS("__bool__", m_bool_scalar),
    NOARGS("__nonzero__", m_bool_scalar),
    NOARGS("__float__", m_float_scalar),
    NOARGS("__int__", m_int_scalar),
    NOARGS("__long__", m_int_scalar),
    NOARGS("__index__", m_index),
    KW("numpy", m_numpy),
    {"_make_subclass", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(m_make_subclass)),
     METH_VARARGS | METH_KEYWORDS | METH_STATIC, nullptr},
    KW("as_subclass", m_as_subclass),
    KW("requires_grad_", m_requires_grad_),
    NOARGS("retain_grad", m_retain_grad),
    KW("double", m_double),
    KW("float", m_float),
    KW("half", m_half),
    KW("bfloat16", m_bfloat16),
    KW("int", m_int),
    KW("long", m_long),
    KW("short", m_short),
    KW("char", m_char),
    KW("byte", m_byte),
    KW("bool", m_bool),
    KW("cpu", m_cpu),
    KW("to", m_to),
    KW("nonzero", m_nonzero),
    NOARGS("__invert__", m_invert),
    KW("cuda", m_cuda),
    KW("ipu", m_unlinked_device<"ipu">),
    KW("xpu", m_unlinked_device<"xpu">),
    KW("cfloat", m_refuse_complex),
    KW("cdouble", m_refuse_complex),
    KW("type", m_type),
    KW("new_tensor", m_new_tensor),
    NOARGS("_storage", m_storage),
    NOARGS("storage_type", m_storage_type),
    KW("new", m_new),
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

// torch._C._nn._parse_to: nn.Module.to's arguments as (device, dtype, non_blocking,
// memory_format), each None when not given; the device is checked later, by Tensor.to.
PyObject* f_parse_to(PyObject*, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  const ToArguments parsed = parse_to_arguments(args, kwargs);
  if (parsed.copy_given) raise(PyExc_RuntimeError, ".to() does not accept copy argument");
  PyObject* device = parsed.device ? parsed.device.get() : Py_None;
  PyObject* dtype = parsed.dtype ? dtype_object(*parsed.dtype) : Py_None;
  PyObject* memory_format = parsed.memory_format ? parsed.memory_format.get() : Py_None;
  return PyTuple_Pack(4, device, dtype, parsed.non_blocking ? Py_True : Py_False, memory_format);
  TN_PY_CATCH(nullptr)
}

PyObject* nonzero_function(PyObject*, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 1) {
    PyErr_SetString(PyExc_TypeError, "nonzero() takes exactly one positional argument (input)");
    return nullptr;
  }
  return nonzero_impl(PyTuple_GET_ITEM(args, 0), kwargs);
}

void add_tensor_methods(PyObject* type_dict) {
  for (PyMethodDef* def = handwritten_methods; def->ml_name; ++def) {
    Ref descr(def->ml_flags & METH_STATIC
                  ? PyStaticMethod_New(Ref(PyCFunction_NewEx(def, nullptr, nullptr)).get())
                  : PyDescr_NewMethod(tensor_base_type, def));
    PyDict_SetItemString(type_dict, def->ml_name, descr.get());
  }
}

}  // namespace tn::py
