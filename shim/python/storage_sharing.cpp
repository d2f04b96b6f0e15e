// Storages shared between processes, upstream's "file_descriptor" strategy (Linux's default,
// what DataLoader workers and torch.multiprocessing queues use): a storage moves, in place,
// into an anonymous shared mapping whose file descriptor multiprocessing passes to the
// other process, which maps the same bytes. Also the weak references torch.multiprocessing's
// cache of received storages keeps. The "file_system" strategy (named files and
// torch_shm_manager) is refused by name.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "python_shim.h"

namespace tn::py {

namespace {

// A MAP_SHARED mapping of a memory file, with the descriptor that names it; unmapped and
// closed when the last storage (or window on it) lets go.
struct SharedMapping {
  void* address = nullptr;
  size_t length = 0;
  int fd = -1;
  ~SharedMapping();
};

// The live mappings by address, so that a storage's bytes can be recognised as shared.
// Guarded: a storage may be freed on a thread that does not hold the GIL.
std::mutex registry_mutex;
std::unordered_map<const void*, std::weak_ptr<SharedMapping>>& registry() {
  static auto* mappings = new std::unordered_map<const void*, std::weak_ptr<SharedMapping>>;
  return *mappings;
}

SharedMapping::~SharedMapping() {
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry().erase(this);
  }
  if (address) munmap(address, length);
  if (fd >= 0) close(fd);
}

[[noreturn]] void system_error(const std::string& what) { throw Error(what + ": " + std::strerror(errno)); }

std::shared_ptr<SharedMapping> map_shared(int fd, size_t length) {
  auto mapping = std::make_shared<SharedMapping>();
  mapping->fd = fd;
  mapping->length = length;
  if (length) {
    void* address = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (address == MAP_FAILED)
      system_error("unable to mmap " + std::to_string(length) + " bytes of shared memory");
    mapping->address = address;
  }
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[mapping.get()] = mapping;
  return mapping;
}

// A new memory file of `length` zero bytes, mapped.
std::shared_ptr<SharedMapping> new_shared_memory(size_t length) {
  int fd = memfd_create("torchnative-shared-storage", MFD_CLOEXEC);
  if (fd < 0) system_error("unable to create shared memory");
  if (ftruncate(fd, off_t(length)) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    system_error("unable to size shared memory to " + std::to_string(length) + " bytes");
  }
  return map_shared(fd, length);
}

// The mapping a storage's bytes are (all of), or null when they are private.
std::shared_ptr<SharedMapping> mapping_of(const Storage& storage) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry().find(storage.memory().get());
  std::shared_ptr<SharedMapping> mapping = it == registry().end() ? nullptr : it->second.lock();
  bool whole = mapping && mapping->address == storage.data() && mapping->length == storage.nbytes();
  return whole ? mapping : nullptr;
}

std::shared_ptr<Storage> storage_on(const std::shared_ptr<SharedMapping>& mapping) {
  return std::make_shared<Storage>(mapping->address, mapping->length,
                                   std::static_pointer_cast<void>(mapping));
}

PyObject* s_is_shared(PyObject* self, PyObject*) {
  return PyBool_FromLong(mapping_of(*storage_of(self)) != nullptr);
}

PyObject* s_get_shared_fd(PyObject* self, PyObject*) {
  std::shared_ptr<SharedMapping> mapping = mapping_of(*storage_of(self));
  if (!mapping) {
    PyErr_SetString(PyExc_RuntimeError, "couldn't retrieve a shared file descriptor");
    return nullptr;
  }
  return PyLong_FromLong(mapping->fd);
}

// (fd, size): moves the storage into shared memory first unless it is there already.
PyObject* s_share_fd(PyObject* self, PyObject*) {
  TN_PY_TRY
  Storage& storage = *storage_of(self);
  std::shared_ptr<SharedMapping> mapping = mapping_of(storage);
  if (!mapping) {
    mapping = new_shared_memory(storage.nbytes());
    storage.move_to(mapping->address, mapping);
  }
  return Py_BuildValue("(in)", mapping->fd, Py_ssize_t(storage.nbytes()));
  TN_PY_CATCH(nullptr)
}

// The receiving side: maps the bytes behind `fd` (duplicated: the caller closes its own).
PyObject* s_new_shared_fd(PyObject* cls, PyObject* args) {
  TN_PY_TRY
  int fd = -1;
  Py_ssize_t size = 0;
  if (!PyArg_ParseTuple(args, "in", &fd, &size)) return nullptr;
  int own = dup(fd);
  if (own < 0) system_error("could not duplicate the shared memory file descriptor " + std::to_string(fd));
  return new_storage_object(reinterpret_cast<PyTypeObject*>(cls), storage_on(map_shared(own, size_t(size))));
  TN_PY_CATCH(nullptr)
}

// A new shared storage of `size` zero bytes (DataLoader workers collate batches into one).
PyObject* s_new_using_fd(PyObject* cls, PyObject* arg) {
  TN_PY_TRY
  Py_ssize_t size = PyLong_AsSsize_t(arg);
  if (size < 0 && PyErr_Occurred()) return nullptr;
  return new_storage_object(reinterpret_cast<PyTypeObject*>(cls),
                            storage_on(new_shared_memory(size_t(size))));
  TN_PY_CATCH(nullptr)
}

// Weak references as integers (torch.multiprocessing keeps them in its cache).
using WeakStorage = std::weak_ptr<Storage>;

WeakStorage* weak_from(PyObject* handle) {
  auto* weak = static_cast<WeakStorage*>(PyLong_AsVoidPtr(handle));
  if (!weak && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "invalid storage weak reference");
  return weak;
}

PyObject* s_weak_ref(PyObject* self, PyObject*) {
  return PyLong_FromVoidPtr(new WeakStorage(storage_of(self)));
}

PyObject* s_expired(PyObject*, PyObject* handle) {
  WeakStorage* weak = weak_from(handle);
  return weak ? PyBool_FromLong(weak->expired()) : nullptr;
}

PyObject* s_free_weak_ref(PyObject*, PyObject* handle) {
  if (handle == Py_None) Py_RETURN_NONE;
  WeakStorage* weak = weak_from(handle);
  if (!weak) return nullptr;
  delete weak;
  Py_RETURN_NONE;
}

PyObject* s_new_with_weak_ptr(PyObject* cls, PyObject* handle) {
  TN_PY_TRY
  WeakStorage* weak = weak_from(handle);
  if (!weak) return nullptr;
  std::shared_ptr<Storage> storage = weak->lock();
  if (!storage) Py_RETURN_NONE;
  return new_storage_object(reinterpret_cast<PyTypeObject*>(cls), std::move(storage));
  TN_PY_CATCH(nullptr)
}

PyObject* s_refuse_file_system(PyObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_NotImplementedError,
                  "torchnative shares storages between processes through file descriptors only: the "
                  "'file_system' strategy (named shared-memory files kept by torch_shm_manager) is not "
                  "implemented; use torch.multiprocessing.set_sharing_strategy('file_descriptor')");
  return nullptr;
}

#define SHARING_METHOD(NAME, FN, FLAGS) \
  { NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(FN)), FLAGS, nullptr }
#define FILE_SYSTEM(NAME, FLAGS) \
  SHARING_METHOD(NAME, s_refuse_file_system, METH_VARARGS | METH_KEYWORDS | FLAGS)

PyMethodDef sharing_methods[] = {
    SHARING_METHOD("is_shared", s_is_shared, METH_NOARGS),
    SHARING_METHOD("_share_fd_cpu_", s_share_fd, METH_NOARGS),
    SHARING_METHOD("_get_shared_fd", s_get_shared_fd, METH_NOARGS),
    SHARING_METHOD("_new_shared_fd_cpu", s_new_shared_fd, METH_VARARGS | METH_CLASS),
    SHARING_METHOD("_new_using_fd_cpu", s_new_using_fd, METH_O | METH_CLASS),
    SHARING_METHOD("_weak_ref", s_weak_ref, METH_NOARGS),
    SHARING_METHOD("_expired", s_expired, METH_O | METH_CLASS),
    SHARING_METHOD("_free_weak_ref", s_free_weak_ref, METH_O | METH_CLASS),
    SHARING_METHOD("_new_with_weak_ptr", s_new_with_weak_ptr, METH_O | METH_CLASS),
    FILE_SYSTEM("_share_filename_cpu_", 0),
    FILE_SYSTEM("_shared_incref", 0),
    FILE_SYSTEM("_shared_decref", 0),
    FILE_SYSTEM("_new_shared_filename_cpu", METH_CLASS),
    FILE_SYSTEM("_new_using_filename_cpu", METH_CLASS),
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void add_sharing_methods(PyTypeObject* type) {
  for (PyMethodDef* def = sharing_methods; def->ml_name; ++def) {
    Ref descriptor(def->ml_flags & METH_CLASS ? PyDescr_NewClassMethod(type, def)
                                              : PyDescr_NewMethod(type, def));
    if (!descriptor || PyDict_SetItemString(type->tp_dict, def->ml_name, descriptor.get()) < 0)
      throw PythonErrorSet();
  }
  PyType_Modified(type);
}

}  // namespace tn::py
