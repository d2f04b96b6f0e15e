// torch._C._distributed_c10d's stores: Store and its kinds (HashStore, FileStore, TCPStore,
// PrefixStore) over the distributed/ library's. Every call that may wait releases the GIL.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <string>

#include "c10d.h"
#include "distributed/store.h"

namespace py = pybind11;

namespace tn::py::c10d {
namespace {

// Python sees each store kind as its own class; pybind11 needs a C++ type per class, so
// each is a Store that forwards to the library's store.
class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::shared_ptr<Store> inner)
      : Store(inner->timeout()), inner_(std::move(inner)) {}
  void set(const std::string& key, const Bytes& value) override { inner_->set(key, value); }
  Bytes get(const std::string& key) override { return inner_->get(key); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(key, delta); }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return inner_->compare_set(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override {
    inner_->wait(keys, timeout);
  }
  using Store::wait;
  bool delete_key(const std::string& key) override { return inner_->delete_key(key); }
  int64_t num_keys() override { return inner_->num_keys(); }
  const std::shared_ptr<Store>& inner() const { return inner_; }

 private:
  std::shared_ptr<Store> inner_;
};
struct HashStoreHandle : ForwardingStore {
  using ForwardingStore::ForwardingStore;
};
struct FileStoreHandle : ForwardingStore {
  using ForwardingStore::ForwardingStore;
};
struct TCPStoreHandle : ForwardingStore {
  using ForwardingStore::ForwardingStore;
};
struct PrefixStoreHandle : ForwardingStore {
  using ForwardingStore::ForwardingStore;
};

void set_store_timeout(Store& store, Milliseconds timeout) {
  store.set_timeout(timeout);
  if (auto* forwarding = dynamic_cast<ForwardingStore*>(&store)) forwarding->inner()->set_timeout(timeout);
}

Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }

::py::bytes as_bytes(const Bytes& value) {
  return ::py::bytes(reinterpret_cast<const char*>(value.data()), value.size());
}

void bind_store_base(::py::module_& m) {
  ::py::class_<Store, std::shared_ptr<Store>>(m, "Store")
      .def("set",
           [](Store& store, const std::string& key, const std::string& value) {
             ::py::gil_scoped_release unlocked;
             store.set(key, bytes_of(value));
           })
      .def("get",
           [](Store& store, const std::string& key) {
             Bytes value;
             {
               ::py::gil_scoped_release unlocked;
               value = store.get(key);
             }
             return as_bytes(value);
           })
      .def("add",
           [](Store& store, const std::string& key, int64_t value) {
             ::py::gil_scoped_release unlocked;
             return store.add(key, value);
           })
      .def("compare_set",
           [](Store& store, const std::string& key, const std::string& expected, const std::string& desired) {
             Bytes value;
             {
               ::py::gil_scoped_release unlocked;
               value = store.compare_set(key, bytes_of(expected), bytes_of(desired));
             }
             return as_bytes(value);
           })
      .def("delete_key",
           [](Store& store, const std::string& key) {
             ::py::gil_scoped_release unlocked;
             return store.delete_key(key);
           })
      .def("num_keys",
           [](Store& store) {
             ::py::gil_scoped_release unlocked;
             return store.num_keys();
           })
      .def("set_timeout", &set_store_timeout)
      .def("wait",
           [](Store& store, const std::vector<std::string>& keys) {
             ::py::gil_scoped_release unlocked;
             store.wait(keys);
           })
      .def("wait",
           [](Store& store, const std::vector<std::string>& keys, Milliseconds timeout) {
             ::py::gil_scoped_release unlocked;
             store.wait(keys, timeout);
           })
      .def_property_readonly("timeout", [](const Store& store) { return store.timeout(); });
}

void bind_store_kinds(::py::module_& m) {
  ::py::class_<HashStoreHandle, Store, std::shared_ptr<HashStoreHandle>>(m, "HashStore").def(::py::init([] {
    return std::make_shared<HashStoreHandle>(make_hash_store());
  }));
  ::py::class_<FileStoreHandle, Store, std::shared_ptr<FileStoreHandle>>(m, "FileStore")
      .def(::py::init([](const std::string& path, int num_workers) {
             ::py::gil_scoped_release unlocked;
             return std::make_shared<FileStoreHandle>(
                 make_file_store(path, num_workers < 0 ? std::nullopt : std::optional<int>(num_workers)));
           }),
           ::py::arg("file_name"), ::py::arg("world_size") = -1);
  ::py::class_<TCPStoreHandle, Store, std::shared_ptr<TCPStoreHandle>>(m, "TCPStore")
      .def(::py::init([](const std::string& host, int port, std::optional<int> world_size, bool is_master,
                         Milliseconds timeout, bool wait_for_workers, bool /*multi_tenant*/) {
             if (port < 0 || port > 65535)
               throw InvalidArgument("TCPStore: port " + std::to_string(port) + " is out of range");
             TCPStoreOptions options;
             options.host = host;
             options.port = static_cast<uint16_t>(port);
             options.is_master = is_master;
             options.world_size = world_size;
             options.wait_for_workers = wait_for_workers;
             options.timeout = timeout;
             ::py::gil_scoped_release unlocked;
             return std::make_shared<TCPStoreHandle>(make_tcp_store(options));
           }),
           ::py::arg("host_name"), ::py::arg("port"), ::py::arg("world_size") = ::py::none(),
           ::py::arg("is_master") = false, ::py::arg("timeout") = Milliseconds(300000),
           ::py::arg("wait_for_workers") = true, ::py::arg("multi_tenant") = false)
      .def_property_readonly("host",
                             [](const TCPStoreHandle& store) { return tcp_store_host(*store.inner()); })
      .def_property_readonly("port",
                             [](const TCPStoreHandle& store) { return tcp_store_port(*store.inner()); });
  ::py::class_<PrefixStoreHandle, Store, std::shared_ptr<PrefixStoreHandle>>(m, "PrefixStore")
      .def(::py::init([](const std::string& prefix, std::shared_ptr<Store> inner) {
             return std::make_shared<PrefixStoreHandle>(make_prefix_store(prefix, std::move(inner)));
           }),
           ::py::arg("prefix"), ::py::arg("store"))
      .def_property_readonly("underlying_store",
                             [](const PrefixStoreHandle& store) { return inner_of(*store.inner()); });
}

}  // namespace

void bind_stores(::py::module_& m) {
  bind_store_base(m);
  bind_store_kinds(m);
}

}  // namespace tn::py::c10d
