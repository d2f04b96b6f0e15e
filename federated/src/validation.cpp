#include "federated/validation.h"

#include <cmath>
#include <set>

#include "numeric.h"
#include "update_identity.h"

namespace tn::federated {
namespace {

using Reason = UpdateRefused::Reason;

[[noreturn]] void refuse(Reason reason, const Update& update, const std::string& what) {
  throw UpdateRefused(reason, "update from '" + update.device_id + "': " + what);
}

}  // namespace

void detail::check_update_identity(const Update& update, uint64_t round_id, uint64_t model_version) {
  if (update.device_id.empty()) throw UpdateRefused(Reason::Malformed, "update: the device id is empty");
  if (update.round_id < round_id)
    refuse(Reason::WrongRound, update,
           "round " + std::to_string(update.round_id) + " is over, the current round is " +
               std::to_string(round_id) + " (a late or replayed update)");
  if (update.round_id > round_id)
    refuse(Reason::WrongRound, update,
           "round " + std::to_string(update.round_id) + " has not started, the current round is " +
               std::to_string(round_id));
  if (update.model_version != model_version)
    refuse(Reason::WrongVersion, update,
           "trained on model version " + std::to_string(update.model_version) + ", round " +
               std::to_string(round_id) + " trains version " + std::to_string(model_version));
}

namespace {

void check_tensor(const Update& update, const NamedTensor& tensor, const TensorSpec& expected) {
  const std::string label = "tensor '" + tensor.name + "' ";
  if (tensor.dtype != expected.dtype)
    refuse(Reason::Malformed, update,
           label + "has dtype " +
               (is_aggregated(tensor.dtype) || is_integral(tensor.dtype, true)
                    ? std::string(scalar_type_name(tensor.dtype))
                    : "code " + std::to_string(int(tensor.dtype))) +
               ", expected " + scalar_type_name(expected.dtype));
  if (tensor.shape != expected.shape)
    refuse(Reason::Malformed, update,
           label + "has shape " + shape_str(tensor.shape) + ", expected " + shape_str(expected.shape));
  if (tensor.nbytes != expected.nbytes() || (tensor.nbytes > 0 && !tensor.data))
    refuse(Reason::Malformed, update,
           label + "holds " + std::to_string(tensor.data ? tensor.nbytes : 0) + " bytes, shape " +
               shape_str(expected.shape) + " of " + scalar_type_name(expected.dtype) + " needs " +
               std::to_string(expected.nbytes()));
}

}  // namespace

void validate_update(const Update& update, const ModelSpec& spec, uint64_t round_id, uint64_t model_version,
                     const UpdateLimits& limits) {
  detail::check_update_identity(update, round_id, model_version);
  if (update.num_examples < 1 || update.num_examples > limits.max_examples)
    refuse(Reason::BadExamples, update,
           std::to_string(update.num_examples) + " examples, must be between 1 and " +
               std::to_string(limits.max_examples));
  // The declared buffer lengths, so nothing of an oversized update is looked at.
  size_t total_bytes = 0;
  for (const NamedTensor& tensor : update.model.tensors) total_bytes += tensor.nbytes;
  if (total_bytes > limits.max_update_bytes)
    refuse(Reason::TooLarge, update,
           std::to_string(total_bytes) + " bytes exceed the limit of " +
               std::to_string(limits.max_update_bytes));

  std::set<std::string_view> seen;
  for (const NamedTensor& tensor : update.model.tensors) {
    if (!seen.insert(tensor.name).second)
      refuse(Reason::Malformed, update, "tensor '" + tensor.name + "' is listed twice");
    if (!spec.find(tensor.name)) refuse(Reason::Malformed, update, "unexpected tensor '" + tensor.name + "'");
  }
  for (const TensorSpec& expected : spec.tensors())
    if (!seen.contains(expected.name))
      refuse(Reason::Malformed, update, "tensor '" + expected.name + "' is missing");
  for (const NamedTensor& tensor : update.model.tensors)
    check_tensor(update, tensor, *spec.find(tensor.name));

  for (const NamedTensor& tensor : update.model.tensors) {
    int64_t bad = detail::first_non_finite(tensor.dtype, tensor.data.get(), tensor.numel());
    if (bad < 0) continue;
    std::vector<double> value(1);
    detail::load_as_double(tensor, bad, value);
    refuse(Reason::NonFinite, update,
           "tensor '" + tensor.name + "' element " + std::to_string(bad) + " (index " +
               detail::index_str(tensor.shape, bad) + ") is " + (std::isnan(value[0]) ? "NaN" : "infinite"));
  }
}

}  // namespace tn::federated
