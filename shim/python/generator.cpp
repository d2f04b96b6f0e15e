// torch._C.Generator over the shim's CPU generator.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <random>

#include "python_shim.h"
#include "random.h"

namespace tn::py {

namespace {

struct GeneratorObject {
  PyObject_HEAD Generator* generator;  // the default generator is shared, others owned
  bool owned;
};
PyTypeObject* generator_type = nullptr;

Generator& gen(PyObject* self) { return *reinterpret_cast<GeneratorObject*>(self)->generator; }

PyObject* generator_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"device", nullptr};
  PyObject* device = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O", const_cast<char**>(keywords), &device)) return nullptr;
  if (device) {
    TN_PY_TRY
    if (std::string type = device_type_name(device); type != "cpu") {
      std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::toupper(c); });
      PyErr_Format(PyExc_RuntimeError, "Device type %s is not supported for torch.Generator() api.",
                   type.c_str());
      return nullptr;
    }
    TN_PY_CATCH(nullptr)
  }
  auto* obj = reinterpret_cast<GeneratorObject*>(type->tp_alloc(type, 0));
  obj->generator = new Generator();
  obj->owned = true;
  return reinterpret_cast<PyObject*>(obj);
}
void generator_dealloc(PyObject* self) {
  auto* g = reinterpret_cast<GeneratorObject*>(self);
  if (g->owned) delete g->generator;
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}
PyObject* g_manual_seed(PyObject* self, PyObject* seed) {
  Ref as_int(PyNumber_Long(seed));
  if (!as_int) return nullptr;
  // Negative seeds wrap to uint64 like upstream's.
  unsigned long long value = PyLong_AsUnsignedLongLongMask(as_int.get());
  gen(self).manual_seed(value);
  Py_INCREF(self);
  return self;
}
PyObject* g_initial_seed(PyObject* self, PyObject*) {
  return PyLong_FromUnsignedLongLong(gen(self).initial_seed());
}
PyObject* g_seed(PyObject* self, PyObject*) {
  uint64_t seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  gen(self).manual_seed(seed);
  return PyLong_FromUnsignedLongLong(seed);
}
PyObject* g_get_state(PyObject* self, PyObject*) {
  TN_PY_TRY
  Generator& g = gen(self);
  // Layout: the 624 state words, the index, the seed, and the cached normal.
  Tensor t = Tensor::empty({int64_t(Generator::kStateSize * 4 + 24)}, ScalarType::Byte);
  char* p = t.data();
  std::memcpy(p, g.state, sizeof(g.state));
  int64_t index = g.index;
  uint64_t seed = g.initial_seed();
  double normal = g.next_double_normal.value_or(0.0);
  std::memcpy(p + sizeof(g.state), &index, 8);
  std::memcpy(p + sizeof(g.state) + 8, &seed, 8);
  std::memcpy(p + sizeof(g.state) + 16, &normal, 8);
  return wrap(t);
  TN_PY_CATCH(nullptr)
}
PyObject* g_set_state(PyObject* self, PyObject* state) {
  if (!is_tensor(state) || unpack(state).dtype() != ScalarType::Byte ||
      unpack(state).numel() != Generator::kStateSize * 4 + 24) {
    PyErr_SetString(PyExc_RuntimeError, "Expected a torch.ByteTensor state from Generator.get_state()");
    return nullptr;
  }
  Generator& g = gen(self);
  Tensor t = unpack(state).contiguous();
  const char* p = t.data();
  uint64_t seed;
  int64_t index;
  double normal;
  std::memcpy(&index, p + sizeof(g.state), 8);
  std::memcpy(&seed, p + sizeof(g.state) + 8, 8);
  std::memcpy(&normal, p + sizeof(g.state) + 16, 8);
  g.manual_seed(seed);
  std::memcpy(g.state, p, sizeof(g.state));
  g.index = int(index);
  Py_INCREF(self);
  return self;
}
PyObject* g_device(PyObject*, void*) {
  Py_INCREF(cpu_device());
  return cpu_device();
}
PyMethodDef generator_methods[] = {
    {"manual_seed", g_manual_seed, METH_O, nullptr}, {"initial_seed", g_initial_seed, METH_NOARGS, nullptr},
    {"seed", g_seed, METH_NOARGS, nullptr},          {"get_state", g_get_state, METH_NOARGS, nullptr},
    {"set_state", g_set_state, METH_O, nullptr},     {nullptr, nullptr, 0, nullptr},
};
PyGetSetDef generator_getset[] = {
    {"device", g_device, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};
PyType_Slot generator_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(generator_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(generator_dealloc)},
    {Py_tp_methods, generator_methods},
    {Py_tp_getset, generator_getset},
    {0, nullptr},
};
PyType_Spec generator_spec = {"torch._C.Generator", sizeof(GeneratorObject), 0, Py_TPFLAGS_DEFAULT,
                              generator_slots};

}  // namespace

bool is_generator(PyObject* obj) { return PyObject_TypeCheck(obj, generator_type); }
Generator* generator_of(PyObject* obj) { return &gen(obj); }

void init_generator(PyObject* module) {
  generator_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&generator_spec));
  if (!generator_type) throw PythonErrorSet();
  Py_INCREF(generator_type);
  PyModule_AddObject(module, "Generator", reinterpret_cast<PyObject*>(generator_type));
  auto* d = reinterpret_cast<GeneratorObject*>(generator_type->tp_alloc(generator_type, 0));
  d->generator = &default_generator();
  d->owned = false;
  PyModule_AddObject(module, "default_generator", reinterpret_cast<PyObject*>(d));
}

}  // namespace tn::py
