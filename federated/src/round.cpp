#include "federated/round.h"

#include <algorithm>

#include "federated/errors.h"
#include "update_identity.h"

namespace tn::federated {
namespace {

std::string round_label(const RoundPlan& plan) { return "round " + std::to_string(plan.round_id); }

}  // namespace

const char* round_status_name(RoundStatus status) {
  switch (status) {
    case RoundStatus::Open:
      return "open";
    case RoundStatus::Completed:
      return "completed";
    case RoundStatus::Abandoned:
      return "abandoned";
  }
  return "unknown";
}

Round::Round(RoundPlan plan, ModelSpec spec, UpdateLimits limits, std::shared_ptr<const Clock> clock)
    : plan_(std::move(plan)), spec_(std::move(spec)), limits_(limits), clock_(std::move(clock)) {
  const std::string label = round_label(plan_);
  if (!clock_) throw ParameterRefused(label + ": no clock");
  if (plan_.selected.empty()) throw ParameterRefused(label + ": no devices selected");
  std::sort(plan_.selected.begin(), plan_.selected.end());
  auto repeated = std::adjacent_find(plan_.selected.begin(), plan_.selected.end());
  if (repeated != plan_.selected.end())
    throw ParameterRefused(label + ": device '" + *repeated + "' is selected twice");
  if (plan_.min_updates < 1) throw ParameterRefused(label + ": min_updates must be at least 1");
  if (plan_.min_updates > plan_.target_updates || plan_.target_updates > plan_.selected.size())
    throw ParameterRefused(label + ": needs min_updates (" + std::to_string(plan_.min_updates) +
                           ") <= target_updates (" + std::to_string(plan_.target_updates) +
                           ") <= selected devices (" + std::to_string(plan_.selected.size()) + ")");
}

void Round::submit(Update update) {
  using Reason = UpdateRefused::Reason;
  const std::string from = "update from '" + update.device_id + "'";
  const std::string label = round_label(plan_);
  if (status_ != RoundStatus::Open)
    throw UpdateRefused(Reason::RoundClosed,
                        from + ": " + label + " is closed (" + round_status_name(status_) + ")");
  // Cheap checks first: a stale, unexpected or surplus update is refused before it is scanned.
  detail::check_update_identity(update, plan_.round_id, plan_.model_version);
  if (clock_->now() >= plan_.deadline)
    throw UpdateRefused(Reason::RoundClosed, from + ": " + label + "'s deadline has passed");
  if (!std::binary_search(plan_.selected.begin(), plan_.selected.end(), update.device_id))
    throw UpdateRefused(Reason::NotSelected, from + ": the device was not selected for " + label);
  auto position = std::lower_bound(contributors_.begin(), contributors_.end(), update.device_id);
  if (position != contributors_.end() && *position == update.device_id)
    throw UpdateRefused(Reason::Duplicate, from + ": the device already contributed to " + label);
  if (contributors_.size() >= plan_.target_updates)
    throw UpdateRefused(Reason::RoundClosed, from + ": " + label + " already has the " +
                                                 std::to_string(plan_.target_updates) + " updates it wants");
  validate_update(update, spec_, plan_.round_id, plan_.model_version, limits_);
  const auto index = position - contributors_.begin();
  contributors_.insert(position, update.device_id);
  updates_.insert(updates_.begin() + index, std::move(update));
}

bool Round::due() const {
  return status_ == RoundStatus::Open &&
         (contributors_.size() >= plan_.target_updates || clock_->now() >= plan_.deadline);
}

RoundStatus Round::close() {
  if (status_ != RoundStatus::Open) throw StateError(round_label(plan_) + " is already closed");
  status_ = contributors_.size() >= plan_.min_updates ? RoundStatus::Completed : RoundStatus::Abandoned;
  return status_;
}

RoundStatus Round::close_with_contributors(std::vector<DeviceId> contributors) {
  const std::string label = round_label(plan_);
  if (status_ != RoundStatus::Open) throw StateError(label + " is already closed");
  if (!updates_.empty())
    throw StateError(label + " took individual updates; it cannot also be closed from a data-plane sum");
  std::sort(contributors.begin(), contributors.end());
  auto repeated = std::adjacent_find(contributors.begin(), contributors.end());
  if (repeated != contributors.end())
    throw Refused(label + ": contributor '" + *repeated + "' is listed twice");
  for (const DeviceId& device : contributors)
    if (!std::binary_search(plan_.selected.begin(), plan_.selected.end(), device))
      throw Refused(label + ": contributor '" + device + "' was not selected");
  contributors_ = std::move(contributors);
  return close();
}

std::vector<DeviceId> Round::missing() const {
  std::vector<DeviceId> missing;
  std::set_difference(plan_.selected.begin(), plan_.selected.end(), contributors_.begin(),
                      contributors_.end(), std::back_inserter(missing));
  return missing;
}

}  // namespace tn::federated
