// PyInit__C: assembles torch._C from the tensor type, the value types, the generated
// operator bindings, the dispatcher surface, and the refusing remainder of the stubs.
#include <sys/prctl.h>

#include <functional>
#include <map>
#include <set>
#include <utility>

#include "python_shim.h"
#include "surface_table.h"

namespace tn::py {

void fill_return_types(PyObject* module);
void init_indexing(PyObject* type_dict);
void answer_not_implemented_on_mismatch(Binding* binding);
void set_torch_api(Binding* binding, PyObject* owner, const std::string& owner_name);

namespace {

// Creates (once) the submodule `qualified` under torch._C (`root`, not yet in
// sys.modules while it initialises) or under an already created submodule.
PyObject* add_submodule(PyObject* root, const char* qualified) {
  PyObject* sys_modules = PyImport_GetModuleDict();
  if (PyObject* existing = PyDict_GetItemString(sys_modules, qualified)) return existing;
  std::string name = qualified;
  std::string parent_name = name.substr(0, name.rfind('.'));
  PyObject* parent = parent_name == "torch._C" ? root : add_submodule(root, parent_name.c_str());
  PyObject* module = PyModule_New(qualified);
  PyDict_SetItemString(sys_modules, qualified, module);
  PyModule_AddObject(parent, name.substr(name.rfind('.') + 1).c_str(),
                     module);  // steals; sys.modules keeps one
  return module;
}

// Maps Python operator dunders onto the aten operator that implements them.
const std::map<std::string, std::string>& dunder_ops() {
  static const std::map<std::string, std::string> m = {
      {"__add__", "add"},
      {"__radd__", "add"},
      {"__iadd__", "add_"},
      {"__sub__", "sub"},
      {"__isub__", "sub_"},
      {"__mul__", "mul"},
      {"__rmul__", "mul"},
      {"__imul__", "mul_"},
      {"__truediv__", "div"},
      {"__div__", "div"},
      {"__idiv__", "div_"},
      {"__itruediv__", "div_"},
      {"__mod__", "remainder"},
      {"__imod__", "remainder_"},
      {"__eq__", "eq"},
      {"__ne__", "ne"},
      {"__lt__", "lt"},
      {"__le__", "le"},
      {"__gt__", "gt"},
      {"__ge__", "ge"},
      {"__matmul__", "matmul"},
      {"__floordiv__", "floor_divide"},
      {"__ifloordiv__", "floor_divide_"},
      {"__invert__", "bitwise_not"},
      {"__rand__", "__and__"},
      {"__ror__", "__or__"},
      {"__rxor__", "__xor__"},
  };
  return m;
}

}  // namespace

void init_op_bindings(PyObject* module) {
  Dispatcher& dispatcher = Dispatcher::instance();
  // Group by (Python module, name) for functions and by name for Tensor methods.
  std::map<std::pair<std::string, std::string>, std::vector<Operator*>> functions;
  std::map<std::string, std::vector<Operator*>> methods;
  for (const auto& op : dispatcher.all()) {
    if (op->schema.ns != "aten") continue;
    const std::string& name = op->schema.name;
    if (op->variants & 1) functions[{op->python_module, name}].push_back(op.get());
    if (op->variants & 2) methods[name].push_back(op.get());
  }
  PyObject* variable_functions = add_submodule(module, "torch._C._VariableFunctions");
  std::map<std::string, PyObject*> submodules = {{"", variable_functions}};
  for (const char* sub : {"nn", "linalg", "special", "fft", "sparse", "nested"})
    submodules[sub] = add_submodule(module, (std::string("torch._C._") + sub).c_str());
  for (auto& [key, ops] : functions) {
    auto it = submodules.find(key.first);
    if (it == submodules.end()) continue;
    const std::string& name = key.second;
    std::string python_name = name;
    if (!key.first.empty() && python_name.rfind(key.first + "_", 0) == 0)
      python_name = python_name.substr(key.first.size() + 1);  // linalg_det -> det
    const char* module_name =
        key.first.empty() ? "torch._C._VariableFunctions" : PyModule_GetName(it->second);
    Binding* binding = make_binding(name, ops, false, false);
    set_torch_api(binding, it->second, key.first.empty() ? "torch" : "torch." + key.first);
    Ref f(new_function(python_name, binding, module_name));
    PyModule_AddObject(it->second, python_name.c_str(), f.release());
    if (!key.first.empty() && python_name != name) {
      Ref again(new_function(name, binding, module_name));
      PyModule_AddObject(it->second, name.c_str(), again.release());
    }
  }
  PyObject* type_dict = tensor_base_type->tp_dict;
  for (auto& [name, ops] : methods) {
    // Properties upstream binds by hand (T, mT, H, mH, real, imag...) stay properties.
    if (PyObject* existing = PyDict_GetItemString(type_dict, name.c_str());
        existing && Py_TYPE(existing) == &PyGetSetDescr_Type)
      continue;
    Ref m(new_method_descriptor(name, make_binding(name, ops, true, false)));
    PyDict_SetItemString(type_dict, name.c_str(), m.get());
  }
  for (const auto& [dunder, target] : dunder_ops()) {
    auto it = methods.find(target);
    if (it == methods.end()) continue;
    Binding* binding = make_binding(target, it->second, true, false);
    answer_not_implemented_on_mismatch(binding);
    Ref m(new_method_descriptor(dunder, binding));
    PyDict_SetItemString(type_dict, dunder.c_str(), m.get());
  }
  add_tensor_methods(type_dict);
  init_indexing(type_dict);
  PyType_Modified(tensor_base_type);
  fill_return_types(add_submodule(module, "torch._C._return_types"));
}

namespace {

// ---- hand-written module functions ----

PyObject* f_tensor(PyObject*, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"data", "dtype", "device", "requires_grad", "pin_memory", nullptr};
  PyObject *data, *dtype = Py_None, *device = Py_None;
  int requires_grad = 0, pin = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OOpp", const_cast<char**>(keywords), &data, &dtype,
                                   &device, &requires_grad, &pin))
    return nullptr;
  if (dtype != Py_None && !is_dtype(dtype)) {
    PyErr_SetString(PyExc_TypeError, "tensor(): argument 'dtype' must be torch.dtype");
    return nullptr;
  }
  Tensor t = on_device(
      tensor_from_python_data(data, dtype == Py_None ? std::nullopt : std::optional(dtype_of(dtype))),
      device_is_meta(device));
  if (requires_grad && !is_floating(t.dtype())) {
    PyErr_SetString(PyExc_RuntimeError,
                    "Only Tensors of floating point and complex dtype can require gradients");
    return nullptr;
  }
  t.impl()->requires_grad = requires_grad;
  return wrap(t);
  TN_PY_CATCH(nullptr)
}

PyObject* f_as_tensor(PyObject*, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"data", "dtype", "device", nullptr};
  PyObject *data, *dtype = Py_None, *device = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO", const_cast<char**>(keywords), &data, &dtype,
                                   &device))
    return nullptr;
  const bool meta = device_is_meta(device);  // to the meta device: a meta tensor of the same shape
  std::optional<ScalarType> type;
  if (dtype != Py_None) type = dtype_of(dtype);
  if (is_tensor(data)) return wrap(on_device(type ? ops::to_dtype(unpack(data), *type) : unpack(data), meta));
  if (std::string(Py_TYPE(data)->tp_name) == "numpy.ndarray") {
    Ref torch(PyImport_ImportModule("torch"));
    Ref shared(PyObject_CallMethod(torch.get(), "from_numpy", "O", data));
    if (!shared) return nullptr;
    return wrap(on_device(type ? unpack(shared.get()).to(*type) : unpack(shared.get()), meta));
  }
  return wrap(on_device(tensor_from_python_data(data, type), meta));
  TN_PY_CATCH(nullptr)
}

// A borrowed storage's release: holds a reference to the Python object owning the memory
// and drops it, under the GIL, when the storage lets go.
std::function<void()> keeping_alive(PyObject* owner) {
  Py_XINCREF(owner);
  return [owner] {
    PyGILState_STATE state = PyGILState_Ensure();
    Py_XDECREF(owner);
    PyGILState_Release(state);
  };
}

// torch.from_numpy: shares the array's memory; the tensor keeps the array alive.
PyObject* f_from_numpy(PyObject*, PyObject* array) {
  TN_PY_TRY
  if (std::string(Py_TYPE(array)->tp_name) != "numpy.ndarray") {
    PyErr_Format(PyExc_TypeError, "expected np.ndarray (got %s)", Py_TYPE(array)->tp_name);
    return nullptr;
  }
  Ref iface(PyObject_GetAttrString(array, "__array_interface__"));
  if (!iface) return nullptr;
  std::string typestr = PyUnicode_AsUTF8(PyDict_GetItemString(iface.get(), "typestr"));
  static const std::map<std::string, ScalarType> types = {
      {"|u1", ScalarType::Byte},  {"|i1", ScalarType::Char},   {"<i2", ScalarType::Short},
      {"<i4", ScalarType::Int},   {"<i8", ScalarType::Long},   {"<f2", ScalarType::Half},
      {"<f4", ScalarType::Float}, {"<f8", ScalarType::Double}, {"|b1", ScalarType::Bool}};
  auto it = types.find(typestr);
  if (it == types.end()) {
    PyErr_Format(PyExc_TypeError,
                 "can't convert np.ndarray of type %s. The only supported types are: float64, float32, "
                 "float16, complex64, complex128, int64, int32, int16, int8, uint8, and bool.",
                 typestr.c_str());
    return nullptr;
  }
  PyObject* data_tuple = PyDict_GetItemString(iface.get(), "data");
  void* data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data_tuple, 0));
  PyObject* shape_obj = PyDict_GetItemString(iface.get(), "shape");
  PyObject* strides_obj = PyDict_GetItemString(iface.get(), "strides");
  size_t itemsize = element_size(it->second);
  Shape shape, strides;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape_obj); ++i)
    shape.push_back(unpack_long(PyTuple_GET_ITEM(shape_obj, i)));
  if (strides_obj == Py_None) {
    strides = contiguous_strides(shape);
  } else {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(strides_obj); ++i) {
      int64_t bytes = unpack_long(PyTuple_GET_ITEM(strides_obj, i));
      if (bytes < 0 || bytes % int64_t(itemsize) != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "At least one stride in the given numpy array is negative, and tensors with negative "
                        "strides are not currently supported. (You can probably work around this by making a "
                        "copy of your array  with array.copy().) ");
        return nullptr;
      }
      strides.push_back(bytes / int64_t(itemsize));
    }
  }
  int64_t extent = 1;
  for (size_t d = 0; d < shape.size(); ++d) extent += (shape[d] - 1) * strides[d];
  auto storage = std::make_shared<Storage>(data, size_t(extent) * itemsize, keeping_alive(array));
  return wrap(Tensor::from_storage(storage, shape, strides, 0, it->second));
  TN_PY_CATCH(nullptr)
}

// torch.frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False): a 1-D tensor
// on the buffer's memory (bytes, bytearray, array, mmap ...), which it keeps alive.
PyObject* f_frombuffer(PyObject*, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"buffer", "dtype", "count", "offset", "requires_grad", nullptr};
  PyObject *buffer = nullptr, *dtype = nullptr;
  long long count = -1, offset = 0;
  int requires_grad = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OLLp:frombuffer", const_cast<char**>(keywords), &buffer,
                                   &dtype, &count, &offset, &requires_grad))
    return nullptr;
  if (!dtype || !is_dtype(dtype)) {
    PyErr_SetString(PyExc_TypeError, "frombuffer(): argument 'dtype' must be torch.dtype");
    return nullptr;
  }
  ScalarType type = dtype_of(dtype);
  long long itemsize = (long long)element_size(type);  // refuses an unstored dtype before the buffer is held
  Py_buffer view;
  if (PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE) < 0) {
    PyErr_Clear();
    if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) {
      PyErr_SetString(PyExc_RuntimeError, "could not retrieve buffer from object");
      return nullptr;
    }
    static bool warned = false;  // upstream warns once per process
    if (!std::exchange(warned, true) &&
        PyErr_WarnEx(
            PyExc_UserWarning,
            "The given buffer is not writable, and PyTorch does not support non-writable tensors. This "
            "means you can write to the underlying (supposedly non-writable) buffer using the tensor. You "
            "may want to copy the buffer to protect its data or make it writable before converting it to "
            "a tensor. This type of warning will be suppressed for the rest of this program.",
            1) < 0) {
      PyBuffer_Release(&view);
      return nullptr;
    }
  }
  long long length = view.len;
  char* data = static_cast<char*>(view.buf);
  std::function<void()> release = keeping_alive(view.obj);
  PyBuffer_Release(&view);
  auto refuse = [&](const std::string& message) {
    release();
    throw ValueError(message);
  };
  auto n = [](long long v) { return std::to_string(v); };
  if (length <= 0 || count == 0)
    refuse("both buffer length (" + n(length) + ") and count (" + n(count) + ") must not be 0");
  if (offset < 0 || offset >= length)
    refuse("offset (" + n(offset) + " bytes) must be non-negative and no greater than buffer length (" +
           n(length) + " bytes) minus 1");
  if (count < 0 && (length - offset) % itemsize != 0)
    refuse("buffer length (" + n(length - offset) + " bytes) after offset (" + n(offset) +
           " bytes) must be a multiple of element size (" + n(itemsize) + ")");
  long long elements = count < 0 ? (length - offset) / itemsize : count;
  if (offset + elements * itemsize > length)
    refuse("requested buffer length (" + n(elements) + " * " + n(itemsize) + " bytes) after offset (" +
           n(offset) + " bytes) must not be greater than actual buffer length (" + n(length) + " bytes)");
  auto storage = std::make_shared<Storage>(data + offset, size_t(elements * itemsize), release);
  Tensor tensor = Tensor::from_storage(storage, {elements}, {1}, 0, type);
  tensor.impl()->requires_grad = requires_grad != 0;
  return wrap(tensor);
  TN_PY_CATCH(nullptr)
}

PyObject* f_get_default_dtype(PyObject*, PyObject*) {
  PyObject* d = dtype_object(default_dtype());
  Py_INCREF(d);
  return d;
}
// torch.Storage names the default dtype's legacy storage class (torch.FloatStorage), as
// upstream keeps it from _initExtension on.
bool point_torch_storage_at_default() {
  Ref torch(PyImport_ImportModule("torch"));
  if (!torch) return false;
  const char* name = default_dtype() == ScalarType::Double ? "DoubleStorage" : "FloatStorage";
  Ref storage(PyObject_GetAttrString(torch.get(), name));
  return storage && PyObject_SetAttrString(torch.get(), "Storage", storage.get()) == 0;
}

PyObject* f_set_default_dtype(PyObject*, PyObject* dtype) {
  if (!is_dtype(dtype) || !is_floating(dtype_of(dtype)) || dtype_of(dtype) == ScalarType::BFloat16 ||
      dtype_of(dtype) == ScalarType::Half) {
    PyErr_SetString(PyExc_TypeError, "only floating-point types are supported as the default type");
    return nullptr;
  }
  set_default_dtype(dtype_of(dtype));
  if (!point_torch_storage_at_default()) return nullptr;
  Py_RETURN_NONE;
}
PyObject* f_none(PyObject*, PyObject*) { Py_RETURN_NONE; }
PyObject* f_false(PyObject*, PyObject*) { Py_RETURN_FALSE; }
PyObject* f_true(PyObject*, PyObject*) { Py_RETURN_TRUE; }
PyObject* f_ignore(PyObject*, PyObject*) { Py_RETURN_NONE; }

PyObject* f_init_extension(PyObject*, PyObject* /*shm_manager_path*/) {
  Ref torch(PyImport_ImportModule("torch"));
  if (!torch) return nullptr;
  tensor_class = PyObject_GetAttrString(torch.get(), "Tensor");
  if (!tensor_class) return nullptr;
  TN_PY_TRY
  Ref c_module(PyImport_ImportModule("torch._C"));
  if (!c_module) return nullptr;
  install_legacy_tensor_types(torch.get(), c_module.get());
  if (!point_torch_storage_at_default()) return nullptr;
  Py_RETURN_NONE;
  TN_PY_CATCH(nullptr)
}

// _add_docstr(obj, doc): upstream attaches docs to builtins once, at import.
PyObject* f_add_docstr(PyObject*, PyObject* args) {
  PyObject *obj, *doc;
  if (!PyArg_ParseTuple(args, "OO!", &obj, &PyUnicode_Type, &doc)) return nullptr;
  Py_INCREF(doc);  // kept for the process lifetime, as the C strings point into it
  const char* text = PyUnicode_AsUTF8(doc);
  if (PyCFunction_Check(obj)) {
    reinterpret_cast<PyCFunctionObject*>(obj)->m_ml->ml_doc = text;
  } else if (Py_TYPE(obj) == &PyMethodDescr_Type) {
    reinterpret_cast<PyMethodDescrObject*>(obj)->d_method->ml_doc = text;
  } else if (Py_TYPE(obj) == &PyGetSetDescr_Type) {
    reinterpret_cast<PyGetSetDescrObject*>(obj)->d_getset->doc = text;
  } else if (PyType_Check(obj)) {
    reinterpret_cast<PyTypeObject*>(obj)->tp_doc = text;
  } else if (PyObject_SetAttrString(obj, "__doc__", doc) < 0) {
    PyErr_Clear();
  }
  Py_INCREF(obj);
  return obj;
}

// prctl(PR_SET_PDEATHSIG): spawned workers die with their parent.
PyObject* f_set_pdeathsig(PyObject*, PyObject* signal) {
  long sig = PyLong_AsLong(signal);
  if (sig == -1 && PyErr_Occurred()) return nullptr;
  if (prctl(PR_SET_PDEATHSIG, sig) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  Py_RETURN_NONE;
}
PyMethodDef set_pdeathsig_def = {"_prctl_pr_set_pdeathsig", f_set_pdeathsig, METH_O, nullptr};

// Upstream adds _prctl_pr_set_pdeathsig to torch.multiprocessing here. (It also wires
// shared-memory tensor passing, which the shim does not have yet.)
PyObject* f_multiprocessing_init(PyObject*, PyObject*) {
  Ref mp(PyImport_ImportModule("torch.multiprocessing"));
  if (!mp) return nullptr;
  Ref fn(PyCFunction_NewEx(&set_pdeathsig_def, nullptr, nullptr));
  if (PyObject_SetAttrString(mp.get(), "_prctl_pr_set_pdeathsig", fn.get()) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* f_default_device(PyObject*, PyObject*) { return PyUnicode_FromString("cpu"); }

// torch.nn.functional.binary_cross_entropy broadcasts its weight with it: two torch.Size, the
// broadcast torch.Size, upstream's messages.
PyObject* f_infer_size(PyObject*, PyObject* args) {
  TN_PY_TRY
  if (PyTuple_GET_SIZE(args) != 2) {
    PyErr_SetString(PyExc_RuntimeError, "expected exactly 2 arguments");
    return nullptr;
  }
  Shape shapes[2];
  for (Py_ssize_t i = 0; i < 2; ++i) {
    PyObject* size = PyTuple_GET_ITEM(args, i);
    if (!is_size(size)) {
      PyErr_Format(PyExc_RuntimeError, "expected a torch.Size as argument %zd", i + 1);
      return nullptr;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(size); ++k)
      shapes[i].push_back(PyLong_AsLongLong(PyTuple_GET_ITEM(size, k)));
  }
  return make_size(broadcast_shapes(shapes[0], shapes[1]));
  TN_PY_CATCH(nullptr)
}

#define NOARGS(NAME, FN) \
  { NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(FN)), METH_NOARGS, nullptr }
#define ONE(NAME, FN) \
  { NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(FN)), METH_O, nullptr }
#define VAR(NAME, FN) \
  { NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(FN)), METH_VARARGS, nullptr }
#define KW(NAME, FN) \
  { NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(FN)), METH_VARARGS | METH_KEYWORDS, nullptr }

PyMethodDef module_functions[] = {
    ONE("_initExtension", f_init_extension),
    ONE("_has_storage", f_true),  // every shim tensor has a storage
    VAR("_add_docstr", f_add_docstr),
    NOARGS("get_default_dtype", f_get_default_dtype),
    ONE("_set_default_dtype", f_set_default_dtype),
    NOARGS("_get_tracing_state", f_none),
    NOARGS("_is_tracing", f_false),
    NOARGS("_is_torch_function_mode_enabled", f_false),
    NOARGS("_is_mps_available", f_false),             // torch.backends.mps.is_available(): no Metal here
    NOARGS("_get_default_device", f_default_device),  // the only device there is
    VAR("_infer_size", f_infer_size),
    ONE("_init_names", f_ignore),
    // Upstream reports API usage to its telemetry hook; the shim reports nothing.
    ONE("_log_api_usage_once", f_ignore),
    NOARGS("_get_backcompat_broadcast_warn", f_false),
    NOARGS("_get_backcompat_keepdim_warn", f_false),
    NOARGS("is_anomaly_enabled", f_false),
    NOARGS("is_anomaly_check_nan_enabled", f_false),
    NOARGS("is_autocast_enabled", f_false),
    NOARGS("is_autocast_cpu_enabled", f_false),
    NOARGS("_get_deterministic_algorithms", f_false),
    NOARGS("_get_deterministic_algorithms_warn_only", f_false),
    NOARGS("_are_functorch_transforms_active", f_false),
    NOARGS("_is_xnnpack_enabled", f_false),
    NOARGS("_get_cudnn_enabled", f_false),
    NOARGS("_get_warnAlways", f_false),
    NOARGS("_get_qengine", f_none),
    // torch._C._autograd's names come from the stub surface; nothing more to set up.
    NOARGS("_autograd_init", f_true),
    // Only tells the tracer to warn through Python; the shim has no tracer.
    NOARGS("_tracer_warn_use_python", f_none),
    // torch.jit asks for its bindings to be set up; the JIT surface is the refusing stubs.
    NOARGS("_jit_init", f_true),
    NOARGS("_multiprocessing_init", f_multiprocessing_init),
    {nullptr, nullptr, 0, nullptr},
};

// Upstream writes these torch.* functions by hand and exposes them through
// torch._C._VariableFunctions, like the generated ones.
PyObject* f_numel(PyObject*, PyObject* arg) {
  if (!is_tensor(arg)) {
    PyErr_Format(PyExc_TypeError, "numel(): argument 'input' (position 1) must be Tensor, not %s",
                 Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  return PyLong_FromLongLong(unpack(arg).numel());
}
PyObject* f_minus_one(PyObject*, PyObject*) { return PyLong_FromLong(-1); }

PyMethodDef handwritten_variable_functions[] = {
    ONE("numel", f_numel),
    ONE("_is_functional_tensor", f_false),  // no functionalization wrappers exist here
    KW("nonzero", nonzero_function),
    KW("tensor", f_tensor),
    KW("as_tensor", f_as_tensor),
    ONE("from_numpy", f_from_numpy),
    KW("frombuffer", f_frombuffer),
    {nullptr, nullptr, 0, nullptr},
};

// ---- the refusing remainder of the stubs ----

PyObject* refuse(PyObject* self, PyObject*, PyObject*) {
  PyErr_Format(PyExc_NotImplementedError,
               "torchnative does not implement %U; upstream provides it in libtorch_python", self);
  return nullptr;
}
PyMethodDef refuse_def = {"refused", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(refuse)),
                          METH_VARARGS | METH_KEYWORDS, nullptr};

PyObject* refusing_function(const std::string& qualified, const char* name) {
  Ref label(PyUnicode_FromString(qualified.c_str()));
  auto* def = new PyMethodDef{strdup(name), refuse_def.ml_meth, refuse_def.ml_flags, nullptr};
  return PyCFunction_NewEx(def, label.get(), nullptr);
}

PyObject* accept_anything(PyObject*, PyObject*, PyObject*) { Py_RETURN_NONE; }
PyMethodDef accept_anything_def = {"__init__",
                                   reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(accept_anything)),
                                   METH_VARARGS | METH_KEYWORDS, nullptr};
// The TorchScript call stack, which is empty whenever no script is being compiled (always, here).
PyObject* empty_call_stack(PyObject*, PyObject*) { return PyUnicode_FromString(""); }
PyMethodDef empty_call_stack_def = {"call_stack", empty_call_stack, METH_NOARGS, nullptr};

// Submodules of upstream's _C that have no stub: whatever is asked of them is a class
// whose every use refuses by its qualified name.
PyObject* stubless_getattr(PyObject* module, PyObject* name) {
  const char* text = PyUnicode_AsUTF8(name);
  if (text[0] == '_' && text[1] == '_') {
    PyErr_Format(PyExc_AttributeError, "module '%s' has no attribute '%s'", PyModule_GetName(module), text);
    return nullptr;
  }
  std::string qualified = std::string(PyModule_GetName(module)) + "." + text;
  Ref dict(PyDict_New());
  PyDict_SetItemString(dict.get(), "__module__", Ref(PyUnicode_FromString(PyModule_GetName(module))).get());
  // Construction is allowed (upstream's Python builds some of these, e.g. the JIT's
  // SourceRangeFactory, at import time); any attribute they lack is an AttributeError
  // naming this class.
  Ref init(PyInstanceMethod_New(Ref(PyCFunction_NewEx(&accept_anything_def, nullptr, nullptr)).get()));
  PyDict_SetItemString(dict.get(), "__init__", init.get());
  PyObject* cls = PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyType_Type), "s(O)O", text,
                                        reinterpret_cast<PyObject*>(&PyBaseObject_Type), dict.get());
  if (cls) PyObject_SetAttr(module, name, cls);
  return cls;
}
PyMethodDef stubless_getattr_def = {"__getattr__", stubless_getattr, METH_O, nullptr};

// Upstream signals "built without this feature" by the absence of these names, so
// torch.distributed.rpc.is_available(), is_gloo_available() and friends answer False instead of
// failing. Our collectives are backend="local" (ProcessGroupLocal).
bool absent_by_design(const std::string& name) {
  return name == "_rpc_init" || name == "_dist_autograd_init" || name == "_faulty_agent_init" ||
         name == "ProcessGroupGloo" || name == "_ProcessGroupWrapper" || name == "ProcessGroupNCCL" ||
         name == "ProcessGroupUCC" || name == "ProcessGroupMPI";
}

}  // namespace

void init_surface(PyObject* module) {
  init_futures(module);  // before c10d, whose Work.get_future returns one
  // Constants the stubs only annotate; values are upstream's.
  PyObject* c10d = add_submodule(module, "torch._C._distributed_c10d");
  init_c10d(module, c10d);

  PyModule_AddObject(c10d, "_DEFAULT_FIRST_BUCKET_BYTES", PyLong_FromLong(1024 * 1024));
  Ref meta_dict(PyDict_New());
  PyObject* stub_metaclass =
      PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyType_Type), "s(O)O", "_StubType",
                            reinterpret_cast<PyObject*>(&PyType_Type), meta_dict.get());
  if (!stub_metaclass) throw PythonErrorSet();
  Ref enum_module(PyImport_ImportModule("enum"));
  std::map<std::pair<std::string, std::string>, PyObject*> classes;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> enum_members;
  auto module_for = [&](const std::string& name) {
    return name == "torch._C" ? module : add_submodule(module, name.c_str());
  };
  for (size_t i = 0; i < kSurfaceTableSize; ++i) {
    const SurfaceRow& row = kSurfaceTable[i];
    if (std::string(row.kind) == "member") enum_members[{row.module, row.owner}].push_back(row.name);
  }
  for (size_t i = 0; i < kSurfaceTableSize; ++i) {
    const SurfaceRow& row = kSurfaceTable[i];
    std::string kind = row.kind;
    PyObject* mod = module_for(row.module);
    std::string qualified =
        std::string(row.module) + "." + (row.owner[0] ? std::string(row.owner) + "." : "") + row.name;
    if (row.owner[0] == 0) {
      if (PyObject_HasAttrString(mod, row.name) || absent_by_design(row.name)) continue;
      if (kind == "function") {
        // _VariableFunctions also lists functions torch._C defines at top level.
        PyObject* top = std::string(row.module) == "torch._C._VariableFunctions"
                            ? PyDict_GetItemString(PyModule_GetDict(module), row.name)
                            : nullptr;
        PyModule_AddObject(mod, row.name,
                           top ? Ref::borrow(top).release() : refusing_function(qualified, row.name));
      } else if (kind == "enum") {
        // Enum members are data, not behaviour: create them with distinct values.
        Ref names(PyList_New(0));
        for (const std::string& m : enum_members[{row.module, row.name}])
          PyList_Append(names.get(), Ref(PyUnicode_FromString(m.c_str())).get());
        if (PyList_GET_SIZE(names.get()) == 0)
          PyList_Append(names.get(), Ref(PyUnicode_FromString("Undefined")).get());
        Ref e(PyObject_CallMethod(enum_module.get(), "IntEnum", "sO", row.name, names.get()));
        if (!e) throw PythonErrorSet();
        PyObject_SetAttrString(e.get(), "__module__", Ref(PyUnicode_FromString(row.module)).get());
        PyModule_AddObject(mod, row.name, e.release());
      } else if (kind == "class") {
        Ref dict(PyDict_New());
        PyDict_SetItemString(dict.get(), "__module__", Ref(PyUnicode_FromString(row.module)).get());
        // Their own metaclass, like upstream's pybind11 classes, so Python code that
        // combines type(cls) with other metaclasses gets distinct bases.
        // Upstream's raw CPython types (not pybind11) have plain `type` as metaclass.
        static const std::set<std::string> raw_types = {"_LegacyVariableBase", "_FunctionBase",
                                                        "_ImperativeEngine",   "StorageBase",
                                                        "_CudaStreamBase",     "_CudaEventBase"};
        PyObject* metaclass =
            raw_types.count(row.name) ? reinterpret_cast<PyObject*>(&PyType_Type) : stub_metaclass;
        Ref cls(PyObject_CallFunction(metaclass, "s(O)O", row.name,
                                      reinterpret_cast<PyObject*>(&PyBaseObject_Type), dict.get()));
        if (!cls) throw PythonErrorSet();
        classes[{row.module, row.name}] = cls.get();
        PyModule_AddObject(mod, row.name, cls.release());
      }
    } else if (kind == "method" && std::string(row.owner) == "_TensorBase") {
      // Tensor methods upstream writes by hand and we have not: refuse by name.
      if (PyObject_HasAttrString(reinterpret_cast<PyObject*>(tensor_base_type), row.name))
        continue;  // own or inherited
      Ref f(refusing_function("torch.Tensor." + std::string(row.name), row.name));
      PyDict_SetItemString(tensor_base_type->tp_dict, row.name, Ref(PyInstanceMethod_New(f.get())).get());
      PyType_Modified(tensor_base_type);
    } else if (kind == "method") {
      auto it = classes.find({row.module, row.owner});
      if (it == classes.end()) continue;  // a class we implement ourselves
      std::string method = row.name;
      if (method == "__init__" || method == "__new__") continue;  // construction is allowed
      Ref f(refusing_function(qualified, row.name));
      Ref as_method(PyInstanceMethod_New(f.get()));
      PyObject_SetAttrString(it->second, row.name, as_method.get());
    }
  }
  // Installed last: the stub rows above must see only real attributes.
  for (const char* sub : {"torch._C._jit_tree_views",
                          "torch._C._jit",
                          "torch._C._te",
                          "torch._C._functorch",
                          "torch._C.cpp",
                          "torch._C.cpp.nn",
                          "torch._C._functions",
                          "torch._C._cuda",
                          "torch._C._itt",
                          "torch._C._nvtx",
                          "torch._C._cudnn",
                          "torch._C._onnx",
                          "torch._C._distributed_rpc",
                          "torch._C._autograd",
                          "torch._C._distributed_autograd",
                          "torch._C._profiler",
                          "torch._C._monitor",
                          "torch._C._lazy",
                          "torch._C._lazy_ts_backend",
                          "torch._C._verbose"}) {
    PyObject* m = add_submodule(module, sub);
    Ref getattr(PyCFunction_NewEx(&stubless_getattr_def, m, nullptr));
    PyModule_AddObject(m, "__getattr__", getattr.release());
  }
  Ref report(PyObject_GetAttrString(module, "ErrorReport"));
  Ref call_stack(PyCFunction_NewEx(&empty_call_stack_def, nullptr, nullptr));
  PyObject_SetAttrString(report.get(), "call_stack", Ref(PyStaticMethod_New(call_stack.get())).get());
}

namespace {

// functorch's wrapper queries: the shim has no functorch transforms, so no tensor is
// ever a wrapper (and _tensor_str asks on every repr).
PyMethodDef functorch_functions[] = {
    ONE("is_functorch_wrapped_tensor", f_false), ONE("is_batchedtensor", f_false),
    ONE("is_gradtrackingtensor", f_false),       ONE("is_functionaltensor", f_false),
    ONE("maybe_get_level", f_minus_one),         {nullptr, nullptr, 0, nullptr},
};

PyMethodDef nn_functions[] = {
    {"_parse_to", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(f_parse_to)),
     METH_VARARGS | METH_KEYWORDS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                          "torch._C",
                          "torchnative's torch._C",
                          -1,
                          module_functions,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr};

}  // namespace

void init_dispatch(PyObject* module);
void init_runtime_settings(PyObject* module);
void init_autograd_mode(PyObject* module);
void init_dataloader_workers(PyObject* module);
void init_torch_function(PyObject* module);

}  // namespace tn::py

PyMODINIT_FUNC PyInit__C() {
  using namespace tn::py;
  PyObject* module = PyModule_Create(&module_def);
  if (!module) return nullptr;
  try {
    install_library_guard();
    init_tensor_type(module);
    init_value_types(module);
    init_generator(module);
    init_storage_type(module);
    init_serialization(module);
    init_op_bindings(module);
    PyModule_AddFunctions(PyDict_GetItemString(PyImport_GetModuleDict(), "torch._C._VariableFunctions"),
                          handwritten_variable_functions);
    PyModule_AddFunctions(add_submodule(module, "torch._C._functorch"), functorch_functions);
    PyModule_AddFunctions(add_submodule(module, "torch._C._nn"), nn_functions);
    init_dispatch(module);
    init_runtime_settings(module);
    init_autograd_mode(module);
    init_autograd_graph(module);
    init_dataloader_workers(module);
    init_torch_function(module);
    for (const char* flag : {"has_cuda", "has_cudnn", "has_mps", "has_mkl", "has_mkldnn", "has_openmp",
                             "has_lapack", "has_spectral", "_has_distributed"})
      PyModule_AddObject(module, flag, tn::py::Ref::borrow(Py_False).release());
    PyModule_AddObject(module, "_GLIBCXX_USE_CXX11_ABI", tn::py::Ref::borrow(Py_True).release());
    linalg_error_type = PyErr_NewException("torch._C._LinAlgError", PyExc_RuntimeError, nullptr);
    PyModule_AddObject(module, "_LinAlgError", tn::py::Ref::borrow(linalg_error_type).release());
    PyModule_AddObject(module, "_OutOfMemoryError",
                       PyErr_NewException("torch._C._OutOfMemoryError", PyExc_RuntimeError, nullptr));
    init_surface(module);
    init_jit_types(module);
  } catch (const PythonErrorSet&) {
    Py_DECREF(module);
    return nullptr;
  } catch (const std::exception& e) {
    set_python_error(e);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
