// torch._C's gradient and inference-mode switches: is_grad_enabled, _set_grad_enabled,
// is_inference_mode_enabled and the _InferenceMode guard that torch.inference_mode holds while
// its block runs (core/autograd_mode.h keeps the thread's state).
#include "core/autograd_mode.h"

#include <optional>

#include "python_shim.h"

namespace tn::py {

namespace {

PyObject* f_is_grad_enabled(PyObject*, PyObject*) { return PyBool_FromLong(GradMode::is_enabled()); }

PyObject* f_set_grad_enabled(PyObject*, PyObject* flag) {
  if (!PyBool_Check(flag)) {
    PyErr_Format(PyExc_TypeError, "enabled must be a bool (got %s)", Py_TYPE(flag)->tp_name);
    return nullptr;
  }
  GradMode::set_enabled(flag == Py_True);
  Py_RETURN_NONE;
}

PyObject* f_is_inference_mode_enabled(PyObject*, PyObject*) {
  return PyBool_FromLong(InferenceMode::is_enabled());
}

// The guard lives as long as the Python object: torch.inference_mode deletes it on exit.
struct InferenceModeObject {
  PyObject_HEAD std::optional<InferenceMode> guard;
};

// Upstream's binding converts as pybind11 does for a bool: True, False, None, or anything with
// a number protocol's __bool__ (1 and 0 pass, "x" does not).
std::optional<bool> bool_argument(PyObject* obj) {
  if (obj == Py_None) return false;
  if (PyBool_Check(obj) || (Py_TYPE(obj)->tp_as_number && Py_TYPE(obj)->tp_as_number->nb_bool)) {
    int truth = PyObject_IsTrue(obj);
    if (truth >= 0) return truth == 1;
    PyErr_Clear();
  }
  return std::nullopt;
}

int inference_mode_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  std::optional<bool> enabled;
  if (PyTuple_GET_SIZE(args) == 1 && (!kwargs || PyDict_GET_SIZE(kwargs) == 0))
    enabled = bool_argument(PyTuple_GET_ITEM(args, 0));
  if (!enabled) {
    Ref shown(PyObject_Repr(args));
    if (!shown) return -1;
    std::string invoked = PyUnicode_AsUTF8(shown.get());  // "(a, b)" or "(a,)": drop the parentheses
    invoked = invoked.substr(1, invoked.size() - 2);
    if (invoked.ends_with(",")) invoked.pop_back();
    PyErr_Format(
        PyExc_TypeError,
        "__init__(): incompatible constructor arguments. The following argument types are supported:\n"
        "    1. torch._C._InferenceMode(arg0: bool)\n\nInvoked with: %s",
        invoked.c_str());
    return -1;
  }
  auto* object = reinterpret_cast<InferenceModeObject*>(self);
  object->guard.reset();  // __init__ called again: the earlier state comes back first
  object->guard.emplace(*enabled);
  return 0;
}

PyObject* inference_mode_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = type->tp_alloc(type, 0);
  if (self) new (&reinterpret_cast<InferenceModeObject*>(self)->guard) std::optional<InferenceMode>();
  return self;
}

void inference_mode_dealloc(PyObject* self) {
  reinterpret_cast<InferenceModeObject*>(self)->guard.~optional();
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyType_Slot inference_mode_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(inference_mode_new)},
    {Py_tp_init, reinterpret_cast<void*>(inference_mode_init)},
    {Py_tp_dealloc, reinterpret_cast<void*>(inference_mode_dealloc)},
    {0, nullptr},
};

PyType_Spec inference_mode_spec = {"torch._C._InferenceMode", sizeof(InferenceModeObject), 0,
                                   Py_TPFLAGS_DEFAULT, inference_mode_slots};

PyMethodDef mode_functions[] = {
    {"is_grad_enabled", f_is_grad_enabled, METH_NOARGS, nullptr},
    {"_set_grad_enabled", f_set_grad_enabled, METH_O, nullptr},
    {"is_inference_mode_enabled", f_is_inference_mode_enabled, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void init_autograd_mode(PyObject* module) {
  if (PyModule_AddFunctions(module, mode_functions) < 0) throw PythonErrorSet();
  PyObject* type = PyType_FromSpec(&inference_mode_spec);
  if (!type || PyModule_AddObject(module, "_InferenceMode", type) < 0) throw PythonErrorSet();
}

}  // namespace tn::py
