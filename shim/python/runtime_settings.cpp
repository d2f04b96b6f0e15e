// Process-wide settings torch._C keeps: the thread counts (torch.set_num_threads and the
// inter-op count), oneDNN's switch (torch.backends.mkldnn.enabled) and the vitals registry
// (torch.set_vital, read_vitals, vitals_enabled, which every DataLoader writes to). All behave
// as upstream 1.13's, messages included.
#include <cstdlib>
#include <iostream>
#include <string>
#include <unordered_map>

#include "python_shim.h"
#include "settings.h"

namespace tn::py {

namespace {

// ---- thread counts and oneDNN ----
// The intra-op count and oneDNN's switch are the kernels' (ops/settings.h); the inter-op count
// is recorded so that scripts setting and reading it see upstream's answers.

int inter_op_threads = 0;  // 0: not set; set at most once, as upstream allows

// An int argument, as upstream's binding checks it: a Python int (bool excluded), positive.
bool positive_count(PyObject* arg, const char* function, int& count) {
  if (!PyLong_Check(arg) || PyBool_Check(arg)) {
    PyErr_Format(PyExc_RuntimeError, "%s expects an int, but got %s", function, Py_TYPE(arg)->tp_name);
    return false;
  }
  long long value = PyLong_AsLongLong(arg);
  if (value == -1 && PyErr_Occurred()) return false;
  count = int(value);
  if (count <= 0) {
    PyErr_Format(PyExc_RuntimeError, "%s expects a positive integer", function);
    return false;
  }
  return true;
}

PyObject* f_set_num_threads(PyObject*, PyObject* arg) {
  int count = 0;
  if (!positive_count(arg, "set_num_threads", count)) return nullptr;
  set_intra_op_threads(count);
  Py_RETURN_NONE;
}

PyObject* f_get_num_threads(PyObject*, PyObject*) { return PyLong_FromLong(intra_op_threads()); }

// Upstream lets a second call's c10::Error escape its binding, which aborts the interpreter;
// the shim raises that refusal instead.
PyObject* f_set_num_interop_threads(PyObject*, PyObject* arg) {
  int count = 0;
  if (!positive_count(arg, "set_num_interop_threads", count)) return nullptr;
  if (inter_op_threads) {
    PyErr_SetString(PyExc_RuntimeError,
                    "Error: cannot set number of interop threads after parallel work has started or "
                    "set_num_interop_threads called");
    return nullptr;
  }
  inter_op_threads = count;
  Py_RETURN_NONE;
}

PyObject* f_get_num_interop_threads(PyObject*, PyObject*) {
  return PyLong_FromLong(inter_op_threads ? inter_op_threads : default_pool_size());
}

PyObject* f_set_mkldnn_enabled(PyObject*, PyObject* arg) {
  if (!PyBool_Check(arg)) {
    PyErr_Format(PyExc_RuntimeError, "set_enabled_mkldnn expects a bool, but got %s", Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  set_onednn_enabled(arg == Py_True);
  Py_RETURN_NONE;
}

PyObject* f_get_mkldnn_enabled(PyObject*, PyObject*) { return PyBool_FromLong(onednn_enabled()); }

// ---- vitals ----
// Named groups of attributes, on only when TORCH_VITAL is set (non-empty). Kept in unordered
// maps as upstream keeps them, so read_vitals lists them in the same (hash) order; the
// registry prints itself when read and once more when the process exits, as upstream's does.

bool vitals_on() {
  const char* value = std::getenv("TORCH_VITAL");
  return value && *value;
}

class Vitals {
 public:
  // Upstream records whether CUDA was used even with vitals off.
  Vitals() { set("CUDA", "used", "False", true); }
  ~Vitals() {
    if (vitals_on()) std::cout << text();
  }

  bool set(const std::string& vital, const std::string& attribute, const std::string& value, bool force) {
    if (!force && !vitals_on()) return false;
    groups_[vital][attribute] = value;
    return true;
  }

  std::string text() const {
    std::string out;
    for (const auto& [vital, attributes] : groups_)
      for (const auto& [attribute, value] : attributes)
        out += "[TORCH_VITAL] " + vital + "." + attribute + "\t\t " + value + "\n";
    return out;
  }

 private:
  std::unordered_map<std::string, std::unordered_map<std::string, std::string>> groups_;
};

Vitals& vitals() {
  static Vitals registry;
  return registry;
}

PyObject* f_set_vital(PyObject*, PyObject* args) {
  const char *vital, *attribute, *value;
  if (!PyArg_ParseTuple(args, "sss", &vital, &attribute, &value)) {
    PyErr_SetString(PyExc_TypeError,
                    "set_vital(): incompatible function arguments. The following argument types are "
                    "supported:\n    1. (arg0: str, arg1: str, arg2: str) -> bool");
    return nullptr;
  }
  return PyBool_FromLong(vitals().set(vital, attribute, value, false));
}

// Upstream's read_vitals also prints what it returns (to std::cout, unflushed, as here).
PyObject* f_read_vitals(PyObject*, PyObject*) {
  if (!vitals_on()) return PyUnicode_FromString("");
  std::string text = vitals().text();
  std::cout << text;
  return PyUnicode_FromString(text.c_str());
}

PyObject* f_vitals_enabled(PyObject*, PyObject*) { return PyBool_FromLong(vitals_on()); }

PyMethodDef runtime_functions[] = {
    {"set_num_threads", f_set_num_threads, METH_O, nullptr},
    {"get_num_threads", f_get_num_threads, METH_NOARGS, nullptr},
    {"set_num_interop_threads", f_set_num_interop_threads, METH_O, nullptr},
    {"get_num_interop_threads", f_get_num_interop_threads, METH_NOARGS, nullptr},
    {"_set_mkldnn_enabled", f_set_mkldnn_enabled, METH_O, nullptr},
    {"_get_mkldnn_enabled", f_get_mkldnn_enabled, METH_NOARGS, nullptr},
    {"set_vital", f_set_vital, METH_VARARGS, nullptr},
    {"read_vitals", f_read_vitals, METH_NOARGS, nullptr},
    {"vitals_enabled", f_vitals_enabled, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void init_runtime_settings(PyObject* module) {
  vitals();  // constructed at import, as upstream's registry is at load
  if (PyModule_AddFunctions(module, runtime_functions) < 0) throw PythonErrorSet();
}

}  // namespace tn::py
