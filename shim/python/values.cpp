// Python value types of torch._C: dtype, layout, memory_format, device, Size,
// finfo/iinfo, and conversions between Python data and tensors.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "python_shim.h"
// After Python.h, which it needs.
#include <structmember.h>

namespace tn::py {

namespace {

// dtype, layout and memory_format objects: an enum code and the name they print as.
struct EnumObject {
  PyObject_HEAD int64_t code;
  PyObject* name;  // "float32", "strided", "contiguous_format"
};

PyTypeObject* dtype_type = nullptr;
PyTypeObject* layout_type = nullptr;
PyTypeObject* memory_format_type = nullptr;
PyTypeObject* device_type = nullptr;
PyTypeObject* size_type = nullptr;
PyObject* dtypes[18] = {};
PyObject* memory_formats[4] = {};
PyObject* strided = nullptr;
PyObject* cpu = nullptr;
PyObject* meta = nullptr;

PyObject* enum_repr(PyObject* self) {
  return PyUnicode_FromFormat("torch.%U", reinterpret_cast<EnumObject*>(self)->name);
}
PyObject* enum_reduce(PyObject* self, PyObject*) {
  // pickle stores the attribute name, looked up on the torch module when loading
  Py_INCREF(reinterpret_cast<EnumObject*>(self)->name);
  return reinterpret_cast<EnumObject*>(self)->name;
}
PyObject* enum_new_refused(PyTypeObject* type, PyObject*, PyObject*) {
  PyErr_Format(PyExc_TypeError, "cannot create '%s' instances", type->tp_name);
  return nullptr;
}

ScalarType code_type(PyObject* self) { return ScalarType(reinterpret_cast<EnumObject*>(self)->code); }
PyObject* dtype_is_floating(PyObject* self, void*) { return PyBool_FromLong(is_floating(code_type(self))); }
PyObject* dtype_is_complex(PyObject* self, void*) {
  int code = int(code_type(self));
  return PyBool_FromLong(code >= 8 && code <= 10);
}
PyObject* dtype_is_signed(PyObject* self, void*) {
  ScalarType t = code_type(self);
  return PyBool_FromLong(is_signed(t) && int(t) != 13 && int(t) != 16 && int(t) != 17);
}

PyMethodDef enum_methods[] = {
    {"__reduce__", enum_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};
PyGetSetDef dtype_getset[] = {
    {"is_floating_point", dtype_is_floating, nullptr, nullptr, nullptr},
    {"is_complex", dtype_is_complex, nullptr, nullptr, nullptr},
    {"is_signed", dtype_is_signed, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject* make_enum_type(const char* name, PyGetSetDef* getset) {
  PyType_Slot slots[] = {
      {Py_tp_repr, reinterpret_cast<void*>(enum_repr)},
      {Py_tp_methods, enum_methods},
      {Py_tp_new, reinterpret_cast<void*>(enum_new_refused)},
      {getset ? Py_tp_getset : 0, getset},
      {0, nullptr},
  };
  PyType_Spec spec = {name, sizeof(EnumObject), 0, Py_TPFLAGS_DEFAULT, slots};
  auto* type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  if (!type) throw PythonErrorSet();
  return type;
}

PyObject* make_enum(PyTypeObject* type, int64_t code, const char* name) {
  auto* obj = PyObject_New(EnumObject, type);
  obj->code = code;
  obj->name = PyUnicode_InternFromString(name);
  return reinterpret_cast<PyObject*>(obj);
}

// ---- device ----
struct DeviceObject {
  PyObject_HEAD PyObject* type;  // str
  int64_t index;                 // -1 when unspecified
};

PyObject* device_new(PyTypeObject* cls, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"type", "index", nullptr};
  PyObject* spec = nullptr;
  PyObject* index = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O", const_cast<char**>(keywords), &spec, &index))
    return nullptr;
  if (PyObject_TypeCheck(spec, device_type)) {
    Py_INCREF(spec);
    return spec;
  }
  std::string type;
  int64_t idx = -1;
  if (PyLong_Check(spec)) {  // an ordinal names a CUDA device, as upstream's do
    TN_PY_TRY idx = unpack_long(spec);
    TN_PY_CATCH(nullptr)
    if (idx < 0) {
      PyErr_SetString(PyExc_RuntimeError, "Device index must not be negative");
      return nullptr;
    }
    type = "cuda";
  } else if (!PyUnicode_Check(spec)) {
    PyErr_SetString(PyExc_TypeError, "device() expects a string or a device");
    return nullptr;
  } else {
    type = PyUnicode_AsUTF8(spec);
  }
  if (auto colon = type.find(':'); colon != std::string::npos) {
    try {
      idx = std::stoll(type.substr(colon + 1));
    } catch (...) {
      PyErr_Format(PyExc_RuntimeError, "Invalid device string: '%s'", type.c_str());
      return nullptr;
    }
    type = type.substr(0, colon);
  }
  static const char* known[] = {"cpu",   "cuda", "meta",   "mps",  "xpu",          "hpu",    "ipu",
                                "xla",   "lazy", "vulkan", "ort",  "mkldnn",       "opengl", "opencl",
                                "ideep", "hip",  "ve",     "fpga", "privateuseone"};
  bool ok = false;
  for (const char* k : known) ok = ok || type == k;
  if (!ok) {
    PyErr_Format(PyExc_RuntimeError,
                 "Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, ort, "
                 "xla, lazy, vulkan, mps, meta, hpu, privateuseone device type at start of device string: %s",
                 type.c_str());
    return nullptr;
  }
  if (index != Py_None) {
    TN_PY_TRY idx = unpack_long(index);
    TN_PY_CATCH(nullptr)
  }
  auto* obj = reinterpret_cast<DeviceObject*>(cls->tp_alloc(cls, 0));
  obj->type = PyUnicode_FromString(type.c_str());
  obj->index = idx;
  return reinterpret_cast<PyObject*>(obj);
}
void device_dealloc(PyObject* self) {
  Py_XDECREF(reinterpret_cast<DeviceObject*>(self)->type);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}
PyObject* device_repr(PyObject* self) {
  auto* d = reinterpret_cast<DeviceObject*>(self);
  if (d->index >= 0) return PyUnicode_FromFormat("device(type='%U', index=%lld)", d->type, d->index);
  return PyUnicode_FromFormat("device(type='%U')", d->type);
}
PyObject* device_str(PyObject* self) {
  auto* d = reinterpret_cast<DeviceObject*>(self);
  if (d->index >= 0) return PyUnicode_FromFormat("%U:%lld", d->type, d->index);
  Py_INCREF(d->type);
  return d->type;
}
PyObject* device_richcompare(PyObject* a, PyObject* b, int op) {
  if (!PyObject_TypeCheck(b, device_type) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
  auto *x = reinterpret_cast<DeviceObject*>(a), *y = reinterpret_cast<DeviceObject*>(b);
  bool eq = x->index == y->index && PyUnicode_Compare(x->type, y->type) == 0;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}
Py_hash_t device_hash(PyObject* self) {
  auto* d = reinterpret_cast<DeviceObject*>(self);
  return PyObject_Hash(d->type) ^ Py_hash_t(d->index + 1);
}
PyObject* device_get_type(PyObject* self, void*) {
  Py_INCREF(reinterpret_cast<DeviceObject*>(self)->type);
  return reinterpret_cast<DeviceObject*>(self)->type;
}
PyObject* device_get_index(PyObject* self, void*) {
  int64_t i = reinterpret_cast<DeviceObject*>(self)->index;
  if (i < 0) Py_RETURN_NONE;
  return PyLong_FromLongLong(i);
}
PyObject* device_reduce(PyObject* self, PyObject*) {
  auto* d = reinterpret_cast<DeviceObject*>(self);
  if (d->index >= 0) return Py_BuildValue("(O(Ol))", Py_TYPE(self), d->type, long(d->index));
  return Py_BuildValue("(O(O))", Py_TYPE(self), d->type);
}
PyGetSetDef device_getset[] = {
    {"type", device_get_type, nullptr, nullptr, nullptr},
    {"index", device_get_index, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};
PyMethodDef device_methods[] = {
    {"__reduce__", device_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};
PyType_Slot device_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(device_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(device_dealloc)},
    {Py_tp_repr, reinterpret_cast<void*>(device_repr)},
    {Py_tp_str, reinterpret_cast<void*>(device_str)},
    {Py_tp_richcompare, reinterpret_cast<void*>(device_richcompare)},
    {Py_tp_hash, reinterpret_cast<void*>(device_hash)},
    {Py_tp_getset, device_getset},
    {Py_tp_methods, device_methods},
    {0, nullptr},
};
PyType_Spec device_spec = {"torch.device", sizeof(DeviceObject), 0, Py_TPFLAGS_DEFAULT, device_slots};

// ---- Size: a tuple subclass ----
PyObject* size_repr(PyObject* self) {
  Ref list(PySequence_List(self));
  Ref inner(PyObject_Repr(list.get()));
  return PyUnicode_FromFormat("torch.Size(%U)", inner.get());
}
PyObject* size_numel(PyObject* self, PyObject*) {
  TN_PY_TRY
  long long n = 1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self); ++i) n *= unpack_long(PyTuple_GET_ITEM(self, i));
  return PyLong_FromLongLong(n);
  TN_PY_CATCH(nullptr)
}
PyObject* size_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  Ref base(PyTuple_Type.tp_new(type, args, kwargs));
  if (!base) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(base.get()); ++i) {
    PyObject* item = PyTuple_GET_ITEM(base.get(), i);
    if (!PyLong_Check(item) && !(is_tensor(item) && unpack(item).dim() == 0)) {
      PyErr_Format(PyExc_TypeError, "torch.Size() takes an iterable of 'int' (item %zd is '%s')", i,
                   Py_TYPE(item)->tp_name);
      return nullptr;
    }
  }
  return base.release();
}
PyObject* size_subscript(PyObject* self, PyObject* key) {
  Ref result(PyTuple_Type.tp_as_mapping->mp_subscript(self, key));
  if (result && PySlice_Check(key))
    return PyObject_CallOneArg(reinterpret_cast<PyObject*>(size_type), result.get());
  return result.release();
}
PyObject* size_reduce(PyObject* self, PyObject*) {
  Ref items(PySequence_Tuple(self));
  return Py_BuildValue("(O(O))", Py_TYPE(self), items.get());
}
PyMethodDef size_methods[] = {
    {"numel", size_numel, METH_NOARGS, nullptr},
    {"__reduce__", size_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};
PyType_Slot size_slots[] = {
    {Py_tp_repr, reinterpret_cast<void*>(size_repr)},
    {Py_tp_new, reinterpret_cast<void*>(size_new)},
    {Py_tp_methods, size_methods},
    {Py_mp_subscript, reinterpret_cast<void*>(size_subscript)},
    {0, nullptr},
};
PyType_Spec size_spec = {"torch.Size", 0, 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, size_slots};

// ---- finfo / iinfo ----
// A finfo or iinfo instance: its fields are instance attributes, as upstream's are.
PyObject* info_object(PyTypeObject* type, std::initializer_list<std::pair<const char*, Ref>> fields) {
  PyObject* obj = type->tp_alloc(type, 0);
  if (!obj) return nullptr;
  Ref dict(PyObject_GenericGetDict(obj, nullptr));
  for (const auto& [name, value] : fields) PyDict_SetItemString(dict.get(), name, value.get());
  return obj;
}

PyObject* finfo_new(PyTypeObject* type, PyObject* args, PyObject*) {
  PyObject* dtype = nullptr;
  if (!PyArg_ParseTuple(args, "|O", &dtype)) return nullptr;
  ScalarType t = dtype ? (is_dtype(dtype) ? dtype_of(dtype) : ScalarType::Undefined) : default_dtype();
  if (!is_floating(t)) {
    PyErr_SetString(PyExc_TypeError, "torch.finfo() requires a floating point input type.");
    return nullptr;
  }
  struct FloatInfo {
    int bits;
    double eps, max, tiny, resolution;
  };
  static const std::map<ScalarType, FloatInfo> infos = {
      {ScalarType::Half, {16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001}},
      {ScalarType::BFloat16, {16, 0.0078125, 3.3895313892515355e+38, 1.1754943508222875e-38, 0.01}},
      {ScalarType::Float, {32, FLT_EPSILON, FLT_MAX, FLT_MIN, 1e-06}},
      {ScalarType::Double, {64, DBL_EPSILON, DBL_MAX, DBL_MIN, 1e-15}}};
  const auto [bits, eps, max, tiny, resolution] = infos.at(t);
  return info_object(type, {{"bits", Ref(PyLong_FromLong(bits))},
                            {"eps", Ref(PyFloat_FromDouble(eps))},
                            {"max", Ref(PyFloat_FromDouble(max))},
                            {"min", Ref(PyFloat_FromDouble(-max))},
                            {"tiny", Ref(PyFloat_FromDouble(tiny))},
                            {"smallest_normal", Ref(PyFloat_FromDouble(tiny))},
                            {"resolution", Ref(PyFloat_FromDouble(resolution))},
                            {"dtype", Ref(PyUnicode_FromString(scalar_type_name(t)))}});
}
PyObject* iinfo_new(PyTypeObject* type, PyObject* args, PyObject*) {
  PyObject* dtype = nullptr;
  if (!PyArg_ParseTuple(args, "O", &dtype)) return nullptr;
  ScalarType t = is_dtype(dtype) ? dtype_of(dtype) : ScalarType::Undefined;
  if (!is_integral(t, true)) {
    PyErr_SetString(PyExc_TypeError,
                    "torch.iinfo() requires an integer input type. Use torch.finfo to handle 'float32'");
    return nullptr;
  }
  long long min = 0, max = 1;
  int bits = int(element_size(t) * 8);
  switch (t) {
    case ScalarType::Byte:
      max = 255;
      break;
    case ScalarType::Char:
      min = -128;
      max = 127;
      break;
    case ScalarType::Short:
      min = -32768;
      max = 32767;
      break;
    case ScalarType::Int:
      min = INT32_MIN;
      max = INT32_MAX;
      break;
    case ScalarType::Long:
      min = INT64_MIN;
      max = INT64_MAX;
      break;
    default:
      bits = 8;
      break;
  }
  return info_object(type, {{"bits", Ref(PyLong_FromLong(bits))},
                            {"min", Ref(PyLong_FromLongLong(min))},
                            {"max", Ref(PyLong_FromLongLong(max))},
                            {"dtype", Ref(PyUnicode_FromString(scalar_type_name(t)))}});
}

// finfo(resolution=1e-06, ..., dtype=float32) / iinfo(min=-128, max=127, dtype=int8), as upstream
// prints them: every number through a C++ stream as a double, so int64's bounds print rounded.
PyObject* info_repr(PyObject* self) {
  TN_PY_TRY
  static const std::vector<const char*> finfo_fields = {"resolution",      "min", "max", "eps",
                                                        "smallest_normal", "tiny"};
  static const std::vector<const char*> iinfo_fields = {"min", "max"};
  std::string kind = Py_TYPE(self)->tp_name;  // "torch.finfo"
  kind = kind.substr(kind.rfind('.') + 1);
  std::ostringstream text;
  text << kind << "(";
  for (const char* field : kind == "finfo" ? finfo_fields : iinfo_fields) {
    Ref value(PyObject_GetAttrString(self, field));
    if (!value) return nullptr;
    const double number = PyFloat_AsDouble(value.get());
    if (number == -1.0 && PyErr_Occurred()) return nullptr;
    text << field << "=" << number << ", ";
  }
  Ref dtype(PyObject_GetAttrString(self, "dtype"));
  if (!dtype) return nullptr;
  const char* name = PyUnicode_AsUTF8(dtype.get());
  if (!name) return nullptr;
  text << "dtype=" << name << ")";
  return PyUnicode_FromString(text.str().c_str());
  TN_PY_CATCH(nullptr)
}

PyTypeObject* make_info_type(const char* name, newfunc create) {
  PyMemberDef members[] = {{"__dictoffset__", T_PYSSIZET, Py_ssize_t(sizeof(PyObject)), READONLY, nullptr},
                           {nullptr, 0, 0, 0, nullptr}};
  PyType_Slot slots[] = {{Py_tp_new, reinterpret_cast<void*>(create)},
                         {Py_tp_members, members},
                         {Py_tp_repr, reinterpret_cast<void*>(info_repr)},
                         {0, nullptr}};
  PyType_Spec spec = {name, int(sizeof(PyObject) + sizeof(PyObject*)), 0, Py_TPFLAGS_DEFAULT, slots};
  auto* type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  if (!type) throw PythonErrorSet();
  return type;
}

}  // namespace

PyObject* dtype_object(ScalarType type) { return dtypes[int(type)]; }
bool is_dtype(PyObject* obj) { return Py_TYPE(obj) == dtype_type; }
ScalarType dtype_of(PyObject* obj) { return code_type(obj); }
bool is_layout(PyObject* obj) { return Py_TYPE(obj) == layout_type; }
bool is_memory_format(PyObject* obj) { return Py_TYPE(obj) == memory_format_type; }
int64_t memory_format_of(PyObject* obj) { return reinterpret_cast<EnumObject*>(obj)->code; }

void refuse_channels_last(int64_t format) {
  if (format >= 2)
    throw NotImplemented(std::string("torchnative does not implement torch._C.") +
                         (format == 2 ? "channels_last" : "channels_last_3d") +
                         " yet (memory_format): its tensors are laid out in contiguous_format only");
}
PyObject* memory_format_object(int64_t format) { return memory_formats[format]; }
[[noreturn]] void raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw PythonErrorSet();
}

bool is_device(PyObject* obj) { return PyObject_TypeCheck(obj, device_type); }

Ref as_device(PyObject* value) {
  return is_device(value) ? Ref::borrow(value)
                          : Ref(PyObject_CallOneArg(reinterpret_cast<PyObject*>(device_type), value));
}

std::string device_type_name(PyObject* device) {
  Ref object = as_device(device);
  if (!object) throw PythonErrorSet();  // upstream's errors for a string that names no device
  return PyUnicode_AsUTF8(reinterpret_cast<DeviceObject*>(object.get())->type);
}

bool device_is_meta(PyObject* device) {
  if (device == nullptr || device == Py_None) return false;
  const std::string type = device_type_name(device);
  if (type == "cpu") return false;
  if (type == "meta") return true;
  if (type == "cuda") {  // what upstream's CPU build raises from its lazy CUDA initialization
    PyErr_SetString(PyExc_AssertionError, "Torch not compiled with CUDA enabled");
    throw PythonErrorSet();
  }
  PyErr_Format(PyExc_NotImplementedError,
               "torchnative has only the cpu and meta devices; '%s' is not available", type.c_str());
  throw PythonErrorSet();
}
PyObject* cpu_device() { return cpu; }
PyObject* meta_device() { return meta; }

Tensor on_device(const Tensor& t, bool meta) {
  return meta && !t.is_meta() ? ops::empty_like(t, std::nullopt, std::nullopt, std::string("meta")) : t;
}
bool is_size(PyObject* obj) { return PyObject_TypeCheck(obj, size_type); }
PyObject* strided_layout() { return strided; }

PyObject* make_size(const Shape& sizes) {
  PyObject* tuple = PyTuple_New(Py_ssize_t(sizes.size()));
  for (size_t i = 0; i < sizes.size(); ++i)
    PyTuple_SET_ITEM(tuple, Py_ssize_t(i), PyLong_FromLongLong(sizes[i]));
  PyObject* size = PyTuple_Type.tp_new(size_type, Ref(PyTuple_Pack(1, tuple)).get(), nullptr);
  Py_DECREF(tuple);
  if (!size) throw PythonErrorSet();
  return size;
}

void init_value_types(PyObject* module) {
  dtype_type = make_enum_type("torch.dtype", dtype_getset);
  layout_type = make_enum_type("torch.layout", nullptr);
  memory_format_type = make_enum_type("torch.memory_format", nullptr);
  PyModule_AddObject(module, "dtype", reinterpret_cast<PyObject*>(dtype_type));
  PyModule_AddObject(module, "layout", reinterpret_cast<PyObject*>(layout_type));
  PyModule_AddObject(module, "memory_format", reinterpret_cast<PyObject*>(memory_format_type));
  struct Alias {
    ScalarType type;
    const char* names[3];
  };
  const Alias aliases[] = {
      {ScalarType::Byte, {"uint8", nullptr, nullptr}},
      {ScalarType::Char, {"int8", nullptr, nullptr}},
      {ScalarType::Short, {"int16", "short", nullptr}},
      {ScalarType::Int, {"int32", "int", nullptr}},
      {ScalarType::Long, {"int64", "long", nullptr}},
      {ScalarType::Half, {"float16", "half", nullptr}},
      {ScalarType::Float, {"float32", "float", nullptr}},
      {ScalarType::Double, {"float64", "double", nullptr}},
      {ScalarType::Bool, {"bool", nullptr, nullptr}},
      {ScalarType::BFloat16, {"bfloat16", nullptr, nullptr}},
      // Dtypes the shim does not store yet: they exist as objects so upstream's Python
      // can name them, and every kernel refuses them.
      {ScalarType(8), {"complex32", "chalf", nullptr}},
      {ScalarType(9), {"complex64", "cfloat", nullptr}},
      {ScalarType(10), {"complex128", "cdouble", nullptr}},
      {ScalarType(12), {"qint8", nullptr, nullptr}},
      {ScalarType(13), {"quint8", nullptr, nullptr}},
      {ScalarType(14), {"qint32", nullptr, nullptr}},
      {ScalarType(16), {"quint4x2", nullptr, nullptr}},
      {ScalarType(17), {"quint2x4", nullptr, nullptr}},
  };
  for (const Alias& a : aliases) {
    dtypes[int(a.type)] = make_enum(dtype_type, int64_t(a.type), a.names[0]);
    for (const char* name : a.names)
      if (name) {
        Py_INCREF(dtypes[int(a.type)]);
        PyModule_AddObject(module, name, dtypes[int(a.type)]);
      }
  }
  strided = make_enum(layout_type, 0, "strided");
  Py_INCREF(strided);
  PyModule_AddObject(module, "strided", strided);
  const char* layouts[] = {"sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn"};
  for (int i = 0; i < 6; ++i)
    PyModule_AddObject(module, layouts[i], make_enum(layout_type, i + 1, layouts[i]));
  // torch's `from torch._C import *` skips underscored names; upstream's C++ sets this one on
  // the torch module itself (gradcheck reads torch._mkldnn).
  PyObject* torch_name = PyUnicode_FromString("torch");
  if (PyObject* torch = PyImport_GetModule(torch_name)) {  // imported torch._C alone, there is none
    PyModule_AddObject(torch, "_mkldnn", PyObject_GetAttrString(module, "_mkldnn"));
    Py_DECREF(torch);
  }
  Py_DECREF(torch_name);
  PyTypeObject* qscheme_type = make_enum_type("torch.qscheme", nullptr);
  PyModule_AddObject(module, "qscheme", reinterpret_cast<PyObject*>(qscheme_type));
  const char* qschemes[] = {"per_tensor_affine", "per_channel_affine", "per_tensor_symmetric",
                            "per_channel_symmetric", "per_channel_affine_float_qparams"};
  for (int i = 0; i < 5; ++i)
    PyModule_AddObject(module, qschemes[i], make_enum(qscheme_type, i, qschemes[i]));
  const char* formats[] = {"contiguous_format", "preserve_format", "channels_last", "channels_last_3d"};
  for (int i = 0; i < 4; ++i) {
    memory_formats[i] = make_enum(memory_format_type, i, formats[i]);
    Py_INCREF(memory_formats[i]);
    PyModule_AddObject(module, formats[i], memory_formats[i]);
  }
  device_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&device_spec));
  PyModule_AddObject(module, "device", reinterpret_cast<PyObject*>(device_type));
  Py_INCREF(device_type);
  cpu = PyObject_CallFunction(reinterpret_cast<PyObject*>(device_type), "s", "cpu");
  meta = PyObject_CallFunction(reinterpret_cast<PyObject*>(device_type), "s", "meta");
  size_type = reinterpret_cast<PyTypeObject*>(
      PyType_FromSpecWithBases(&size_spec, reinterpret_cast<PyObject*>(&PyTuple_Type)));
  Py_INCREF(size_type);
  PyModule_AddObject(module, "Size", reinterpret_cast<PyObject*>(size_type));
  PyModule_AddObject(module, "finfo", reinterpret_cast<PyObject*>(make_info_type("torch.finfo", finfo_new)));
  PyModule_AddObject(module, "iinfo", reinterpret_cast<PyObject*>(make_info_type("torch.iinfo", iinfo_new)));
}

// ---- conversions ----

int64_t unpack_long(PyObject* obj) {
  Ref index(PyNumber_Index(obj));
  if (!index) throw PythonErrorSet();
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(index.get(), &overflow);
  if (overflow) {
    PyErr_SetString(PyExc_RuntimeError, "Overflow when unpacking long");
    throw PythonErrorSet();
  }
  return v;
}

bool python_to_scalar(PyObject* obj, Scalar* out) {
  if (PyBool_Check(obj)) {
    *out = Scalar(obj == Py_True);
    return true;
  }
  if (PyLong_Check(obj)) {
    *out = Scalar(unpack_long(obj));
    return true;
  }
  if (PyFloat_Check(obj)) {
    *out = Scalar(PyFloat_AS_DOUBLE(obj));
    return true;
  }
  if (is_tensor(obj) || PyUnicode_Check(obj) || PyComplex_Check(obj)) return false;
  // numpy scalars: integers through __index__, floats through __float__
  if (PyIndex_Check(obj)) {
    Ref index(PyNumber_Index(obj));
    if (!index) {
      PyErr_Clear();
      return false;
    }
    std::string type_name = Py_TYPE(obj)->tp_name;
    if (type_name == "numpy.bool_")
      *out = Scalar(PyObject_IsTrue(obj) == 1);
    else
      *out = Scalar(unpack_long(index.get()));
    return true;
  }
  if (PyNumber_Check(obj) && Py_TYPE(obj)->tp_as_number->nb_float) {
    double v = PyFloat_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    *out = Scalar(v);
    return true;
  }
  return false;
}

PyObject* scalar_to_python(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      return PyBool_FromLong(s.to_int());
    case Scalar::Kind::Int:
      return PyLong_FromLongLong(s.to_int());
    default:
      return PyFloat_FromDouble(s.to_double());
  }
}

Tensor wrapped_number(const Scalar& s) {
  Tensor t = Tensor::empty({}, s.type());
  TN_DISPATCH_ALL_TYPES(t.dtype(), "wrapped_number", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    *t.data_as<scalar_t>() = s.to<scalar_t>();
  });
  t.impl()->wrapped_number = true;
  return t;
}

namespace {

// Walks nested sequences once to find the shape and the widest scalar kind.
void infer_shape(PyObject* data, size_t depth, Shape& shape, ScalarType& inferred) {
  if (is_tensor(data)) {
    const Tensor& t = unpack(data);
    if (depth == shape.size()) shape.insert(shape.end(), t.sizes().begin(), t.sizes().end());
    inferred = promote_types(inferred, t.dtype());
    return;
  }
  if (PySequence_Check(data) && !PyUnicode_Check(data) && !PyBytes_Check(data)) {
    Py_ssize_t n = PySequence_Size(data);
    if (n < 0) throw PythonErrorSet();
    if (depth == shape.size())
      shape.push_back(n);
    else if (shape[depth] != n)
      throw ValueError("expected sequence of length " + std::to_string(shape[depth]) + " at dim " +
                       std::to_string(depth) + " (got " + std::to_string(n) + ")");
    for (Py_ssize_t i = 0; i < n; ++i) {
      Ref item(PySequence_GetItem(data, i));
      if (!item) throw PythonErrorSet();
      infer_shape(item.get(), depth + 1, shape, inferred);
    }
    return;
  }
  Scalar s;
  if (PyUnicode_Check(data)) throw ValueError("too many dimensions 'str'");
  if (!python_to_scalar(data, &s))
    throw Error(std::string("Could not infer dtype of ") + Py_TYPE(data)->tp_name);
  if (depth != shape.size()) throw ValueError("expected a sequence at dim " + std::to_string(depth));
  ScalarType t = s.type() == ScalarType::Double ? default_dtype() : s.type();
  inferred = inferred == ScalarType::Undefined ? t : promote_types(inferred, t);
}

// Upstream's checked conversion of Python numbers into a tensor's dtype: integers
// outside the target's range are refused (negative ones may wrap into unsigned types);
// float types take any value (overflow becomes inf).
template <typename T>
void check_representable(const Scalar& s, ScalarType type) {
  if constexpr (std::is_same_v<T, bool>) {
    (void)s;
    (void)type;
  } else {
    bool overflow = false;
    if constexpr (std::is_integral_v<T>) {
      if (!s.is_float() && !s.is_bool()) {
        int64_t v = s.to_int();
        if constexpr (std::is_unsigned_v<T>)
          overflow = v > int64_t(std::numeric_limits<T>::max()) ||
                     (v < 0 && -v > int64_t(std::numeric_limits<T>::max()));
        else
          overflow = v > int64_t(std::numeric_limits<T>::max()) || v < int64_t(std::numeric_limits<T>::min());
      }
    }
    if (overflow)
      throw Error(std::string("value cannot be converted to type ") + scalar_type_name(type) +
                  " without overflow");
  }
}

template <typename T>
void fill_from(PyObject* data, T*& cursor, ScalarType type) {
  if (is_tensor(data)) {  // a tensor nested in the data: its elements, converted like a copy
    Tensor values = unpack(data).to(type).contiguous();
    std::memcpy(static_cast<void*>(cursor), values.data(), size_t(values.numel()) * sizeof(T));
    cursor += values.numel();
    return;
  }
  if (PySequence_Check(data) && !PyUnicode_Check(data)) {
    Py_ssize_t n = PySequence_Size(data);
    for (Py_ssize_t i = 0; i < n; ++i) {
      Ref item(PySequence_GetItem(data, i));
      fill_from(item.get(), cursor, type);
    }
    return;
  }
  Scalar s;
  python_to_scalar(data, &s);
  check_representable<T>(s, type);
  *cursor++ = s.to<T>();
}

}  // namespace

Tensor tensor_from_python_data(PyObject* data, std::optional<ScalarType> dtype) {
  if (is_tensor(data)) {
    // Through the dispatcher, so a meta tensor's copy is a meta tensor (no values read);
    // detached first, so it records nothing.
    const Tensor t = ops::detach(unpack(data));
    return ops::clone(ops::to_dtype(t, dtype.value_or(t.dtype())));
  }
  // numpy arrays go through torch.from_numpy's path (on a copy: torch.tensor never shares)
  if (std::string(Py_TYPE(data)->tp_name) == "numpy.ndarray") {
    Ref torch(PyImport_ImportModule("torch"));
    Ref from_numpy(PyObject_GetAttrString(torch.get(), "from_numpy"));
    Ref copy(PyObject_CallMethod(data, "copy", nullptr));
    if (!copy) throw PythonErrorSet();
    Ref shared(PyObject_CallOneArg(from_numpy.get(), copy.get()));
    if (!shared) throw PythonErrorSet();
    const Tensor& t = unpack(shared.get());
    return dtype ? t.to(*dtype).contiguous() : t;
  }
  Shape shape;
  ScalarType inferred = ScalarType::Undefined;
  infer_shape(data, 0, shape, inferred);
  if (inferred == ScalarType::Undefined) inferred = default_dtype();  // empty list
  ScalarType type = dtype.value_or(inferred);
  Tensor out = Tensor::empty(shape, type);
  TN_DISPATCH_ALL_TYPES(type, "tensor", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* cursor = out.data_as<scalar_t>();
    fill_from(data, cursor, type);
  });
  return out;
}

PyObject* tensor_to_list(const Tensor& t) {
  Tensor c = t.contiguous();
  const Shape& shape = c.sizes();
  std::function<PyObject*(size_t, int64_t)> build = [&](size_t dim, int64_t offset) -> PyObject* {
    if (dim == shape.size()) {
      return TN_DISPATCH_ALL_TYPES(c.dtype(), "tolist", [&](auto tag_) -> PyObject* {
        using scalar_t = TN_TYPE(tag_);
        scalar_t v = c.data_as<scalar_t>()[offset];
        if constexpr (std::is_same_v<scalar_t, bool>)
          return PyBool_FromLong(v);
        else if constexpr (std::is_integral_v<scalar_t>)
          return PyLong_FromLongLong(int64_t(v));
        else
          return PyFloat_FromDouble(double(v));
      });
    }
    PyObject* list = PyList_New(Py_ssize_t(shape[dim]));
    int64_t stride = c.strides()[dim];
    for (int64_t i = 0; i < shape[dim]; ++i)
      PyList_SET_ITEM(list, Py_ssize_t(i), build(dim + 1, offset + i * stride));
    return list;
  };
  return build(0, 0);
}

PyObject* linalg_error_type = PyExc_RuntimeError;

void set_python_error(const std::exception& e) {
  if (dynamic_cast<const NotImplemented*>(&e))
    PyErr_SetString(PyExc_NotImplementedError, e.what());
  else if (dynamic_cast<const IndexError*>(&e))
    PyErr_SetString(PyExc_IndexError, e.what());
  else if (dynamic_cast<const TypeError*>(&e))
    PyErr_SetString(PyExc_TypeError, e.what());
  else if (dynamic_cast<const LinAlgError*>(&e))
    PyErr_SetString(linalg_error_type, e.what());
  else if (dynamic_cast<const ValueError*>(&e))
    PyErr_SetString(PyExc_ValueError, e.what());
  else if (dynamic_cast<const std::bad_alloc*>(&e))
    PyErr_NoMemory();
  else
    PyErr_SetString(PyExc_RuntimeError, e.what());
}

}  // namespace tn::py
