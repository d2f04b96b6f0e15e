// The autograd graph seen from Python: grad_fn objects of upstream's class names
// (AddBackward0 ...) with name() and next_functions, and torch._C._ImperativeEngine, whose
// run_backward is what Tensor.backward, torch.autograd.backward and torch.autograd.grad call.

#include <map>

#include "python_shim.h"

namespace tn::py {

namespace {

struct NodeObject {
  PyObject_HEAD std::shared_ptr<autograd::Node> node;  // placement-constructed
  PyObject* metadata;                                  // grad_fn.metadata, made on first use
};

NodeObject* as_node(PyObject* self) { return reinterpret_cast<NodeObject*>(self); }

void node_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  NodeObject* n = as_node(self);
  Py_CLEAR(n->metadata);
  if (n->node && n->node->python_object == self) n->node->python_object = nullptr;
  n->node.~shared_ptr();
  type->tp_free(self);
  Py_DECREF(type);
}

int node_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(as_node(self)->metadata);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int node_clear(PyObject* self) {
  Py_CLEAR(as_node(self)->metadata);
  return 0;
}

PyObject* node_name(PyObject* self, PyObject*) {
  return PyUnicode_FromString(as_node(self)->node->name().c_str());
}

PyObject* node_next_functions(PyObject* self, void*) {
  TN_PY_TRY
  const auto& edges = as_node(self)->node->next_edges;
  Ref result(PyTuple_New(Py_ssize_t(edges.size())));
  for (size_t i = 0; i < edges.size(); ++i) {
    Ref fn(wrap_node(edges[i].function));
    PyTuple_SET_ITEM(result.get(), Py_ssize_t(i), Py_BuildValue("(OI)", fn.get(), edges[i].input_nr));
  }
  return result.release();
  TN_PY_CATCH(nullptr)
}

PyObject* node_metadata(PyObject* self, void*) {
  NodeObject* n = as_node(self);
  if (!n->metadata) n->metadata = PyDict_New();
  return Ref::borrow(n->metadata).release();
}

// AccumulateGrad.variable: the leaf it accumulates into.
PyObject* node_variable(PyObject* self, void*) {
  TN_PY_TRY
  auto* sink = dynamic_cast<autograd::AccumulateGrad*>(as_node(self)->node.get());
  if (!sink)
    raise(PyExc_AttributeError, "'" + as_node(self)->node->name() + "' object has no attribute 'variable'");
  return wrap(Tensor(sink->variable));
  TN_PY_CATCH(nullptr)
}

// Hooks on nodes belong to the later autograd issue: refused by name, never ignored.
PyObject* node_refuse_hook(PyObject*, PyObject*) {
  PyErr_SetString(PyExc_NotImplementedError, "torchnative does not support hooks on grad_fn nodes yet");
  return nullptr;
}

PyMethodDef node_methods[] = {
    {"name", node_name, METH_NOARGS, nullptr},
    {"register_hook", node_refuse_hook, METH_VARARGS, nullptr},
    {"register_prehook", node_refuse_hook, METH_VARARGS, nullptr},
    {"_register_hook_dict", node_refuse_hook, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef node_getset[] = {
    {"next_functions", node_next_functions, nullptr, nullptr, nullptr},
    {"metadata", node_metadata, nullptr, nullptr, nullptr},
    {"variable", node_variable, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

// One Python class per node name, made on first use: type(y.grad_fn).__name__ is upstream's.
PyTypeObject* node_type(const std::string& name) {
  static std::map<std::string, PyTypeObject*> types;
  if (auto it = types.find(name); it != types.end()) return it->second;
  static std::vector<std::unique_ptr<std::string>> names;  // the spec keeps a pointer to its name
  // Upstream's node classes live in builtins: their repr is <class 'MulBackward0'>.
  names.push_back(std::make_unique<std::string>("builtins." + name));
  PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(node_dealloc)},
      {Py_tp_traverse, reinterpret_cast<void*>(node_traverse)},
      {Py_tp_clear, reinterpret_cast<void*>(node_clear)},
      {Py_tp_methods, node_methods},
      {Py_tp_getset, node_getset},
      {0, nullptr},
  };
  PyType_Spec spec = {names.back()->c_str(), sizeof(NodeObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
                      slots};
  auto* type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  if (!type) throw PythonErrorSet();
  // In builtins (no warning for a missing module), and printed without it, as upstream's.
  type->tp_name = names.back()->c_str() + std::string("builtins.").size();
  types[name] = type;
  return type;
}

// ---- the engine ----

std::vector<Tensor> tensor_sequence(PyObject* seq, const char* what) {
  std::vector<Tensor> out;
  Ref items(PySequence_Fast(seq, what));
  if (!items) throw PythonErrorSet();
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items.get()); ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(items.get(), i);
    if (item != Py_None && !is_tensor(item)) raise(PyExc_TypeError, std::string(what) + " must hold Tensors");
    out.push_back(item == Py_None ? Tensor() : unpack(item));
  }
  return out;
}

// run_backward(tensors, grad_tensors, keep_graph, create_graph, inputs, allow_unreachable,
// accumulate_grad), as upstream's python_engine.cpp takes it.
PyObject* engine_run_backward(PyObject*, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"tensors", "grad_tensors",      "keep_graph",      "create_graph",
                                   "inputs",  "allow_unreachable", "accumulate_grad", nullptr};
  PyObject *tensors, *grad_tensors, *inputs = nullptr;
  int keep_graph = 0, create_graph = 0, allow_unreachable = 0, accumulate_grad = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOpp|Opp", const_cast<char**>(keywords), &tensors,
                                   &grad_tensors, &keep_graph, &create_graph, &inputs, &allow_unreachable,
                                   &accumulate_grad))
    return nullptr;
  if (create_graph)
    raise(PyExc_NotImplementedError,
          "torchnative does not support create_graph=True (higher-order gradients) yet");
  std::vector<Tensor> roots = tensor_sequence(tensors, "tensors");
  std::vector<Tensor> grads = tensor_sequence(grad_tensors, "grad_tensors");
  if (roots.size() != grads.size())
    raise(PyExc_RuntimeError, "got " + std::to_string(grads.size()) + " gradients for " +
                                  std::to_string(roots.size()) + " tensors");
  for (size_t i = 0; i < roots.size(); ++i)
    if (!roots[i].defined()) raise(PyExc_TypeError, "tensors must hold Tensors");
  std::vector<Tensor> wanted =
      inputs && inputs != Py_None ? tensor_sequence(inputs, "inputs") : std::vector<Tensor>{};
  for (size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].defined() && autograd::requires_grad(roots[i]))
      raise(PyExc_RuntimeError, "element " + std::to_string(i) + " of gradients tuple is None");
  std::vector<Tensor> result;
  {
    PyThreadState* state = PyEval_SaveThread();  // the engine touches no Python object
    try {
      result = autograd::run_backward(roots, grads, keep_graph, wanted, allow_unreachable, accumulate_grad);
    } catch (...) {
      PyEval_RestoreThread(state);
      throw;
    }
    PyEval_RestoreThread(state);
  }
  if (accumulate_grad) Py_RETURN_NONE;
  Ref out(PyTuple_New(Py_ssize_t(result.size())));
  for (size_t i = 0; i < result.size(); ++i) PyTuple_SET_ITEM(out.get(), Py_ssize_t(i), wrap(result[i]));
  return out.release();
  TN_PY_CATCH(nullptr)
}

PyObject* engine_refuse(PyObject*, PyObject*) {
  PyErr_SetString(PyExc_NotImplementedError, "torchnative does not support engine callbacks yet");
  return nullptr;
}

PyObject* engine_is_checkpoint_valid(PyObject*, PyObject*) { Py_RETURN_TRUE; }

PyMethodDef engine_methods[] = {
    {"run_backward", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(engine_run_backward)),
     METH_VARARGS | METH_KEYWORDS, nullptr},
    {"queue_callback", engine_refuse, METH_O, nullptr},
    {"is_checkpoint_valid", engine_is_checkpoint_valid, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot engine_slots[] = {
    {Py_tp_methods, engine_methods},
    {0, nullptr},
};
PyType_Spec engine_spec = {"torch._C._ImperativeEngine", sizeof(PyObject), 0, Py_TPFLAGS_DEFAULT,
                           engine_slots};

// Tensor.register_hook on a leaf stores its hooks in _backward_hooks (an OrderedDict that
// torch.load and Parameter also set, empty): the engine runs without the GIL, so it takes it
// to look.
bool leaf_hooks_present(const TensorImpl& leaf) {
  PyGILState_STATE state = PyGILState_Ensure();
  auto* object = static_cast<TensorObject*>(leaf.python_object);
  bool present = object && object->backward_hooks && PyMapping_Check(object->backward_hooks) &&
                 PyMapping_Size(object->backward_hooks) > 0;
  PyErr_Clear();
  PyGILState_Release(state);
  return present;
}

// torch.autograd.Function subclasses derive from _FunctionBase; their apply is refused by name.
PyObject* function_apply(PyObject*, PyObject*, PyObject*) {
  PyErr_SetString(
      PyExc_NotImplementedError,
      "torchnative does not support custom autograd Functions (torch.autograd.Function.apply) yet");
  return nullptr;
}

PyMethodDef function_methods[] = {
    {"apply", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(function_apply)),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};
PyType_Slot function_slots[] = {
    {Py_tp_methods, function_methods},
    {0, nullptr},
};
PyType_Spec function_spec = {"torch._C._FunctionBase", sizeof(PyObject), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, function_slots};

}  // namespace

PyObject* wrap_node(const std::shared_ptr<autograd::Node>& node) {
  if (!node) Py_RETURN_NONE;
  if (node->python_object) return Ref::borrow(static_cast<PyObject*>(node->python_object)).release();
  PyTypeObject* type = node_type(node->name());
  PyObject* obj = type->tp_alloc(type, 0);
  if (!obj) throw PythonErrorSet();
  new (&as_node(obj)->node) std::shared_ptr<autograd::Node>(node);
  node->python_object = obj;
  return obj;
}

void init_autograd_graph(PyObject* module) {
  PyObject* engine = PyType_FromSpec(&engine_spec);
  if (!engine) throw PythonErrorSet();
  PyModule_AddObject(module, "_ImperativeEngine", engine);
  PyObject* function_base = PyType_FromSpec(&function_spec);
  if (!function_base) throw PythonErrorSet();
  PyModule_AddObject(module, "_FunctionBase", function_base);
  autograd::set_leaf_hooks_check(leaf_hooks_present);
}

}  // namespace tn::py
