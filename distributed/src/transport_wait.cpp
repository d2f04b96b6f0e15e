// Waiting on the transport: a waiting thread sleeps until its request finishes, or becomes the
// lanes' reader and reads what arrives on them itself (see transport.h for why).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "scratch.h"
#include "transport_internal.h"

namespace tn::dist {

void Transport::wait(const Request& request, Clock::time_point deadline, Milliseconds timeout,
                     const std::string& operation) {
  std::unique_lock lock(mutex_);
  const bool finished = wait_locked(
      lock, deadline, [&] { return request.state != Request::State::Pending || group_failure_.has_value(); });
  if (request.state == Request::State::Failed) {
    try {
      std::rethrow_exception(request.error);
    } catch (const MismatchError& error) {
      throw MismatchError(operation + " failed: " + error.what());
    } catch (const DistError& error) {
      throw PeerError(operation + " failed: " + error.what());
    }
  }
  if (request.state == Request::State::Done) return;
  if (finished) throw PeerError(operation + " failed: " + *group_failure_);
  const std::string peer = request.peer < 0 ? "any rank" : "rank " + std::to_string(request.peer);
  const std::string reason = operation + " timed out after " + std::to_string(timeout.count()) +
                             " ms on rank " + std::to_string(rank_) + " waiting " +
                             (request.is_send ? "to send to " : "for ") + peer;
  lock.unlock();
  fail_group(reason);
  throw TimeoutError(reason);
}

template <class Done>
bool Transport::wait_locked(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, Done done) {
  const bool has_lanes =
      std::any_of(lanes_.begin(), lanes_.end(), [](const auto& lane) { return bool(lane); });
  ++waiters_;
  bool was_reader = false;
  while (!done() && Clock::now() < deadline) {
    if (has_lanes && !lane_reader_ && !stopping_) {
      lane_reader_ = was_reader = true;
      lane_reader_polls_ = true;
      lock.unlock();
      read_lanes(deadline);
      lock.lock();
      lane_reader_ = false;
      continue;
    }
    changed_.wait_until(lock, deadline);
  }
  --waiters_;
  // Another waiter (or shutdown) may be sleeping until the lanes have no reader.
  if (was_reader && (waiters_ > 0 || stopping_)) changed_.notify_all();
  return done();
}

void Transport::wake_lane_reader() {
  const uint64_t one = 1;
  [[maybe_unused]] const auto written = ::write(wake_fd_, &one, sizeof one);
}

void Transport::read_lanes(Clock::time_point deadline) {
  std::vector<pollfd> polled;
  std::vector<int> peers;
  for (int peer = 0; peer < size_; ++peer) {
    if (!lanes_[peer] || lanes_[peer]->read_closed || lanes_[peer]->fd < 0) continue;
    polled.push_back({lanes_[peer]->fd, POLLIN, 0});
    peers.push_back(peer);
  }
  polled.push_back({wake_fd_, POLLIN, 0});
  const auto left = std::max(deadline - Clock::now(), Clock::duration::zero());
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(left);
  const timespec timeout{static_cast<time_t>(seconds.count()),
                         static_cast<long>(std::chrono::nanoseconds(left - seconds).count())};
  const int ready = ::ppoll(polled.data(), polled.size(), &timeout, nullptr);
  lane_reader_polls_ = false;
  if (ready <= 0) return;  // the deadline, or a signal: the caller looks again
  if (polled.back().revents) {
    uint64_t count;
    [[maybe_unused]] const auto drained = ::read(wake_fd_, &count, sizeof count);
  }
  for (size_t i = 0; i < peers.size(); ++i)
    if (polled[i].revents) read_lane(peers[i]);
}

// Reads whatever the lane holds now, frame by frame, without blocking; a frame cut short waits
// in the lane for its rest.
void Transport::read_lane(int peer) {
  Lane& lane = *lanes_[peer];
  for (;;) {
    const bool in_header = lane.header_read < sizeof(FrameHeader);
    uint8_t* into = in_header ? reinterpret_cast<uint8_t*>(&lane.header) + lane.header_read
                              : lane.payload.get() + lane.payload_read;
    const uint64_t wanted =
        in_header ? sizeof(FrameHeader) - lane.header_read : lane.header.length - lane.payload_read;
    if (wanted > 0) {
      const ssize_t got = ::recv(lane.fd, into, wanted, MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      // The peer's end: its connection, read by the I/O thread, says why (an abort comes first).
      if (got <= 0) return close_lane_reading(peer);
      (in_header ? lane.header_read : lane.payload_read) += static_cast<uint64_t>(got);
      if (static_cast<uint64_t>(got) < wanted) continue;
    }
    if (in_header) {
      std::string why = check_header(lane.header, peer, size_);
      if (why.empty() && !belongs_on_lane(lane.header)) why = "a frame that does not belong on its lane";
      if (!why.empty()) {
        close_lane_reading(peer);
        asio::post(io_,
                   [this, peer, why] { lose_peer(*connections_[peer], "sent a malformed frame: " + why); });
        return;
      }
      lane.payload = scratch(lane.header.length);
      lane.payload_read = 0;
      if (lane.header.length > 0) continue;
    }
    lane.header_read = 0;
    on_payload(lane.header, std::move(lane.payload));
  }
}

// Nothing more is read from the lane; if the peer's connection is already lost, the receives
// left waiting for the lane fail now, as they would have with it.
void Transport::close_lane_reading(int peer) {
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    lanes_[peer]->read_closed = true;
    if (peer_failures_[peer]) {
      const auto error =
          std::make_exception_ptr(PeerError("rank " + std::to_string(peer) + " " + *peer_failures_[peer]));
      std::erase_if(posted_, [&](const RequestPtr& request) {
        if (request->peer != peer) return false;
        finish_locked(request, error, finished);
        return true;
      });
    }
  }
  run_callbacks(finished);
}

}  // namespace tn::dist
