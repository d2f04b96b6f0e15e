// What a node keeps of its forward call, and the checks made when the backward reads it.
#include <map>

#include "formulas.h"

namespace tn::autograd {

namespace {

// An alias of t's memory and version counter, without t's history.
Tensor alias_without_history(const Tensor& t) {
  return t.view_as_strided(t.sizes(), t.strides(), t.offset());
}

std::string producer_of(const Tensor& t) {
  const auto& fn = grad_fn(t);
  return fn ? "output " + std::to_string(output_nr(t)) + " of " + fn->name() : "";
}

SavedTensor save(const Tensor& t, const std::string& producer) {
  if (t.impl()->inference)  // it keeps no version counter to check
    throw Error(
        "Inference tensors cannot be saved for backward. To work around you can make a clone to get a "
        "normal tensor and use it in autograd.");
  return SavedTensor{alias_without_history(t), t.impl()->version->load(), producer, t.impl_ptr()};
}

std::string producer_now(const SavedTensor& saved) {
  if (!saved.producer.empty()) return saved.producer;
  auto original = saved.original.lock();
  return original ? producer_of(Tensor(original)) : "";
}

const std::optional<SavedTensor> kReleased;

std::string describe(const Tensor& t) {
  return "[torch." + std::string(upstream_type_name(t.dtype())) + "Tensor " + shape_str(t.sizes()) + "]";
}

}  // namespace

Saved::Saved(const Stack& args, const std::vector<size_t>& saved_inputs, bool copy_self)
    : args_(args),
      tensors_(args.size()),
      meta_(args.size()),
      list_meta_(args.size()),
      defined_(args.size(), false) {
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i].is<std::vector<Tensor>>()) {
      for (const Tensor& t : args_[i].get<std::vector<Tensor>>())
        list_meta_[i].push_back({t.sizes(), t.dtype()});
      args_[i] = IValue();
    }
    if (!args_[i].is<Tensor>()) continue;
    const Tensor& t = args_[i].get<Tensor>();
    meta_[i] = GradientMeta{t.sizes(), t.dtype()};
    defined_[i] = true;
    bool saved = std::find(saved_inputs.begin(), saved_inputs.end(), i) != saved_inputs.end();
    // An in-place call overwrites self: its formula reads the value self had before.
    if (saved) tensors_[i] = save(copy_self && i == 0 ? t.clone() : t, "");
    args_[i] = IValue();  // tensors only through input(i): never kept by accident
  }
}

void Saved::save_results(const Stack& results, const std::string& node_name) {
  for (const IValue& r : results) {
    auto number = std::to_string(results_.size());
    results_.push_back(r.is<Tensor>() ? std::optional<SavedTensor>(
                                            save(r.get<Tensor>(), "output " + number + " of " + node_name))
                                      : std::nullopt);
  }
}

const Tensor& Saved::unpack(const std::optional<SavedTensor>& saved) const {
  if (released_)
    throw Error(
        "Trying to backward through the graph a second time (or directly access saved tensors after they "
        "have "
        "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
        "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
        "or "
        "if you need to access saved tensors after calling backward.");
  if (!saved) throw Error("internal: a derivative formula read a tensor it did not declare as saved");
  uint32_t now = saved->data.impl()->version->load();
  if (now != saved->version)
    throw Error(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: " +
        describe(saved->data) +
        (producer_now(*saved).empty() ? "" : ", which is " + producer_now(*saved) + ",") + " is at version " +
        std::to_string(now) + "; expected version " + std::to_string(saved->version) +
        " instead. Hint: enable anomaly detection to find the operation that failed to compute its "
        "gradient, with torch.autograd.set_detect_anomaly(True).");
  return saved->data;
}

// Released, tensors_ and results_ are empty: unpack refuses before it reads them.
const Tensor& Saved::input(size_t i) const { return unpack(released_ ? kReleased : tensors_.at(i)); }
const Tensor& Saved::result(size_t i) const { return unpack(released_ ? kReleased : results_.at(i)); }

namespace {
std::map<std::string, Formula>& formulas() {
  static std::map<std::string, Formula> table;
  return table;
}
}  // namespace

const Formula* find_formula(const std::string& full_name) {
  auto it = formulas().find(full_name);
  return it == formulas().end() ? nullptr : &it->second;
}

FormulaRegistration::FormulaRegistration(const char* full_name, Formula formula) {
  formulas().emplace(full_name, std::move(formula));
}

}  // namespace tn::autograd
