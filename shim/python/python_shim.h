// Internal header of the torch._C extension: the Tensor object, the Python-facing
// value types and the schema-driven argument parser. Operators know nothing of this.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <string>
#include <vector>

#include "autograd.h"
#include "ops.h"
#include "typed_ops.h"

namespace tn::py {

// Owning reference; the extension's only smart pointer for PyObject.
class Ref {
 public:
  Ref() = default;
  explicit Ref(PyObject* steal) : p_(steal) {}
  static Ref borrow(PyObject* p) {
    Py_XINCREF(p);
    return Ref(p);
  }
  Ref(const Ref& o) : p_(o.p_) { Py_XINCREF(p_); }
  Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() { Py_XDECREF(p_); }
  PyObject* get() const { return p_; }
  PyObject* release() {
    PyObject* p = p_;
    p_ = nullptr;
    return p;
  }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PyObject* p_ = nullptr;
};

// Thrown after a Python error has been set; the binding boundary just returns NULL.
struct PythonErrorSet {};
// Sets a Python error of `type` and throws PythonErrorSet.
[[noreturn]] void raise(PyObject* type, const std::string& message);

// ---- Tensor objects ----
struct TensorObject {
  PyObject_HEAD Tensor tensor;  // placement-constructed
  PyObject* backward_hooks;
};
extern PyTypeObject* tensor_base_type;  // torch._C._TensorBase
extern PyObject* tensor_class;          // torch.Tensor once _initExtension ran
bool is_tensor(PyObject* obj);
const Tensor& unpack(PyObject* obj);
PyObject* wrap(const Tensor& tensor);  // new reference; reuses the live object of this impl
// requires_grad_() and .requires_grad = ...: false with the Python error set when refused.
bool set_requires_grad(const Tensor& t, bool flag);
void init_tensor_type(PyObject* module);

// ---- the autograd graph (autograd_graph.cpp) ----
// A grad_fn object of upstream's class name (AddBackward0 ...) for `node`, None for none; the
// same object while it lives.
PyObject* wrap_node(const std::shared_ptr<autograd::Node>& node);
// torch._C._ImperativeEngine and the graph's Python types.
void init_autograd_graph(PyObject* module);
void add_tensor_methods(PyObject* methods_dict_target);
PyObject* f_parse_to(PyObject*, PyObject* args, PyObject* kwargs);               // torch._C._nn._parse_to
PyObject* nonzero_function(PyObject* module, PyObject* args, PyObject* kwargs);  // torch.nonzero

// ---- value types: dtype, layout, device, memory_format, Size ----
PyObject* dtype_object(ScalarType type);  // borrowed
bool is_dtype(PyObject* obj);
ScalarType dtype_of(PyObject* obj);
bool is_layout(PyObject* obj);
bool is_memory_format(PyObject* obj);
int64_t memory_format_of(PyObject* obj);
// Refuses channels_last and channels_last_3d by name: tensors are made only in contiguous_format.
void refuse_channels_last(int64_t format);
PyObject* memory_format_object(int64_t format);  // borrowed
// Whether a device argument (torch.device, str, ordinal; None is the cpu) is the meta device;
// refuses any device but the cpu and meta: cuda as upstream's CPU build refuses it
// (AssertionError), any other device type by name (NotImplementedError). Throws PythonErrorSet
// with the error set.
bool device_is_meta(PyObject* device);
// `t` as a meta tensor (its shape, dtype and, when dense, its stride order) when `meta`,
// else `t` itself: what torch.tensor(..., device="meta") and friends return.
Tensor on_device(const Tensor& t, bool meta);
// torch.device(value) for a device, a string or an ordinal (null with upstream's error set).
Ref as_device(PyObject* value);
// The type of a device argument ("cpu", "cuda", ...) as torch.device(device) parses it.
std::string device_type_name(PyObject* device);
bool is_device(PyObject* obj);
PyObject* cpu_device();                   // borrowed
PyObject* meta_device();                  // borrowed
PyObject* strided_layout();               // borrowed
PyObject* make_size(const Shape& sizes);  // torch.Size, new reference
bool is_size(PyObject* obj);
void init_value_types(PyObject* module);
bool is_generator(PyObject* obj);
Generator* generator_of(PyObject* obj);
void init_generator(PyObject* module);

// ---- storages: torch._C.StorageBase over the core Storage ----
void init_storage_type(PyObject* module);
bool is_storage(PyObject* obj);
PyObject* wrap_storage(std::shared_ptr<Storage> storage);  // a torch.UntypedStorage, new reference
PyObject* new_storage_object(PyTypeObject* type, std::shared_ptr<Storage> storage);  // of `type`
const std::shared_ptr<Storage>& storage_of(PyObject* self);                          // a StorageBase's
// The methods that share storages between processes (storage_sharing.cpp).
void add_sharing_methods(PyTypeObject* type);
// An UntypedStorage, or a TypedStorage (which also names its dtype); false for anything else.
bool storage_argument(PyObject* obj, StorageRef* out);

// torch._C.PyTorchFileWriter/PyTorchFileReader (torch.save's zip format), on serialize/.
void init_serialization(PyObject* module);

// ---- legacy constructors: torch.Tensor(...), torch.FloatTensor(...), Tensor.new(...) ----
// The dtypes with a legacy tensor class (torch.FloatTensor ...) and storage class, and the
// tensor class's name ("FloatTensor").
inline constexpr ScalarType kLegacyDtypes[] = {
    ScalarType::Byte, ScalarType::Char,  ScalarType::Short,  ScalarType::Int,  ScalarType::Long,
    ScalarType::Half, ScalarType::Float, ScalarType::Double, ScalarType::Bool, ScalarType::BFloat16};
std::string legacy_class_name(ScalarType dtype);
Tensor legacy_construct(ScalarType dtype, PyObject* args, PyObject* kwargs);
// Creates torch.FloatTensor & co. (metaclass torch.tensortype) in `torch` and torch._tensor_classes.
void install_legacy_tensor_types(PyObject* torch_module, PyObject* c_module);

// ---- conversions ----
Tensor tensor_from_python_data(PyObject* data, std::optional<ScalarType> dtype);
PyObject* tensor_to_list(const Tensor& t);
PyObject* scalar_to_python(const Scalar& s);
bool python_to_scalar(PyObject* obj, Scalar* out);
// A Python int or __index__ provider as int64_t. Throws PythonErrorSet with TypeError for other
// objects and upstream's RuntimeError "Overflow when unpacking long" beyond int64, so no caller can
// return a value while an exception is pending.
int64_t unpack_long(PyObject* obj);
// An int argument as the argument parser accepts it: int, __index__ provider or 0-dim integer
// tensor, never bool or float.
bool is_int_like(PyObject* obj);
int64_t as_int(PyObject* obj);
Tensor wrapped_number(const Scalar& s);  // 0-dim tensor marked as a wrapped number

// ---- operator bindings ----
// A set of overloads reachable under one Python name (torch.add, Tensor.add, ...).
struct Binding;
Binding* make_binding(const std::string& python_name, const std::vector<Operator*>& ops, bool is_method,
                      bool allow_numbers_as_tensors);
PyObject* call_binding(Binding* binding, PyObject* self, PyObject* const* args, size_t nargs,
                       PyObject* kwnames);
PyObject* call_operator_boxed(const Operator& op, PyObject* args, PyObject* kwargs);
// torch.ops overload packets: bind each overload in turn (false, and no Python error, when the
// arguments do not match it), then run the first that binds.
bool bind_operator_call(const Operator& op, PyObject* args, PyObject* kwargs, Stack& stack);
PyObject* run_bound_operator(const Operator& op, Stack& stack);
PyObject* returns_to_python(const Operator& op, Stack& stack);
void init_op_bindings(PyObject* module);
PyObject* new_function(const std::string& name, Binding* binding, const char* module_name);
PyObject* new_method_descriptor(const std::string& name, Binding* binding);

// ---- torch.ops / torch.library surface ----
void init_dispatch(PyObject* module);
void init_surface(PyObject* module);
void init_jit_types(PyObject* module);

// ---- the __torch_function__ protocol (torch_function.cpp) ----
// Whether `type` defines the torch protocol `protocol` ("__torch_function__" or
// "__torch_dispatch__") as anything but torch._C's disabled implementation.
bool type_overrides(PyTypeObject* type, const char* protocol);
// A call's arguments whose types override __torch_function__, in the order upstream consults
// them; none while the protocol is disabled. Vectorcall layout, or a tuple and a dict (either
// may be null); self first when the call is bound.
std::vector<PyObject*> overloaded_arguments(PyObject* self, PyObject* const* args, size_t nargs,
                                            PyObject* kwnames);
std::vector<PyObject*> overloaded_arguments(PyObject* self, PyObject* args, PyObject* kwargs);
// Hands the call to those overrides in turn until one does not answer NotImplemented. `api` is
// the public callable they receive (torch.add, torch.Tensor.add ...); `shown` names it in the
// TypeError raised when every override declines.
PyObject* handle_torch_function(const std::vector<PyObject*>& overloaded, PyObject* api,
                                const std::string& shown, PyObject* self, PyObject* const* args, size_t nargs,
                                PyObject* kwnames);
PyObject* handle_torch_function(const std::vector<PyObject*>& overloaded, PyObject* api,
                                const std::string& shown, PyObject* self, PyObject* args, PyObject* kwargs);
// Upstream's hand-written Tensor methods offer the call to the overrides first: whether one took
// this call of torch.Tensor.<name>; *result is then its answer (nullptr with the error set).
bool tensor_method_overridden(const char* name, PyObject* self, PyObject* args, PyObject* kwargs,
                              PyObject** result);
bool tensor_method_overridden(const char* name, PyObject* self, PyObject* const* args, size_t nargs,
                              PyObject** result);
// torch.Tensor.<name> (torch._C._TensorBase's before torch.Tensor exists): a new reference.
PyObject* tensor_method(const char* name);
// The same for a property of torch.Tensor: its descriptor's __get__ (value null) or __set__.
bool tensor_property_overridden(const char* name, PyObject* self, PyObject* value, PyObject** result);

// A method's or property's name as a template argument, so each table entry gets its own wrapper.
template <size_t N>
struct MethodName {
  char text[N];
  constexpr MethodName(const char (&name)[N]) { std::copy_n(name, N, text); }
};

// Properties that offer themselves to the overrides first, as upstream's do.
template <MethodName name, PyObject* (*get)(PyObject*, void*)>
PyObject* overridable_getter(PyObject* self, void* closure) {
  PyObject* result;
  if (tensor_property_overridden(name.text, self, nullptr, &result)) return result;
  return get(self, closure);
}
template <MethodName name, int (*set)(PyObject*, PyObject*, void*)>
int overridable_setter(PyObject* self, PyObject* value, void* closure) {
  PyObject* result;
  if (value && tensor_property_overridden(name.text, self, value, &result)) {
    Py_XDECREF(result);
    return result ? 0 : -1;
  }
  return set(self, value, closure);
}

// Refuses ctypes loads of libraries linked against upstream libtorch/libc10 (see library_guard.cpp).
void install_library_guard();
// torch._C._distributed_c10d and torch._C._c10d_init, on the distributed/ library.
void init_c10d(PyObject* root_module, PyObject* c10d_module);
// torch._C.Future and torch._C._collect_all (futures.cpp).
void init_futures(PyObject* module);

// Translates a C++ exception into the Python exception upstream raises.
void set_python_error(const std::exception& e);
// torch._C._LinAlgError once the module is initialised (RuntimeError, its base, before).
extern PyObject* linalg_error_type;

#define TN_PY_TRY try {
#define TN_PY_CATCH(RET)                    \
  }                                         \
  catch (const ::tn::py::PythonErrorSet&) { \
    return RET;                             \
  }                                         \
  catch (const std::exception& e) {         \
    ::tn::py::set_python_error(e);          \
    return RET;                             \
  }

}  // namespace tn::py
