// Tensor.__getitem__ / __setitem__: Python index expressions lowered onto aten
// operators (select, slice, unsqueeze, index, index_put_), each through the door.
#include "python_shim.h"

namespace tn::py {

namespace {

bool is_advanced(PyObject* item) {
  return is_tensor(item) || PyList_Check(item) || (PyBool_Check(item)) ||
         (!PyLong_Check(item) && !PySlice_Check(item) && item != Py_None && item != Py_Ellipsis &&
          PySequence_Check(item));
}

// A Python sequence used as an index, as upstream converts it: a bool or uint8 tensor stays a
// mask, anything else becomes int64 (floats truncated: x[[1.5]] is x[[1]]). Strings and bytes
// are sequences too, refused as tensor data.
Tensor index_from_python_data(PyObject* item) {
  if (PyUnicode_Check(item) || PyBytes_Check(item))
    throw TypeError(std::string("new(): invalid data type '") + Py_TYPE(item)->tp_name + "'");
  Tensor idx = tensor_from_python_data(item, std::nullopt);
  if (idx.dtype() == ScalarType::Bool || idx.dtype() == ScalarType::Byte || idx.dtype() == ScalarType::Long)
    return idx;
  return idx.to(ScalarType::Long);
}

// Upstream's legacy NumPy rule: a short list (or other non-tensor sequence) holding a sequence,
// slice, tensor, None or Ellipsis is a tuple of indices (x[[[0, 2], [1, 3]]] is x[[0, 2], [1, 3]]);
// any other is one advanced index.
bool sequence_as_tuple(PyObject* index) {
  if (PyTuple_Check(index)) return true;
  if (is_tensor(index) || !PySequence_Check(index)) return false;
  Py_ssize_t n = PySequence_Size(index);
  if (n < 0) {
    PyErr_Clear();
    return false;
  }
  if (n >= 32) return false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Ref item(PySequence_GetItem(index, i));
    if (!item) {
      PyErr_Clear();
      return false;
    }
    PyObject* obj = item.get();
    if (is_tensor(obj) || PySequence_Check(obj) || PySlice_Check(obj) || obj == Py_Ellipsis || obj == Py_None)
      return true;
  }
  return false;
}

// Applies basic indexing (ints, slices, None, Ellipsis) and collects advanced indices
// by the dimension they apply to, as upstream's applySlicing does.
Tensor apply_slicing(const Tensor& self, PyObject* index, std::vector<std::optional<Tensor>>& advanced) {
  Ref items(PyTuple_Check(index)       ? Ref::borrow(index)
            : sequence_as_tuple(index) ? Ref(PySequence_Tuple(index))
                                       : Ref(PyTuple_Pack(1, index)));
  if (!items) throw PythonErrorSet();
  Py_ssize_t n = PyTuple_GET_SIZE(items.get());
  int64_t specified = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(items.get(), i);
    if (item == Py_None || item == Py_Ellipsis || PyBool_Check(item)) continue;
    if (is_tensor(item) &&
        (unpack(item).dtype() == ScalarType::Bool || unpack(item).dtype() == ScalarType::Byte))
      specified += std::max<int64_t>(unpack(item).dim(), 1);
    else
      specified += 1;
  }
  if (specified > self.dim())
    throw IndexError("too many indices for tensor of dimension " + std::to_string(self.dim()));
  Tensor result = self;
  int64_t dim = 0;
  auto pad_advanced = [&]() {
    while (int64_t(advanced.size()) < dim) advanced.emplace_back();
  };
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(items.get(), i);
    if (PyLong_Check(item) && !PyBool_Check(item)) {
      int64_t k = unpack_long(item);
      int64_t size = result.size(dim);
      if (k < -size || k >= size)
        throw IndexError("index " + std::to_string(k) + " is out of bounds for dimension " +
                         std::to_string(dim) + " with size " + std::to_string(size));
      result = ops::select(result, dim, k);
    } else if (PySlice_Check(item)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(item, &start, &stop, &step) < 0) throw PythonErrorSet();
      if (step <= 0) throw ValueError("step must be greater than zero");
      result = ops::slice(result, dim, int64_t(start), int64_t(stop), int64_t(step));
      ++dim;
    } else if (item == Py_Ellipsis) {
      // Skip to where the indices after the ellipsis begin.
      int64_t after = 0;
      for (Py_ssize_t j = i + 1; j < n; ++j) {
        PyObject* rest = PyTuple_GET_ITEM(items.get(), j);
        if (rest == Py_None || rest == Py_Ellipsis || PyBool_Check(rest)) continue;
        if (is_tensor(rest) &&
            (unpack(rest).dtype() == ScalarType::Bool || unpack(rest).dtype() == ScalarType::Byte))
          after += std::max<int64_t>(unpack(rest).dim(), 1);
        else
          after += 1;
      }
      dim = result.dim() - after;
    } else if (item == Py_None) {
      result = ops::unsqueeze(result, dim);
      ++dim;
    } else if (PyBool_Check(item)) {
      result = ops::unsqueeze(result, dim);
      pad_advanced();
      Tensor mask = Tensor::empty({1}, ScalarType::Bool);
      *mask.data_as<bool>() = item == Py_True;
      advanced.emplace_back(mask);
      ++dim;
    } else if (is_advanced(item)) {
      Tensor idx = is_tensor(item) ? unpack(item) : index_from_python_data(item);
      pad_advanced();
      advanced.emplace_back(idx);
      dim += (idx.dtype() == ScalarType::Bool || idx.dtype() == ScalarType::Byte)
                 ? std::max<int64_t>(idx.dim(), 1)
                 : 1;
    } else {
      throw IndexError(
          "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices "
          "(got " +
          std::string(Py_TYPE(item)->tp_name) + ")");
    }
  }
  return result;
}

PyObject* tensor_getitem(PyObject* self, PyObject* index) {
  TN_PY_TRY
  if (PyObject * result; tensor_method_overridden("__getitem__", self, &index, 1, &result)) return result;
  std::vector<std::optional<Tensor>> advanced;
  Tensor result = apply_slicing(unpack(self), index, advanced);
  if (!advanced.empty()) {
    result = ops::index(result, advanced);
  } else if (result.same(unpack(self))) {
    // x[...] and x[()] return a new view, not the same object
    result = ops::alias(result);
  }
  return wrap(result);
  TN_PY_CATCH(nullptr)
}

int tensor_setitem(PyObject* self, PyObject* index, PyObject* value) {
  TN_PY_TRY
  if (!value) {
    PyErr_SetString(PyExc_TypeError, "Tensor does not support deleting items");
    return -1;
  }
  PyObject* call[] = {index, value};
  if (PyObject * result; tensor_method_overridden("__setitem__", self, call, 2, &result)) {
    Py_XDECREF(result);
    return result ? 0 : -1;
  }
  const Tensor& base = unpack(self);
  if (PyUnicode_Check(value) || PyBytes_Check(value)) {
    PyErr_Format(PyExc_TypeError, "can't assign a %s to a %s", Py_TYPE(value)->tp_name,
                 PyUnicode_AsUTF8(Ref(PyObject_CallMethod(self, "type", nullptr)).get()));
    return -1;
  }
  std::vector<std::optional<Tensor>> advanced;
  Tensor target = apply_slicing(base, index, advanced);
  Tensor source;
  Scalar scalar;
  if (is_tensor(value))
    source = unpack(value);
  else if (python_to_scalar(value, &scalar))
    source = wrapped_number(scalar);
  else
    source = tensor_from_python_data(value, base.dtype());
  if (!advanced.empty()) {
    ops::index_put_(target, advanced, ops::to_dtype(source, base.dtype()), false);
  } else {
    ops::copy_(target, source, false);
  }
  return 0;
  TN_PY_CATCH(-1)
}

PyObject* getitem_wrapper(PyObject* self, PyObject* args) {
  PyObject* index;
  if (!PyArg_ParseTuple(args, "O", &index)) return nullptr;
  return tensor_getitem(self, index);
}
PyObject* setitem_wrapper(PyObject* self, PyObject* args) {
  PyObject *index, *value;
  if (!PyArg_ParseTuple(args, "OO", &index, &value)) return nullptr;
  if (tensor_setitem(self, index, value) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef indexing_methods[] = {
    {"__getitem__", getitem_wrapper, METH_VARARGS, nullptr},
    {"__setitem__", setitem_wrapper, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void init_indexing(PyObject* type_dict) {
  for (PyMethodDef* def = indexing_methods; def->ml_name; ++def)
    PyDict_SetItemString(type_dict, def->ml_name, Ref(PyDescr_NewMethod(tensor_base_type, def)).get());
  // The slots too, so the subscript syntax reaches them without a dict lookup.
  tensor_base_type->tp_as_mapping->mp_subscript = tensor_getitem;
  tensor_base_type->tp_as_mapping->mp_ass_subscript = tensor_setitem;
}

}  // namespace tn::py
