// c10d's PrefixStore: a view of another store in which every key becomes "<prefix>/<key>",
// so groups sharing one rendezvous store cannot see each other's keys.
#include "distributed/store.h"

namespace tn::dist {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : Store(inner->timeout()), prefix_(std::move(prefix)), inner_(std::move(inner)) {}

  void set(const std::string& key, const Bytes& value) override { inner_->set(prefixed(key), value); }

  // Waits with this store's own timeout, which may differ from the inner store's.
  Bytes get(const std::string& key) override {
    const std::string inner_key = prefixed(key);
    inner_->wait({inner_key}, timeout());
    return inner_->get(inner_key);
  }

  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(prefixed(key), delta); }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return inner_->compare_set(prefixed(key), expected, desired);
  }

  bool check(const std::vector<std::string>& keys) override { return inner_->check(prefixed(keys)); }

  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override {
    inner_->wait(prefixed(keys), timeout);
  }

  bool delete_key(const std::string& key) override { return inner_->delete_key(prefixed(key)); }

  // Counts the inner store's keys, prefixed or not, as c10d does.
  int64_t num_keys() override { return inner_->num_keys(); }

  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& inner() const { return inner_; }

 private:
  std::string prefixed(const std::string& key) const { return prefix_ + "/" + key; }

  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> inner_keys;
    inner_keys.reserve(keys.size());
    for (const auto& key : keys) inner_keys.push_back(prefixed(key));
    return inner_keys;
  }

  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace

std::shared_ptr<Store> make_prefix_store(const std::string& prefix, std::shared_ptr<Store> inner) {
  if (!inner) throw InvalidArgument("make_prefix_store: the inner store is null");
  return std::make_shared<PrefixStore>(prefix, std::move(inner));
}

const std::string& prefix_of(const Store& store) {
  static const std::string no_prefix;
  const auto* prefix_store = dynamic_cast<const PrefixStore*>(&store);
  return prefix_store ? prefix_store->prefix() : no_prefix;
}

std::shared_ptr<Store> inner_of(const Store& store) {
  const auto* prefix_store = dynamic_cast<const PrefixStore*>(&store);
  return prefix_store ? prefix_store->inner() : nullptr;
}

}  // namespace tn::dist
