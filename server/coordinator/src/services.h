// What the RPC handlers and the round threads of one coordinator share.
#pragma once

#include "device_board.h"
#include "event_log.h"
#include "guarded_state.h"
#include "metrics.h"
#include "secure_exchange.h"
#include "server/coordinator_config.h"
#include "update_inbox.h"

namespace tn::server {

struct Services {
  const CoordinatorConfig& config;
  GuardedState& state;
  DeviceBoard& board;
  EventLog& events;
  Metrics& metrics;
  UpdateInboxes& inboxes;             // the rounds' gRPC devices' contributions, for SubmitUpdate
  SecureExchanges& secure_exchanges;  // the secure rounds' stages, for SecAggStage
};

}  // namespace tn::server
