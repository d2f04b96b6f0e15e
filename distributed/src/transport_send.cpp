// The transport's send side: frames queued per connection and written in order (first by the
// calling thread, the rest by the I/O thread), and small collective frames written on a lane.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "transport_internal.h"

namespace tn::dist {

RequestPtr Transport::send(int dest, FrameKind kind, uint64_t tag, uint32_t slot, const Signature& signature,
                           const void* data, uint64_t bytes, std::shared_ptr<const void> owner,
                           std::function<void(const Request&)> on_finish) {
  auto request = std::make_shared<Request>();
  request->is_send = true;
  request->header.kind = kind;
  request->header.source = rank_;
  request->header.tag = tag;
  request->header.slot = slot;
  request->header.signature = signature;
  request->header.length = bytes;
  request->peer = dest;
  request->data = const_cast<void*>(data);
  request->bytes = bytes;
  request->owner = std::move(owner);
  request->on_finish = std::move(on_finish);
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    std::optional<std::string> refusal;
    if (kind != FrameKind::Abort && group_failure_) refusal = *group_failure_;
    if (peer_failures_[dest]) refusal = "rank " + std::to_string(dest) + " " + *peer_failures_[dest];
    if (refusal) finish_locked(request, std::make_exception_ptr(PeerError(*refusal)), finished);
  }
  if (!finished.empty()) {
    run_callbacks(finished);
    return request;
  }
  if (lanes_[dest] && belongs_on_lane(request->header) && send_on_lane(request)) return request;
  queue_send(request);
  return request;
}

namespace {

// One non-blocking sendmsg of what is left of a frame; 0 when the socket takes nothing now.
uint64_t write_some_now(int fd, const FrameHeader& header, const void* data, uint64_t bytes, uint64_t sent) {
  iovec parts[2];
  int count = 0;
  if (sent < sizeof(FrameHeader))
    parts[count++] = {const_cast<char*>(reinterpret_cast<const char*>(&header)) + sent,
                      sizeof(FrameHeader) - sent};
  const uint64_t payload_sent = sent > sizeof(FrameHeader) ? sent - sizeof(FrameHeader) : 0;
  if (bytes > payload_sent)
    parts[count++] = {static_cast<char*>(const_cast<void*>(data)) + payload_sent, bytes - payload_sent};
  msghdr message{};
  message.msg_iov = parts;
  message.msg_iovlen = static_cast<size_t>(count);
  const ssize_t written = ::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
  return written > 0 ? static_cast<uint64_t>(written) : 0;
}

}  // namespace

// A frame goes straight out from the calling thread when nothing is queued ahead of it on
// that connection; whatever the socket does not take at once is left to the I/O thread.
// Small frames so skip a thread hand-off, and large ones get their first socket-buffer's
// worth copied by the caller while the I/O thread is busy receiving.
void Transport::queue_send(const RequestPtr& request) {
  Connection& connection = *connections_[request->peer];
  std::unique_lock lock(connection.send_mutex);
  if (connection.lost) {
    lock.unlock();
    std::vector<RequestPtr> failed;
    {
      std::lock_guard state_lock(mutex_);
      finish_locked(request,
                    std::make_exception_ptr(PeerError("rank " + std::to_string(connection.peer) + " " +
                                                      peer_failures_[connection.peer].value_or("is gone"))),
                    failed);
    }
    run_callbacks(failed);
    return;
  }
  if (!connection.writing && connection.send_queue.empty()) {
    request->sent =
        write_some_now(connection.socket->native_handle(), request->header, request->data, request->bytes, 0);
    if (request->sent == sizeof(FrameHeader) + request->bytes) {
      lock.unlock();
      std::vector<RequestPtr> finished;
      {
        std::lock_guard state_lock(mutex_);
        finish_locked(request, nullptr, finished);
      }
      run_callbacks(finished);
      return;
    }
  }
  connection.send_queue.push_back(request);
  if (!connection.writing) {
    connection.writing = true;
    asio::post(io_, [this, &connection] { write_next(connection); });
  }
}

void Transport::write_next(Connection& connection) {
  RequestPtr request;
  {
    std::lock_guard lock(connection.send_mutex);
    if (connection.lost || connection.send_queue.empty()) {
      connection.writing = false;
      return;
    }
    request = connection.send_queue.front();
  }
  const uint64_t sent = request->sent;
  std::array<asio::const_buffer, 2> buffers;
  if (sent < sizeof(FrameHeader)) {
    buffers = {
        asio::buffer(reinterpret_cast<const char*>(&request->header) + sent, sizeof(FrameHeader) - sent),
        asio::buffer(request->data, request->bytes)};
  } else {
    const uint64_t payload_sent = sent - sizeof(FrameHeader);
    buffers = {asio::const_buffer(), asio::buffer(static_cast<const char*>(request->data) + payload_sent,
                                                  request->bytes - payload_sent)};
  }
  asio::async_write(*connection.socket, buffers, as_much_as_possible,
                    [this, &connection, request](const asio::error_code& error, size_t) {
                      if (error) return lose_connection(connection, error);
                      {
                        std::lock_guard lock(connection.send_mutex);
                        if (!connection.send_queue.empty() && connection.send_queue.front() == request)
                          connection.send_queue.pop_front();
                      }
                      std::vector<RequestPtr> finished;
                      {
                        std::lock_guard lock(mutex_);
                        finish_locked(request, nullptr, finished);
                      }
                      run_callbacks(finished);
                      write_next(connection);
                    });
}

// Written by the calling thread (a collective's runner, never the I/O thread), waiting while
// the lane is full: the peer reads it as soon as it waits for this collective or a later one.
// A lane that fails before the frame's first byte leaves it, and every later frame, to the
// connection, which reports the peer's fate.
bool Transport::send_on_lane(const RequestPtr& request) {
  Lane& lane = *lanes_[request->peer];
  std::unique_lock lock(lane.send_mutex);
  if (lane.fd < 0 || lane.send_broken) return false;
  const uint64_t total = sizeof(FrameHeader) + request->bytes;
  const auto until = Clock::now() + timeout_;
  uint64_t sent = 0;
  std::optional<std::string> failure;
  for (;;) {
    const uint64_t more = write_some_now(lane.fd, request->header, request->data, request->bytes, sent);
    sent += more;
    if (sent == total) break;
    if (more == 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      if (sent == 0) {
        lane.send_broken = true;
        return false;
      }
      failure = "rank " + std::to_string(request->peer) + " disconnected (" + std::strerror(errno) + ")";
      break;
    }
    if ((failure = group_failure())) break;
    if (Clock::now() >= until) {
      failure = "rank " + std::to_string(request->peer) + " did not take a frame within " +
                std::to_string(timeout_.count()) + " ms";
      break;
    }
    pollfd writable{lane.fd, POLLOUT, 0};
    ::poll(&writable, 1, 10);
  }
  if (failure && sent > 0) lane.send_broken = true;  // its stream is cut inside a frame
  lock.unlock();
  std::vector<RequestPtr> finished;
  {
    std::lock_guard state_lock(mutex_);
    const auto& lost = peer_failures_[request->peer];
    if (failure && lost) failure = "rank " + std::to_string(request->peer) + " " + *lost;
    finish_locked(request, failure ? std::make_exception_ptr(PeerError(*failure)) : nullptr, finished);
  }
  run_callbacks(finished);
  return true;
}

}  // namespace tn::dist
