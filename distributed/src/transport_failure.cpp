// The transport's failures: a lost peer's requests failed, a failed group's requests failed and
// its peers told why, and the questions a collective asks about either.
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "transport_internal.h"

namespace tn::dist {

void Transport::lose_connection(Connection& connection, const asio::error_code& error) {
  lose_peer(connection, "disconnected (" + error.message() + ")", true);
}

// A peer that disconnected may have sent frames on its lane that are not read yet (the two
// streams are read independently): the receives those could complete fail once the lane ends.
bool Transport::awaits_lane_locked(const Request& receive) const {
  const Lane* lane = receive.peer >= 0 ? lanes_[receive.peer].get() : nullptr;
  return lane && !lane->read_closed && lane_may_complete(receive);
}

void Transport::lose_peer(Connection& connection, const std::string& reason, bool lane_may_hold_frames) {
  RequestPtr reading = std::exchange(connection.reading, nullptr);
  std::deque<RequestPtr> unsent;
  bool already_lost;
  {
    std::lock_guard lock(connection.send_mutex);
    already_lost = connection.lost;
    connection.lost = true;  // before the close, so no caller writes to a closed descriptor
    unsent.swap(connection.send_queue);
    connection.writing = false;
  }
  if (!already_lost) {
    asio::error_code ignored;
    connection.socket->close(ignored);
  }
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    // A connection closed by our own shutdown is not a peer failure.
    const bool newly_lost = !already_lost && !stopping_;
    if (!lane_may_hold_frames && lanes_[connection.peer]) lanes_[connection.peer]->read_closed = true;
    if (newly_lost) {
      peer_failures_[connection.peer] = reason;
      changed_.notify_all();
    }
    const auto error = std::make_exception_ptr(PeerError("rank " + std::to_string(connection.peer) + " " +
                                                         peer_failures_[connection.peer].value_or(reason)));
    if (newly_lost) {
      for (auto it = posted_.begin(); it != posted_.end();) {
        if ((*it)->peer == connection.peer && !awaits_lane_locked(**it)) {
          finish_locked(*it, error, finished);
          it = posted_.erase(it);
        } else {
          ++it;
        }
      }
    }
    // What was in flight on the connection (a send not yet written, the receive whose payload
    // was being read) is in no list any more: it fails here or never.
    for (auto& request : unsent) finish_locked(request, error, finished);
    if (reading) finish_locked(reading, error, finished);
  }
  run_callbacks(finished);
}

void Transport::finish_locked(const RequestPtr& request, std::exception_ptr error,
                              std::vector<RequestPtr>& finished) {
  if (request->state != Request::State::Pending) return;
  request->state = error ? Request::State::Failed : Request::State::Done;
  request->error = error;
  finished.push_back(request);  // its waiters are woken, and its callback runs, outside the lock
}

// A waiter woken while the lock is still held would go straight back to sleep on the mutex: on
// the path of every small collective, that is one more wake-up.
void Transport::run_callbacks(std::vector<RequestPtr>& finished) {
  if (!finished.empty()) {
    changed_.notify_all();
    if (lane_reader_polls_) wake_lane_reader();
  }
  for (auto& request : finished)
    if (request->on_finish) request->on_finish(*request);
  finished.clear();
}

void Transport::fail_group_locked(const std::string& reason, std::vector<RequestPtr>& finished) {
  if (group_failure_) return;
  group_failure_ = reason;
  changed_.notify_all();
  if (lane_reader_polls_) wake_lane_reader();
  const auto error = std::make_exception_ptr(PeerError(reason));
  for (auto& request : posted_) finish_locked(request, error, finished);
  posted_.clear();
  unexpected_.clear();
}

void Transport::fail_group(const std::string& reason) {
  std::vector<RequestPtr> finished;
  bool tell_peers;
  {
    std::lock_guard lock(mutex_);
    fail_group_locked(reason, finished);
    // The failure is told to every peer once, even one learned from a peer's abort: a rank
    // that fails and then exits must leave its reason ahead of its disconnection on every
    // connection, or a peer that has not yet read the first abort would blame the exit.
    tell_peers = !peers_told_ && !stopping_;
    peers_told_ = true;
  }
  run_callbacks(finished);
  if (!tell_peers) return;
  auto text = std::make_shared<std::string>(*group_failure());
  for (int peer = 0; peer < size_; ++peer) {
    if (!linked(peer) || peer_failure(peer)) continue;
    // Fire and forget: the peer may be the one that is gone.
    auto abort = std::make_shared<Request>();
    abort->is_send = true;
    abort->header.kind = FrameKind::Abort;
    abort->header.source = rank_;
    abort->header.length = text->size();
    abort->peer = peer;
    abort->data = text->data();
    abort->bytes = text->size();
    abort->owner = text;
    queue_send(abort);
  }
}

bool Transport::disconnect(int peer, const std::string& reason) {
  if (!linked(peer) || peer_failure(peer)) return false;
  asio::post(io_, [this, peer, reason] { lose_peer(*connections_[peer], reason); });
  return true;
}

std::optional<std::string> Transport::failure_involving(int peer, Clock::time_point until) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, until, [&] { return group_failure_ || peer_failures_[peer]; });
  // The group's failure came first (a peer's abort frame is read before its disconnection).
  if (group_failure_) return group_failure_;
  if (peer_failures_[peer]) return "rank " + std::to_string(peer) + " " + *peer_failures_[peer];
  return std::nullopt;
}

std::optional<std::string> Transport::group_failure() const {
  std::lock_guard lock(mutex_);
  return group_failure_;
}

std::optional<std::string> Transport::peer_failure(int peer) const {
  std::lock_guard lock(mutex_);
  return peer_failures_[peer];
}

void Transport::retire_collectives_through(uint64_t sequence) {
  std::lock_guard lock(mutex_);
  retired_through_ = sequence;
  any_retired_ = true;
  std::erase_if(unexpected_, [&](const Unexpected& frame) {
    return frame.header.kind == FrameKind::Collective && frame.header.tag <= sequence;
  });
}

void Transport::cancel(const RequestPtr& request) {
  std::lock_guard lock(mutex_);
  std::erase(posted_, request);
}

}  // namespace tn::dist
