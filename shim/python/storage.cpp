// torch._C.StorageBase: the untyped bytes under tensors, which upstream's torch.storage
// (UntypedStorage, TypedStorage and the legacy FloatStorage...) builds on. It defines exactly
// the methods upstream's C class defines, so what upstream leaves to Python stays there.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "python_shim.h"

namespace tn::py {

namespace {

struct StorageObject {
  PyObject_HEAD std::shared_ptr<Storage> storage;  // placement-constructed
};

PyTypeObject* storage_base_type = nullptr;

}  // namespace

const std::shared_ptr<Storage>& storage_of(PyObject* self) {
  return reinterpret_cast<StorageObject*>(self)->storage;
}

PyObject* new_storage_object(PyTypeObject* type, std::shared_ptr<Storage> storage) {
  PyObject* obj = type->tp_alloc(type, 0);
  if (!obj) throw PythonErrorSet();
  new (&reinterpret_cast<StorageObject*>(obj)->storage) std::shared_ptr<Storage>(std::move(storage));
  return obj;
}

namespace {

// torch.UntypedStorage once torch.storage exists; the base class before that.
PyTypeObject* untyped_storage_class() {
  static PyObject* cls = nullptr;
  if (cls) return reinterpret_cast<PyTypeObject*>(cls);
  PyObject* torch = PyImport_GetModule(Ref(PyUnicode_FromString("torch")).get());
  if (!torch) {
    PyErr_Clear();
    return storage_base_type;
  }
  Ref owner(torch);
  PyObject* found = PyObject_GetAttrString(torch, "UntypedStorage");
  if (!found || !PyType_Check(found)) {
    PyErr_Clear();
    Py_XDECREF(found);
    return storage_base_type;
  }
  cls = found;  // kept for the process lifetime
  return reinterpret_cast<PyTypeObject*>(cls);
}

std::shared_ptr<Storage> zeroed_storage(size_t nbytes) {
  auto storage = std::make_shared<Storage>(nbytes);
  std::memset(storage->data(), 0, nbytes);
  return storage;
}

void require_cpu_device(PyObject* device, const char* where) {
  if (!device || device == Py_None) return;
  const std::string type = device_type_name(device);
  if (type == "cpu") return;
  if (type == "cuda") raise(PyExc_RuntimeError, std::string(where) + ": Storage device not recognized: cuda");
  raise(PyExc_NotImplementedError,
        std::string(where) + ": torchnative has only the cpu device; '" + type + "' is not available");
}

// A byte value as upstream stores it: any Python int, kept modulo 256.
uint8_t byte_value(PyObject* value, const char* where) {
  if (!is_int_like(value)) {
    raise(PyExc_TypeError, std::string(where) + ": expected an int, got " + Py_TYPE(value)->tp_name);
  }
  Ref as_long(PyNumber_Index(value));
  if (!as_long) throw PythonErrorSet();
  return uint8_t(PyLong_AsUnsignedLongLongMask(as_long.get()));
}

PyObject* storage_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"", "device", "allocator", nullptr};
  PyObject *arg = nullptr, *device = nullptr, *allocator = nullptr;
  if (kwargs && PyDict_GetItemString(kwargs, "cdata"))
    raise(PyExc_NotImplementedError,
          "torchnative: UntypedStorage(cdata=...) wraps a raw StorageImpl pointer, which the shim never "
          "hands out; share tensors through torch.distributed or by pickling them");
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$OO", const_cast<char**>(keywords), &arg, &device,
                                   &allocator))
    return nullptr;
  require_cpu_device(device, "torch.UntypedStorage()");
  if (allocator && allocator != Py_None)
    raise(PyExc_NotImplementedError,
          "torchnative: storages take no allocator (pinned memory needs a CUDA host allocator)");
  if (!arg) return new_storage_object(type, zeroed_storage(0));
  if (is_int_like(arg) && !PyBool_Check(arg)) {
    int64_t nbytes = unpack_long(arg);
    if (nbytes < 0)
      raise(PyExc_RuntimeError,
            "torch.UntypedStorage(): size must be non-negative, got " + std::to_string(nbytes));
    return new_storage_object(type, zeroed_storage(size_t(nbytes)));
  }
  if (!PySequence_Check(arg))
    raise(PyExc_RuntimeError,
          std::string("torch.UntypedStorage(): Expected a sequence type, but got ") + Py_TYPE(arg)->tp_name);
  Ref seq(PySequence_Fast(arg, ""));
  if (!seq) throw PythonErrorSet();
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  auto storage = zeroed_storage(size_t(n));
  auto* bytes = static_cast<uint8_t*>(storage->data());
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
    if (!is_int_like(item))
      raise(PyExc_RuntimeError,
            std::string("torch.UntypedStorage(): tried to construct a storage from a sequence (") +
                Py_TYPE(arg)->tp_name + "), but one of the items was of type " + Py_TYPE(item)->tp_name +
                " instead of int");
    bytes[i] = byte_value(item, "torch.UntypedStorage()");
  }
  return new_storage_object(type, storage);
  TN_PY_CATCH(nullptr)
}

void storage_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  reinterpret_cast<StorageObject*>(self)->storage.~shared_ptr();
  type->tp_free(self);
  if (type->tp_flags & Py_TPFLAGS_HEAPTYPE) Py_DECREF(type);
}

Py_ssize_t storage_length(PyObject* self) { return Py_ssize_t(storage_of(self)->nbytes()); }

// A storage index is a byte: a slice of step 1 gives [start, start + length), an int one byte.
struct ByteRange {
  Py_ssize_t start, length;
};
ByteRange byte_slice(PyObject* slice, Py_ssize_t nbytes) {
  Py_ssize_t start, stop, step;
  if (PySlice_Unpack(slice, &start, &stop, &step) < 0) throw PythonErrorSet();
  Py_ssize_t length = PySlice_AdjustIndices(nbytes, &start, &stop, step);
  if (step != 1)
    raise(PyExc_RuntimeError,
          "Trying to slice with a step of " + std::to_string(step) + ", but only a step of 1 is supported");
  return {start, length};
}
Py_ssize_t byte_index(PyObject* index, Py_ssize_t nbytes) {
  if (!is_int_like(index))
    raise(PyExc_TypeError, std::string("can't index a torch.UntypedStorage with ") + Py_TYPE(index)->tp_name);
  int64_t i = unpack_long(index);
  if (i < -nbytes || i >= nbytes)
    raise(PyExc_IndexError,
          "index " + std::to_string(i) + " out of range for storage of size " + std::to_string(nbytes));
  return i < 0 ? i + nbytes : i;
}

PyObject* storage_subscript(PyObject* self, PyObject* index) {
  TN_PY_TRY
  const auto& storage = storage_of(self);
  auto nbytes = Py_ssize_t(storage->nbytes());
  auto* bytes = static_cast<uint8_t*>(storage->data());
  if (PySlice_Check(index)) {
    ByteRange range = byte_slice(index, nbytes);
    // A window on the same bytes, as upstream's: writes through either are seen by both.
    auto window = std::make_shared<Storage>(bytes + range.start, size_t(range.length), storage->memory());
    return new_storage_object(Py_TYPE(self), window);
  }
  return PyLong_FromLong(bytes[byte_index(index, nbytes)]);
  TN_PY_CATCH(nullptr)
}

int storage_assign(PyObject* self, PyObject* index, PyObject* value) {
  TN_PY_TRY
  if (!value) raise(PyExc_TypeError, "storage items cannot be deleted");
  const auto& storage = storage_of(self);
  auto nbytes = Py_ssize_t(storage->nbytes());
  auto* bytes = static_cast<uint8_t*>(storage->data());
  uint8_t byte = byte_value(value, "storage item assignment");
  if (PySlice_Check(index)) {
    ByteRange range = byte_slice(index, nbytes);
    std::memset(bytes + range.start, byte, size_t(range.length));
  } else {
    bytes[byte_index(index, nbytes)] = byte;
  }
  return 0;
  TN_PY_CATCH(-1)
}

PyObject* s_nbytes(PyObject* self, PyObject*) { return PyLong_FromSize_t(storage_of(self)->nbytes()); }
PyObject* s_element_size(PyObject*, PyObject*) { return PyLong_FromLong(1); }
PyObject* s_data_ptr(PyObject* self, PyObject*) { return PyLong_FromVoidPtr(storage_of(self)->data()); }
PyObject* s_false(PyObject*, PyObject*) { Py_RETURN_FALSE; }

PyObject* s_copy(PyObject* self, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"src", "non_blocking", nullptr};
  PyObject *src, *non_blocking = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O", const_cast<char**>(keywords), &src, &non_blocking))
    return nullptr;
  StorageRef source;
  if (!storage_argument(src, &source))
    raise(PyExc_TypeError, std::string("copy_(): expected a storage, got ") + Py_TYPE(src)->tp_name);
  const auto& target = storage_of(self);
  if (source.storage->nbytes() != target->nbytes()) raise(PyExc_RuntimeError, "size does not match");
  std::memmove(target->data(), source.storage->data(), target->nbytes());
  Py_INCREF(self);
  return self;
  TN_PY_CATCH(nullptr)
}

PyObject* s_fill(PyObject* self, PyObject* value) {
  TN_PY_TRY
  const auto& storage = storage_of(self);
  std::memset(storage->data(), byte_value(value, "fill_"), storage->nbytes());
  Py_INCREF(self);
  return self;
  TN_PY_CATCH(nullptr)
}

PyObject* s_resize(PyObject* self, PyObject* size) {
  TN_PY_TRY
  int64_t nbytes = unpack_long(size);
  if (nbytes < 0)
    raise(PyExc_RuntimeError, "resize_: size must be non-negative, got " + std::to_string(nbytes));
  const auto& storage = storage_of(self);
  size_t before = storage->nbytes();
  storage->resize(size_t(nbytes));
  if (size_t(nbytes) > before)
    std::memset(static_cast<char*>(storage->data()) + before, 0, size_t(nbytes) - before);
  Py_INCREF(self);
  return self;
  TN_PY_CATCH(nullptr)
}

PyObject* s_new(PyObject* self, PyObject*) {
  TN_PY_TRY return new_storage_object(Py_TYPE(self), zeroed_storage(0));
  TN_PY_CATCH(nullptr)
}

// from_buffer(buffer, byte_order=None, count=-1, offset=0, *, dtype): a copy of the buffer's
// bytes, read as `dtype` elements in `byte_order` and stored in native order.
PyObject* s_from_buffer(PyObject* cls, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"buffer", "byte_order", "count", "offset", "dtype", nullptr};
  PyObject *buffer, *order = Py_None, *dtype = Py_None;
  Py_ssize_t count = -1, offset = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OnnO", const_cast<char**>(keywords), &buffer, &order,
                                   &count, &offset, &dtype))
    return nullptr;
  if (dtype == Py_None) raise(PyExc_RuntimeError, "argument 'dtype' cannot be None");
  if (!is_dtype(dtype)) raise(PyExc_TypeError, "argument 'dtype' must be torch.dtype");
  ScalarType type = dtype_of(dtype);
  size_t element = element_size(type);
  bool swap = false;
  if (element > 1) {
    if (order == Py_None)
      raise(PyExc_RuntimeError, "function missing required argument 'byte_order' (pos 2)");
    std::string spelled = PyUnicode_Check(order) ? PyUnicode_AsUTF8(order) : "";
    if (spelled != "native" && spelled != "little" && spelled != "big")
      raise(PyExc_ValueError, "invalid byte_order '" + spelled + "' (expected 'big', 'little', or 'native')");
    swap = spelled != "native" && (spelled == "big") != (std::endian::native == std::endian::big);
  }
  Py_buffer view;
  if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) return nullptr;
  std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> release(&view, PyBuffer_Release);
  if (offset < 0 || offset > view.len)
    // The numbers in upstream's message are the other way round; kept so the errors agree.
    raise(PyExc_ValueError, "offset must be non-negative and no greater than buffer length (" +
                                std::to_string(offset) + ") , but got " + std::to_string(view.len));
  Py_ssize_t available = view.len - offset;
  if (count < 0) {
    if (available % Py_ssize_t(element) != 0)
      raise(PyExc_ValueError, "buffer size (" + std::to_string(available) +
                                  ") must be a multiple of element size (" + std::to_string(element) + ")");
    count = available / Py_ssize_t(element);
  }
  if (offset + count * Py_ssize_t(element) > view.len)
    raise(PyExc_ValueError, "buffer has only " + std::to_string(available) + " elements after offset " +
                                std::to_string(offset) + ", but specified a size of " +
                                std::to_string(count));
  size_t nbytes = size_t(count) * element;
  auto storage = std::make_shared<Storage>(nbytes);
  const auto* from = static_cast<const uint8_t*>(view.buf) + offset;
  auto* to = static_cast<uint8_t*>(storage->data());
  if (!swap) {
    std::memcpy(to, from, nbytes);
  } else {
    for (size_t i = 0; i < nbytes; i += element) std::reverse_copy(from + i, from + i + element, to + i);
  }
  return new_storage_object(reinterpret_cast<PyTypeObject*>(cls), storage);
  TN_PY_CATCH(nullptr)
}

// from_file(filename, shared=False, size=0): `size` bytes of the file mapped into memory. Shared
// mappings write through to the file (which grows to `size`); private ones are copy-on-write.
PyObject* s_from_file(PyObject* cls, PyObject* args, PyObject* kwargs) {
  TN_PY_TRY
  static const char* keywords[] = {"filename", "shared", "size", nullptr};
  const char* filename;
  int shared = 0;
  Py_ssize_t size = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|pn", const_cast<char**>(keywords), &filename, &shared,
                                   &size))
    return nullptr;
  if (size < 0)
    raise(PyExc_RuntimeError, "from_file: size must be non-negative, got " + std::to_string(size));
  int fd = ::open(filename, shared ? O_RDWR | O_CREAT : O_RDONLY, 0644);
  if (fd < 0)
    raise(PyExc_RuntimeError, std::string("unable to open file <") + filename + "> in " +
                                  (shared ? "read-write" : "read-only") + " mode: " + std::strerror(errno));
  struct stat info {};
  if (fstat(fd, &info) != 0 || (info.st_size < size && (!shared || ftruncate(fd, size) != 0))) {
    std::string why = info.st_size < size && !shared
                          ? "the file has only " + std::to_string(info.st_size) + " bytes"
                          : std::strerror(errno);
    ::close(fd);
    raise(PyExc_RuntimeError,
          "unable to mmap " + std::to_string(size) + " bytes from file <" + filename + ">: " + why);
  }
  void* data = nullptr;
  if (size > 0) {
    data = mmap(nullptr, size_t(size), PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      std::string why = std::strerror(errno);
      ::close(fd);
      raise(PyExc_RuntimeError,
            "unable to mmap " + std::to_string(size) + " bytes from file <" + filename + ">: " + why);
    }
  }
  ::close(fd);  // the mapping keeps the file
  auto storage = std::make_shared<Storage>(data, size_t(size), [data, size] {
    if (data) munmap(data, size_t(size));
  });
  return new_storage_object(reinterpret_cast<PyTypeObject*>(cls), storage);
  TN_PY_CATCH(nullptr)
}

// _write_file(f, is_real_file, save_size, element_size): upstream's legacy (pre-zip) storage
// record, an int64 element count (when save_size) then the raw little-endian bytes.
PyObject* s_write_file(PyObject* self, PyObject* args) {
  TN_PY_TRY
  PyObject* file;
  int is_real_file, save_size;
  Py_ssize_t element = 1;
  if (!PyArg_ParseTuple(args, "Opp|n", &file, &is_real_file, &save_size, &element)) return nullptr;
  static_assert(std::endian::native == std::endian::little, "the legacy format is little-endian");
  const auto& storage = storage_of(self);
  if (element <= 0 || storage->nbytes() % size_t(element) != 0)
    raise(PyExc_RuntimeError, "_write_file: " + std::to_string(storage->nbytes()) +
                                  " bytes are not a whole number of elements of size " +
                                  std::to_string(element));
  // Written through the file object even for real files: its buffer and position stay right.
  if (save_size) {
    int64_t numel = int64_t(storage->nbytes() / size_t(element));
    Ref header(PyBytes_FromStringAndSize(reinterpret_cast<const char*>(&numel), sizeof numel));
    if (!Ref(PyObject_CallMethod(file, "write", "O", header.get()))) throw PythonErrorSet();
  }
  Ref view(PyMemoryView_FromMemory(static_cast<char*>(storage->data()), Py_ssize_t(storage->nbytes()),
                                   PyBUF_READ));
  if (!view || !Ref(PyObject_CallMethod(file, "write", "O", view.get()))) throw PythonErrorSet();
  Py_RETURN_NONE;
  TN_PY_CATCH(nullptr)
}

// _set_from_file(f, offset, is_real_file, element_size): reads a record _write_file wrote into
// this storage, which must already have the record's size. A short file is an error, never a
// partly filled storage.
PyObject* s_set_from_file(PyObject* self, PyObject* args) {
  TN_PY_TRY
  PyObject *file, *offset;
  int is_real_file;
  Py_ssize_t element = 1;
  if (!PyArg_ParseTuple(args, "OOp|n", &file, &offset, &is_real_file, &element)) return nullptr;
  if (offset != Py_None && !Ref(PyObject_CallMethod(file, "seek", "O", offset))) throw PythonErrorSet();
  auto read_exactly = [&](void* into, size_t nbytes) {
    size_t done = 0;
    while (done < nbytes) {
      Ref view(
          PyMemoryView_FromMemory(static_cast<char*>(into) + done, Py_ssize_t(nbytes - done), PyBUF_WRITE));
      Ref got(PyObject_CallMethod(file, "readinto", "O", view.get()));
      if (!got) throw PythonErrorSet();
      Py_ssize_t n = got.get() == Py_None ? 0 : PyLong_AsSsize_t(got.get());
      if (n <= 0)
        raise(PyExc_RuntimeError, "unexpected EOF, expected " + std::to_string(nbytes - done) +
                                      " more bytes. The file might be corrupted.");
      done += size_t(n);
    }
  };
  int64_t numel = 0;
  read_exactly(&numel, sizeof numel);
  const auto& storage = storage_of(self);
  if (element <= 0 || numel < 0 || uint64_t(numel) * uint64_t(element) != storage->nbytes())
    raise(PyExc_RuntimeError, "storage has wrong byte size: expected " + std::to_string(storage->nbytes()) +
                                  " got " + std::to_string(numel * element));
  read_exactly(storage->data(), storage->nbytes());
  Py_INCREF(self);
  return self;
  TN_PY_CATCH(nullptr)
}

PyObject* s_cdata(PyObject* self, void*) { return PyLong_FromVoidPtr(storage_of(self).get()); }
PyObject* s_device(PyObject*, void*) {
  PyObject* cpu = cpu_device();
  Py_INCREF(cpu);
  return cpu;
}

// Sharing a storage between processes (torch.multiprocessing's tensor queues, share_memory_)
// needs storages in shared memory with reference counts across processes.
// CUDA's IPC and raw StorageImpl handles: the shim has neither.
PyObject* s_refuse_sharing(PyObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_NotImplementedError,
                  "torchnative has no CUDA storages and hands out no raw StorageImpl pointers; storages "
                  "are shared between processes through file descriptors (torch.multiprocessing)");
  return nullptr;
}

#define STORAGE_METHOD(NAME, FN, FLAGS) \
  { NAME, reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(FN)), FLAGS, nullptr }
#define REFUSED(NAME) STORAGE_METHOD(NAME, s_refuse_sharing, METH_VARARGS | METH_KEYWORDS)
#define REFUSED_CLASS(NAME) STORAGE_METHOD(NAME, s_refuse_sharing, METH_VARARGS | METH_KEYWORDS | METH_CLASS)

PyMethodDef storage_methods[] = {
    STORAGE_METHOD("nbytes", s_nbytes, METH_NOARGS),
    STORAGE_METHOD("element_size", s_element_size, METH_NOARGS),
    STORAGE_METHOD("data_ptr", s_data_ptr, METH_NOARGS),
    STORAGE_METHOD("is_pinned", s_false, METH_NOARGS),
    STORAGE_METHOD("copy_", s_copy, METH_VARARGS | METH_KEYWORDS),
    STORAGE_METHOD("fill_", s_fill, METH_O),
    STORAGE_METHOD("resize_", s_resize, METH_O),
    STORAGE_METHOD("new", s_new, METH_NOARGS),
    STORAGE_METHOD("from_buffer", s_from_buffer, METH_VARARGS | METH_KEYWORDS | METH_CLASS),
    STORAGE_METHOD("from_file", s_from_file, METH_VARARGS | METH_KEYWORDS | METH_CLASS),
    STORAGE_METHOD("_write_file", s_write_file, METH_VARARGS),
    STORAGE_METHOD("_set_from_file", s_set_from_file, METH_VARARGS),
    REFUSED("_share_cuda_"),
    REFUSED("_set_cdata"),
    REFUSED_CLASS("_new_shared_cuda"),
    REFUSED_CLASS("_release_ipc_counter_cuda"),
    REFUSED_CLASS("_new_with_file"),
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef storage_getset[] = {
    {"_cdata", s_cdata, nullptr, nullptr, nullptr},
    {"device", s_device, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot storage_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(storage_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(storage_dealloc)},
    {Py_tp_methods, storage_methods},
    {Py_tp_getset, storage_getset},
    {Py_mp_length, reinterpret_cast<void*>(storage_length)},
    {Py_mp_subscript, reinterpret_cast<void*>(storage_subscript)},
    {Py_mp_ass_subscript, reinterpret_cast<void*>(storage_assign)},
    {0, nullptr},
};

PyType_Spec storage_spec = {
    "torch._C.StorageBase", sizeof(StorageObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, storage_slots,
};

}  // namespace

bool is_storage(PyObject* obj) { return storage_base_type && PyObject_TypeCheck(obj, storage_base_type); }

PyObject* wrap_storage(std::shared_ptr<Storage> storage) {
  return new_storage_object(untyped_storage_class(), std::move(storage));
}

bool storage_argument(PyObject* obj, StorageRef* out) {
  if (is_storage(obj)) {
    *out = StorageRef{storage_of(obj), std::nullopt};
    return true;
  }
  // A TypedStorage (torch.storage's Python class) wraps an UntypedStorage and names a dtype.
  if (!PyObject_HasAttrString(obj, "_storage") || !PyObject_HasAttrString(obj, "dtype")) return false;
  Ref untyped(PyObject_GetAttrString(obj, "_storage"));
  Ref dtype(PyObject_GetAttrString(obj, "dtype"));
  if (!untyped || !dtype || !is_storage(untyped.get()) || !is_dtype(dtype.get())) {
    PyErr_Clear();
    return false;
  }
  *out = StorageRef{storage_of(untyped.get()), dtype_of(dtype.get())};
  return true;
}

void init_storage_type(PyObject* module) {
  storage_base_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&storage_spec));
  if (!storage_base_type) throw PythonErrorSet();
  add_sharing_methods(storage_base_type);
  Py_INCREF(storage_base_type);
  PyModule_AddObject(module, "StorageBase", reinterpret_cast<PyObject*>(storage_base_type));
}

}  // namespace tn::py
