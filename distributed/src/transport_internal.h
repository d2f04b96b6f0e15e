// What the transport's source files share (private to transport*.cpp): the state of one
// connection and of one lane, and which frames a lane carries.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>

#include "transport.h"

namespace tn::dist {

// Asio's default completion condition moves at most 64 KiB per system call, which costs
// a poll round trip per 64 KiB on each side of a large frame; this one lets every read or
// write take as much as the socket buffer holds.
inline size_t as_much_as_possible(const asio::error_code& error, size_t) {
  return error ? 0 : size_t{1} << 30;
}

// The largest frame a lane carries: a small collective's whole buffer (the one-step algorithms'
// default limit) or a large one's control values.
inline constexpr uint64_t kLaneMaxBytes = 64 * 1024;

// Lanes are read only by a thread waiting on the transport; a deadline reduce's root collects
// its frames through callbacks instead, so its frames stay on the connections.
inline bool belongs_on_lane(const FrameHeader& header) {
  return header.kind == FrameKind::Collective && header.length <= kLaneMaxBytes &&
         header.signature.collective != Collective::DeadlineReduce;
}
inline bool lane_may_complete(const Request& receive) {
  return receive.header.kind == FrameKind::Collective && receive.bytes <= kLaneMaxBytes &&
         receive.header.signature.collective != Collective::DeadlineReduce;
}

struct Transport::Connection {
  int peer;
  std::shared_ptr<asio::ip::tcp::socket> socket;
  FrameHeader incoming;  // read only by the I/O thread
  // Sends come from any thread; these fields are shared with the I/O thread.
  std::mutex send_mutex;
  std::deque<RequestPtr> send_queue;
  bool writing = false;  // the I/O thread owns the write side until the queue drains
  bool lost = false;
  // The receive whose payload is being read: in no list meanwhile, so a lost connection or a
  // shutdown fails it from here. I/O thread only (and shutdown, once that thread has stopped).
  RequestPtr reading;
};

struct Transport::Lane {
  int fd = -1;  // closed only by shutdown, once no thread reads or writes it
  // Writers: a frame is written whole before the next one starts.
  std::mutex send_mutex;
  bool send_broken = false;  // frames go on the connection instead
  // The lanes' reader's (one thread at a time): the frame being read.
  FrameHeader header;
  uint64_t header_read = 0;
  std::shared_ptr<uint8_t[]> payload;
  uint64_t payload_read = 0;
  // End of stream or error, or the peer's connection was dropped for misbehaving. Set under
  // mutex_; until then a lost peer's receives that the lane may still complete stay posted.
  std::atomic<bool> read_closed = false;
};

}  // namespace tn::dist
