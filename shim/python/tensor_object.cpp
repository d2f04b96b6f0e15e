// torch._C._TensorBase: the Python object around a shim Tensor.

#include <utility>

#include "autograd.h"
#include "core/autograd_mode.h"
#include "python_shim.h"
// After Python.h, which it needs.
#include <structmember.h>

namespace tn::py {

PyTypeObject* tensor_base_type = nullptr;
PyObject* tensor_class = nullptr;

bool is_tensor(PyObject* obj) { return PyObject_TypeCheck(obj, tensor_base_type); }

const Tensor& unpack(PyObject* obj) { return reinterpret_cast<TensorObject*>(obj)->tensor; }

PyObject* wrap(const Tensor& tensor) {
  if (!tensor.defined()) Py_RETURN_NONE;
  TensorImpl* impl = tensor.impl();
  if (impl->python_object) {
    PyObject* existing = static_cast<PyObject*>(impl->python_object);
    Py_INCREF(existing);
    return existing;
  }
  PyTypeObject* type = tensor_class ? reinterpret_cast<PyTypeObject*>(tensor_class) : tensor_base_type;
  PyObject* obj = type->tp_alloc(type, 0);
  if (!obj) throw PythonErrorSet();
  auto* t = reinterpret_cast<TensorObject*>(obj);
  new (&t->tensor) Tensor(tensor);
  impl->python_object = obj;
  return obj;
}

bool set_requires_grad(const Tensor& t, bool flag) {
  if (flag && !is_floating(t.dtype())) {
    PyErr_SetString(PyExc_RuntimeError,
                    "only Tensors of floating point and complex dtype can require gradients");
    return false;
  }
  if (flag && t.impl()->inference && !InferenceMode::is_enabled()) {
    PyErr_SetString(PyExc_RuntimeError,
                    "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
    return false;
  }
  if (autograd::grad_fn(t)) {
    if (flag) return true;  // a computed tensor requires grad already
    PyErr_SetString(
        PyExc_RuntimeError,
        "you can only change requires_grad flags of leaf variables. If you want to use a computed "
        "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    return false;
  }
  t.impl()->requires_grad = flag;
  return true;
}

namespace {

PyObject* tensor_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  // torch.Tensor(...) and subclasses: the legacy constructor with the default dtype.
  Tensor value = legacy_construct(default_dtype(), args, kwargs);
  PyObject* obj = type->tp_alloc(type, 0);
  if (!obj) return nullptr;
  auto* t = reinterpret_cast<TensorObject*>(obj);
  new (&t->tensor) Tensor(value);
  value.impl()->python_object = obj;
  return obj;
  TN_PY_CATCH(nullptr)
}

int tensor_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* t = reinterpret_cast<TensorObject*>(self);
  Py_VISIT(t->backward_hooks);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int tensor_clear(PyObject* self) {
  auto* t = reinterpret_cast<TensorObject*>(self);
  Py_CLEAR(t->backward_hooks);
  return 0;
}

void tensor_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  auto* t = reinterpret_cast<TensorObject*>(self);
  // Subclass instance dicts and weakrefs are handled by subtype_dealloc before us.
  tensor_clear(self);
  if (t->tensor.defined() && t->tensor.impl()->python_object == self)
    t->tensor.impl()->python_object = nullptr;
  t->tensor.~Tensor();
  type->tp_free(self);
  Py_DECREF(type);
}

// ---- properties ----
PyObject* get_shape(PyObject* self, void*) {
  TN_PY_TRY return make_size(unpack(self).sizes());
  TN_PY_CATCH(nullptr)
}
PyObject* get_dtype(PyObject* self, void*) {
  PyObject* d = dtype_object(unpack(self).dtype());
  Py_INCREF(d);
  return d;
}
PyObject* get_device(PyObject* self, void*) {
  PyObject* device = unpack(self).is_meta() ? meta_device() : cpu_device();
  Py_INCREF(device);
  return device;
}
PyObject* get_is_meta(PyObject* self, void*) { return PyBool_FromLong(unpack(self).is_meta()); }
PyObject* get_is_cpu(PyObject* self, void*) { return PyBool_FromLong(!unpack(self).is_meta()); }
PyObject* get_layout(PyObject*, void*) {
  Py_INCREF(strided_layout());
  return strided_layout();
}
PyObject* get_ndim(PyObject* self, void*) { return PyLong_FromLongLong(unpack(self).dim()); }
PyObject* get_false(PyObject*, void*) { Py_RETURN_FALSE; }
PyObject* get_none(PyObject*, void*) { Py_RETURN_NONE; }
PyObject* get_requires_grad(PyObject* self, void*) {
  return PyBool_FromLong(unpack(self).impl()->requires_grad);
}
int set_requires_grad_attribute(PyObject* self, PyObject* value, void*) {
  if (!value || !PyBool_Check(value)) {
    PyErr_SetString(PyExc_TypeError, "requires_grad must be a bool");
    return -1;
  }
  return set_requires_grad(unpack(self), value == Py_True) ? 0 : -1;
}
// .grad lives in core (AutogradMeta), so it survives this wrapper.
PyObject* get_grad(PyObject* self, void*) {
  TN_PY_TRY return wrap(autograd::grad(unpack(self)));
  TN_PY_CATCH(nullptr)
}
int set_grad(PyObject* self, PyObject* value, void*) {
  if (value && value != Py_None && !is_tensor(value)) {
    PyErr_SetString(PyExc_TypeError, "assigned grad expected to be a Tensor or None");
    return -1;
  }
  const Tensor& t = unpack(self);
  if (!value || value == Py_None) {
    autograd::set_grad(t, Tensor());
    return 0;
  }
  const Tensor& grad = unpack(value);
  const char* refusal = self == value               ? "can't assign Variable as its own grad"
                        : grad.dtype() != t.dtype() ? "assigned grad has data of a different type"
                        : grad.sizes() != t.sizes() ? "assigned grad has data of a different size"
                                                    : nullptr;
  if (refusal) {
    PyErr_SetString(PyExc_RuntimeError, refusal);
    return -1;
  }
  autograd::set_grad(t, grad);
  return 0;
}
PyObject* get_backward_hooks(PyObject* self, void*) {
  auto* t = reinterpret_cast<TensorObject*>(self);
  PyObject* h = t->backward_hooks ? t->backward_hooks : Py_None;
  Py_INCREF(h);
  return h;
}
int set_backward_hooks(PyObject* self, PyObject* value, void*) {
  auto* t = reinterpret_cast<TensorObject*>(self);
  PyObject* old = t->backward_hooks;
  t->backward_hooks = value == Py_None ? nullptr : value;
  Py_XINCREF(t->backward_hooks);
  Py_XDECREF(old);
  return 0;
}
// .data: the same memory without history, and with a version counter of its own (as
// upstream's), so writes through it are not seen by the autograd checks.
PyObject* get_data(PyObject* self, void*) {
  TN_PY_TRY
  const Tensor& t = unpack(self);
  Tensor data = t.view_as_strided(t.sizes(), t.strides(), t.offset());
  data.impl()->version = std::make_shared<std::atomic<uint32_t>>(0);
  return wrap(data);
  TN_PY_CATCH(nullptr)
}
int set_data(PyObject* self, PyObject* value, void*) {
  if (!value || !is_tensor(value)) {
    PyErr_SetString(PyExc_TypeError, "Variable data has to be a tensor");
    return -1;
  }
  TensorImpl* dst = unpack(self).impl();
  const TensorImpl* src = unpack(value).impl();
  dst->storage = src->storage;
  dst->sizes = src->sizes;
  dst->strides = src->strides;
  dst->offset = src->offset;
  dst->dtype = src->dtype;
  return 0;
}
PyObject* get_version(PyObject* self, void*) {
  const TensorImpl* impl = unpack(self).impl();
  if (impl->inference) {
    PyErr_SetString(PyExc_RuntimeError, "Inference tensors do not track version counter.");
    return nullptr;
  }
  return PyLong_FromUnsignedLong(impl->version->load());
}
PyObject* get_cdata(PyObject* self, void*) { return PyLong_FromVoidPtr(unpack(self).impl()); }
// .T and .mT are upstream's permute and transpose, through the door (their results are views).
PyObject* get_T(PyObject* self, void*) {
  TN_PY_TRY
  const Tensor& t = unpack(self);
  static bool warned = false;  // upstream warns once per process
  if (t.dim() != 0 && t.dim() != 2 && !std::exchange(warned, true) &&
      PyErr_WarnEx(
          PyExc_UserWarning,
          "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated "
          "and it will throw an error in a future release. Consider `x.mT` to transpose batches of "
          "matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a "
          "tensor.",
          1) < 0)
    return nullptr;
  std::vector<int64_t> dims(size_t(t.dim()));
  for (int64_t d = 0; d < t.dim(); ++d) dims[size_t(d)] = t.dim() - 1 - d;
  return wrap(ops::permute(t, dims));
  TN_PY_CATCH(nullptr)
}
// mT and mH: a matrix transpose (real dtypes: conj is the identity); a 0-d tensor is itself.
PyObject* matrix_transpose(PyObject* self, const char* attribute) {
  TN_PY_TRY
  const Tensor& t = unpack(self);
  if (t.dim() == 0) return Ref::borrow(self).release();
  if (t.dim() < 2) {
    PyErr_Format(PyExc_RuntimeError,
                 "tensor.%s is only supported on matrices or batches of matrices. Got 1-D tensor.",
                 attribute);
    return nullptr;
  }
  return wrap(ops::transpose(t, int64_t{-2}, int64_t{-1}));
  TN_PY_CATCH(nullptr)
}
PyObject* get_mT(PyObject* self, void*) { return matrix_transpose(self, "mT"); }
PyObject* get_mH(PyObject* self, void*) { return matrix_transpose(self, "mH"); }
// Tensor._base: the tensor a view operator made this one a view of, else None.
PyObject* get_base(PyObject* self, void*) {
  const auto& base = unpack(self).impl()->view_base;
  if (!base) Py_RETURN_NONE;
  return wrap(Tensor(base));
}

// Every stored dtype is real: .real is the tensor itself, history included (as upstream's
// at::real of a real tensor), .imag an error.
PyObject* get_real(PyObject* self, void*) { return Ref::borrow(self).release(); }
PyObject* get_imag(PyObject*, void*) {
  PyErr_SetString(PyExc_RuntimeError, "imag is not implemented for tensors with non-complex dtypes.");
  return nullptr;
}

PyObject* get_is_leaf(PyObject* self, void*) { return PyBool_FromLong(!autograd::grad_fn(unpack(self))); }
PyObject* get_grad_fn(PyObject* self, void*) {
  TN_PY_TRY return wrap_node(autograd::grad_fn(unpack(self)));
  TN_PY_CATCH(nullptr)
}
PyObject* get_output_nr(PyObject* self, void*) {
  return PyLong_FromUnsignedLong(autograd::output_nr(unpack(self)));
}

// Upstream's properties offer themselves to a __torch_function__ override first (all but
// _cdata, the raw handle).
#define GETTER(NAME, GET) \
  { NAME, overridable_getter<NAME, GET>, nullptr, nullptr, nullptr }
#define PROPERTY(NAME, GET, SET) \
  { NAME, overridable_getter<NAME, GET>, overridable_setter<NAME, SET>, nullptr, nullptr }
PyGetSetDef tensor_getset[] = {
    GETTER("real", get_real),
    GETTER("imag", get_imag),
    GETTER("is_cpu", get_is_cpu),
    GETTER("shape", get_shape),
    GETTER("dtype", get_dtype),
    GETTER("device", get_device),
    GETTER("layout", get_layout),
    GETTER("ndim", get_ndim),
    PROPERTY("requires_grad", get_requires_grad, set_requires_grad_attribute),
    PROPERTY("grad", get_grad, set_grad),
    PROPERTY("_grad", get_grad, set_grad),
    PROPERTY("_backward_hooks", get_backward_hooks, set_backward_hooks),
    PROPERTY("data", get_data, set_data),
    GETTER("_version", get_version),
    {"_cdata", get_cdata, nullptr, nullptr, nullptr},
    GETTER("T", get_T),
    GETTER("mT", get_mT),
    GETTER("H", get_T),  // real dtypes only: conj is the identity
    GETTER("mH", get_mH),
    GETTER("is_leaf", get_is_leaf),
    GETTER("grad_fn", get_grad_fn),
    GETTER("_grad_fn", get_grad_fn),
    GETTER("_base", get_base),
    GETTER("output_nr", get_output_nr),
    GETTER("names", get_none),
    GETTER("is_cuda", get_false),
    GETTER("is_ipu", get_false),
    GETTER("is_xpu", get_false),
    GETTER("is_meta", get_is_meta),
    GETTER("is_mkldnn", get_false),
    GETTER("is_mps", get_false),
    GETTER("is_nested", get_false),
    GETTER("is_ort", get_false),
    GETTER("is_quantized", get_false),
    GETTER("is_sparse", get_false),
    GETTER("is_sparse_csr", get_false),
    GETTER("is_vulkan", get_false),
    GETTER("is_hpu", get_false),
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};
#undef GETTER
#undef PROPERTY

PyType_Slot tensor_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(tensor_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(tensor_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(tensor_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(tensor_clear)},
    {Py_tp_getset, tensor_getset},
    {Py_tp_doc, const_cast<char*>("The shim's tensor; torch.Tensor derives from it.")},
    {0, nullptr},
};

PyType_Spec tensor_spec = {
    "torch._C._TensorBase",
    sizeof(TensorObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    tensor_slots,
};

}  // namespace

void init_tensor_type(PyObject* module) {
  tensor_base_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&tensor_spec));
  if (!tensor_base_type) throw PythonErrorSet();
  // torch.nn.Parameter's metaclass derives from _TensorMeta, the metaclass of _TensorBase.
  Ref dict(PyDict_New());
  PyDict_SetItemString(dict.get(), "__module__", Ref(PyUnicode_FromString("torch._C")).get());
  PyObject* meta = PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyType_Type), "s(O)O", "_TensorMeta",
                                         reinterpret_cast<PyObject*>(&PyType_Type), dict.get());
  if (!meta) throw PythonErrorSet();
  PyModule_AddObject(module, "_TensorMeta", meta);
  Py_INCREF(meta);
  Py_DECREF(Py_TYPE(tensor_base_type));
  Py_SET_TYPE(tensor_base_type, reinterpret_cast<PyTypeObject*>(meta));
  Py_INCREF(tensor_base_type);
  PyModule_AddObject(module, "_TensorBase", reinterpret_cast<PyObject*>(tensor_base_type));
}

}  // namespace tn::py
