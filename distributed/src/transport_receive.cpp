// The transport's receive side: the I/O thread's reading of each connection's frames, and
// matching every frame to its posted receive (or keeping it as unexpected until one is posted).
#include <algorithm>
#include <cstring>

#include "core/scalar_type.h"
#include "scratch.h"
#include "transport_internal.h"

namespace tn::dist {

namespace {

// An abort frame's reason is text; longer than this is a malformed frame, not a reason.
constexpr uint64_t kMaxAbortReasonBytes = 64 * 1024;

}  // namespace

void Transport::read_header(Connection& connection) {
  asio::async_read(*connection.socket, asio::buffer(&connection.incoming, sizeof(FrameHeader)),
                   [this, &connection](const asio::error_code& error, size_t) {
                     if (error) return lose_connection(connection, error);
                     const std::string why = check_header(connection.incoming, connection.peer, size_);
                     if (!why.empty()) return lose_peer(connection, "sent a malformed frame: " + why);
                     on_header(connection);
                   });
}

void Transport::on_header(Connection& connection) {
  const FrameHeader header = connection.incoming;
  if (header.kind == FrameKind::Hello)
    return lose_peer(connection, "sent a second hello on an established connection");
  if (header.kind == FrameKind::Abort) {
    if (header.length > kMaxAbortReasonBytes)
      return lose_peer(connection, "sent an abort frame of " + std::to_string(header.length) + " bytes");
    auto reason = std::make_shared<std::string>(header.length, '\0');
    asio::async_read(*connection.socket, asio::buffer(reason->data(), reason->size()),
                     [this, &connection, reason](const asio::error_code& error, size_t) {
                       if (error) return lose_connection(connection, error);
                       std::vector<RequestPtr> finished;
                       {
                         std::lock_guard lock(mutex_);
                         fail_group_locked("rank " + std::to_string(connection.peer) + " failed: " + *reason,
                                           finished);
                       }
                       run_callbacks(finished);
                       read_header(connection);
                     });
    return;
  }
  RequestPtr request;
  std::optional<std::string> mismatch;
  {
    std::lock_guard lock(mutex_);
    request = take_posted_locked(header);
    if (request) mismatch = mismatch_locked(*request, header);
  }
  if (request && !mismatch) {
    request->source = header.source;
    connection.reading = request;
    asio::async_read(*connection.socket, asio::buffer(request->data, request->bytes), as_much_as_possible,
                     [this, &connection, request](const asio::error_code& error, size_t) {
                       if (error) return lose_connection(connection, error);
                       connection.reading = nullptr;
                       std::vector<RequestPtr> finished;
                       {
                         std::lock_guard lock(mutex_);
                         finish_locked(request, nullptr, finished);
                       }
                       run_callbacks(finished);
                       read_header(connection);
                     });
    return;
  }
  if (request) {
    // The payload is still read (and dropped) so the connection stays in step.
    std::vector<RequestPtr> finished;
    {
      std::lock_guard lock(mutex_);
      refuse_locked(request, header.source, *mismatch, finished);
    }
    run_callbacks(finished);
  }
  // Pooled and not zeroed: an early 256 MiB frame would otherwise be cleared, then overwritten.
  auto payload = scratch(header.length);
  asio::async_read(
      *connection.socket, asio::buffer(payload.get(), header.length), as_much_as_possible,
      [this, &connection, header, payload, dropped = bool(request)](const asio::error_code& error, size_t) {
        if (error) return lose_connection(connection, error);
        if (!dropped) on_payload(header, payload);
        read_header(connection);
      });
}

void Transport::on_payload(const FrameHeader& header, std::shared_ptr<uint8_t[]> payload) {
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    if (header.kind == FrameKind::Collective && any_retired_ && header.tag <= retired_through_) return;
    RequestPtr request = take_posted_locked(header);
    if (!request) {
      unexpected_.push_back({header, std::move(payload)});
      return;
    }
    deliver_locked(request, header, payload.get(), finished);
  }
  run_callbacks(finished);
}

namespace {

bool matches(const Request& request, const FrameHeader& header) {
  return request.header.kind == header.kind && request.header.tag == header.tag &&
         request.header.slot == header.slot && (request.peer < 0 || request.peer == header.source);
}

// Ranks in different collectives may use different slots for the same sequence number, so a
// collective frame whose signature disagrees with any receive posted for that sequence number
// and source is taken by that receive, to be refused as a mismatch rather than left waiting.
bool conflicts(const Request& request, const FrameHeader& header) {
  return header.kind == FrameKind::Collective && request.header.kind == FrameKind::Collective &&
         request.header.tag == header.tag && (request.peer < 0 || request.peer == header.source) &&
         !(request.header.signature == header.signature);
}

}  // namespace

RequestPtr Transport::take_posted_locked(const FrameHeader& header) {
  auto found = std::find_if(posted_.begin(), posted_.end(),
                            [&](const RequestPtr& request) { return matches(*request, header); });
  if (found == posted_.end())
    found = std::find_if(posted_.begin(), posted_.end(),
                         [&](const RequestPtr& request) { return conflicts(*request, header); });
  if (found == posted_.end()) return nullptr;
  RequestPtr request = *found;
  posted_.erase(found);
  return request;
}

std::optional<std::string> Transport::mismatch_locked(const Request& request,
                                                      const FrameHeader& header) const {
  const Signature& expected = request.header.signature;
  const Signature& got = header.signature;
  const std::string from = "rank " + std::to_string(header.source);
  if (header.kind == FrameKind::Collective && !(expected == got))
    return std::string("mismatched collectives: " + from + " called " + describe(got) + " as operation #" +
                       std::to_string(header.tag) + " of the group, rank " + std::to_string(rank_) +
                       " called " + describe(expected));
  if (header.kind == FrameKind::Collective && header.length != request.bytes)
    return std::string("mismatched sizes in " + describe(expected) + ", operation #" +
                       std::to_string(header.tag) + " of the group: " + from + " sent " +
                       std::to_string(header.length) + " bytes where rank " + std::to_string(rank_) +
                       " expected " + std::to_string(request.bytes));
  if (header.length != request.bytes || expected.dtype != got.dtype)
    return std::string("mismatched point-to-point transfer with tag " + std::to_string(header.tag) + ": " +
                       from + " sent " + std::to_string(got.count) + " elements of " +
                       scalar_type_name(static_cast<ScalarType>(got.dtype)) + " (" +
                       std::to_string(header.length) + " bytes), rank " + std::to_string(rank_) +
                       " expected " + std::to_string(expected.count) + " elements of " +
                       scalar_type_name(static_cast<ScalarType>(expected.dtype)) + " (" +
                       std::to_string(request.bytes) + " bytes)");
  return std::nullopt;
}

// A receive that meets a frame it must not take fails naming both sides, and so does the
// group: the ranks no longer agree on what is being sent. Except at a star's hub, whose spokes
// share nothing but the hub: there the spoke that sent it (a misbehaving federated device, say)
// loses its connection, as a dead spoke would, and the others carry on.
void Transport::refuse_locked(const RequestPtr& request, int source, const std::string& mismatch,
                              std::vector<RequestPtr>& finished) {
  finish_locked(request, std::make_exception_ptr(MismatchError(mismatch)), finished);
  if (topology_ == Topology::Star && rank_ == hub_) {
    // On the I/O thread, which owns the connection's socket; the refused receive's callback
    // runs first, so its owner learns of the mismatch before the loss.
    asio::post(io_, [this, source, reason = "sent a mismatched frame: " + mismatch] {
      lose_peer(*connections_[source], reason);
    });
    return;
  }
  fail_group_locked(mismatch, finished);
}

// Completes a receive from a frame that was read into a buffer of its own.
void Transport::deliver_locked(const RequestPtr& request, const FrameHeader& header, const uint8_t* payload,
                               std::vector<RequestPtr>& finished) {
  if (auto mismatch = mismatch_locked(*request, header))
    return refuse_locked(request, header.source, *mismatch, finished);
  request->source = header.source;
  if (header.length > 0) std::memcpy(request->data, payload, header.length);
  finish_locked(request, nullptr, finished);
}

RequestPtr Transport::post_recv(FrameKind kind, int source, uint64_t tag, uint32_t slot,
                                const Signature& expected, void* data, uint64_t bytes,
                                std::shared_ptr<const void> owner,
                                std::function<void(const Request&)> on_finish) {
  auto request = std::make_shared<Request>();
  request->header.kind = kind;
  request->header.tag = tag;
  request->header.slot = slot;
  request->header.signature = expected;
  request->peer = source;
  request->data = data;
  request->bytes = bytes;
  request->owner = std::move(owner);
  request->on_finish = std::move(on_finish);
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    if (group_failure_) {
      finish_locked(request, std::make_exception_ptr(PeerError(*group_failure_)), finished);
    } else {
      auto found = std::find_if(unexpected_.begin(), unexpected_.end(),
                                [&](const Unexpected& frame) { return matches(*request, frame.header); });
      if (found == unexpected_.end())
        found = std::find_if(unexpected_.begin(), unexpected_.end(),
                             [&](const Unexpected& frame) { return conflicts(*request, frame.header); });
      if (found != unexpected_.end()) {
        Unexpected frame = std::move(*found);
        unexpected_.erase(found);
        deliver_locked(request, frame.header, frame.payload.get(), finished);
      } else if (source >= 0 && peer_failures_[source] && !awaits_lane_locked(*request)) {
        finish_locked(request,
                      std::make_exception_ptr(
                          PeerError("rank " + std::to_string(source) + " " + *peer_failures_[source])),
                      finished);
      } else {
        posted_.push_back(request);
      }
    }
  }
  run_callbacks(finished);
  return request;
}

}  // namespace tn::dist
