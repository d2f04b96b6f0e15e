// The legacy constructors: torch.Tensor(...), Tensor.new(...) and the typed classes
// torch.FloatTensor & co., whose metaclass is torch.tensortype. Upstream's own Python still
// calls them (torch.distributed's *_object collectives build torch.ByteTensor from a storage;
// torch.set_default_tensor_type takes them).
#include <map>

#include "python_shim.h"

namespace tn::py {

namespace {

std::string options_text(ScalarType type) {
  return std::string("TensorOptions(dtype=") + cpp_type_name(type) +
         ", device=cpu, layout=Strided, requires_grad=false (default), pinned_memory=false (default), "
         "memory_format=(nullopt))";
}

void check_keywords(PyObject* kwargs) {
  if (!kwargs) return;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs, &pos, &key, &value)) {
    std::string name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : "?";
    if (name == "cdata")
      raise(PyExc_NotImplementedError,
            "torchnative: new(cdata=...) wraps a raw TensorImpl pointer, which the shim never hands out");
    if (name != "device") raise(PyExc_TypeError, "new() got an unexpected keyword argument '" + name + "'");
    if (value == Py_None) continue;
    if (const std::string type = device_type_name(value); type != "cpu")
      raise(PyExc_RuntimeError,
            "legacy constructor expects device type: cpu but device type: " + type + " was passed");
  }
}

}  // namespace

Tensor legacy_construct(ScalarType dtype, PyObject* args, PyObject* kwargs) {
  check_keywords(kwargs);
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n == 0) return Tensor::empty({0}, dtype);
  PyObject* first = PyTuple_GET_ITEM(args, 0);
  bool all_ints = true;
  for (Py_ssize_t i = 0; i < n; ++i) all_ints = all_ints && is_int_like(PyTuple_GET_ITEM(args, i));
  if (all_ints) {
    Shape sizes;
    for (Py_ssize_t i = 0; i < n; ++i) sizes.push_back(as_int(PyTuple_GET_ITEM(args, i)));
    return Tensor::empty(sizes, dtype);
  }
  if (n > 1)
    raise(PyExc_TypeError, std::string("new() received an invalid combination of arguments - got ") +
                               std::to_string(n) +
                               " positional arguments that are not all ints; expected (), (Storage storage), "
                               "(Tensor other), (int... size) or (sequence data)");
  StorageRef storage;
  if (storage_argument(first, &storage)) {
    if (storage.typed_as && *storage.typed_as != dtype)
      raise(PyExc_RuntimeError, std::string("Expected a Storage of type ") + upstream_type_name(dtype) +
                                    " or an UntypedStorage, but got type " +
                                    upstream_type_name(*storage.typed_as) + " for argument 1 'storage'");
    int64_t numel = int64_t(storage.storage->nbytes() / element_size(dtype));
    return Tensor::from_storage(storage.storage, {numel}, {1}, 0, dtype);
  }
  if (is_tensor(first)) {
    const Tensor& other = unpack(first);
    if (other.dtype() != dtype)
      raise(PyExc_TypeError,
            "expected " + options_text(dtype) + " (got " + options_text(other.dtype()) + ")");
    return other.view_as_strided(other.sizes(), other.strides(), other.offset());
  }
  if (is_size(first)) {
    Shape sizes;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(first); ++i)
      sizes.push_back(as_int(PyTuple_GET_ITEM(first, i)));
    return Tensor::empty(sizes, dtype);
  }
  if (!PySequence_Check(first) || PyUnicode_Check(first))
    raise(PyExc_TypeError,
          std::string("new(): data must be a sequence (got ") + Py_TYPE(first)->tp_name + ")");
  return tensor_from_python_data(first, dtype);
}

namespace {

PyObject* legacy_dtype_of(PyObject* cls) {
  Ref dtype(PyObject_GetAttrString(cls, "dtype"));
  if (!dtype || !is_dtype(dtype.get())) {
    PyErr_Clear();
    raise(PyExc_TypeError, "torch.tensortype: the class has no dtype");
  }
  return dtype.release();
}

// tensortype.__call__(cls, *args, **kwargs): the legacy constructor with the class's dtype.
PyObject* tensortype_call(PyObject*, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  PyObject* cls = PyTuple_GET_ITEM(args, 0);
  Ref dtype(legacy_dtype_of(cls));
  Ref rest(PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args)));
  return wrap(legacy_construct(dtype_of(dtype.get()), rest.get(), kwargs));
  TN_PY_CATCH(nullptr)
}

// isinstance(t, torch.FloatTensor): a cpu tensor of that dtype, whatever its Python class.
PyObject* tensortype_instancecheck(PyObject*, PyObject* args) {
  TN_PY_TRY
  PyObject *cls, *instance;
  if (!PyArg_ParseTuple(args, "OO", &cls, &instance)) return nullptr;
  if (!is_tensor(instance)) Py_RETURN_FALSE;
  Ref dtype(legacy_dtype_of(cls));
  return PyBool_FromLong(unpack(instance).dtype() == dtype_of(dtype.get()));
  TN_PY_CATCH(nullptr)
}

PyMethodDef tensortype_call_def = {"__call__",
                                   reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(tensortype_call)),
                                   METH_VARARGS | METH_KEYWORDS, nullptr};
PyMethodDef tensortype_instancecheck_def = {"__instancecheck__", tensortype_instancecheck, METH_VARARGS,
                                            nullptr};

}  // namespace

std::string legacy_class_name(ScalarType dtype) { return std::string(upstream_type_name(dtype)) + "Tensor"; }

void install_legacy_tensor_types(PyObject* torch_module, PyObject* c_module) {
  // The metaclass: methods take the class as their first argument, like any instance method.
  Ref meta_dict(PyDict_New());
  PyDict_SetItemString(meta_dict.get(), "__module__", Ref(PyUnicode_FromString("torch")).get());
  for (PyMethodDef* def : {&tensortype_call_def, &tensortype_instancecheck_def}) {
    Ref function(PyCFunction_NewEx(def, nullptr, nullptr));
    PyDict_SetItemString(meta_dict.get(), def->ml_name, Ref(PyInstanceMethod_New(function.get())).get());
  }
  Ref meta(PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyType_Type), "s(O)O", "tensortype",
                                 reinterpret_cast<PyObject*>(&PyType_Type), meta_dict.get()));
  if (!meta) throw PythonErrorSet();
  Ref registry(PyObject_GetAttrString(torch_module, "_tensor_classes"));
  if (!registry) throw PythonErrorSet();
  for (ScalarType dtype : kLegacyDtypes) {
    const std::string name = legacy_class_name(dtype);
    Ref dict(PyDict_New());
    PyDict_SetItemString(dict.get(), "__module__", Ref(PyUnicode_FromString("torch")).get());
    PyDict_SetItemString(dict.get(), "dtype", dtype_object(dtype));
    PyDict_SetItemString(dict.get(), "layout", strided_layout());
    PyDict_SetItemString(dict.get(), "is_cuda", Py_False);
    PyDict_SetItemString(dict.get(), "is_sparse", Py_False);
    PyDict_SetItemString(dict.get(), "is_sparse_csr", Py_False);
    Ref cls(PyObject_CallFunction(meta.get(), "s(O)O", name.c_str(),
                                  reinterpret_cast<PyObject*>(&PyBaseObject_Type), dict.get()));
    if (!cls) throw PythonErrorSet();
    if (PyObject_SetAttrString(torch_module, name.c_str(), cls.get()) < 0 ||
        PyObject_SetAttrString(c_module, name.c_str(), cls.get()) < 0 ||
        PySet_Add(registry.get(), cls.get()) < 0)
      throw PythonErrorSet();
  }
}

}  // namespace tn::py
