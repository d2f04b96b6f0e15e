// The transport: one TCP connection to every other rank of the group (in a star, between the
// hub and each spoke only), served by one Asio I/O thread that always keeps reading. Receives
// are matched to posted requests by (kind, source, tag, slot); a frame that arrives before its
// request is posted waits in the unexpected list. Sends are queued per connection and written
// in order.
//
// A full mesh also has a second connection to every peer, its lane, for small collective
// frames. No I/O thread watches the lanes: the thread waiting for a collective's frames reads
// them itself, so a small collective costs each rank one wake-up (the kernel waking that
// thread) instead of two (the I/O thread, then the waiter), which is most of its latency.
//
// Implemented by concept: transport_setup.cpp (rendezvous, handshake, shutdown),
// transport_receive.cpp (reading and matching frames), transport_send.cpp (connections' queues
// and lanes' writes), transport_wait.cpp (waiting, and the lanes' reader) and
// transport_failure.cpp (lost peers, a failed group); transport_internal.h is what they share.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distributed/frame.h"
#include "distributed/process_group.h"
#include "distributed/store.h"

namespace tn::dist {

using Clock = std::chrono::steady_clock;
class PeerMemory;

struct Request {
  enum class State { Pending, Done, Failed };
  bool is_send = false;
  FrameHeader header;  // sends: the header to write; receives: what to match
  int peer = -1;       // receives: -1 matches any source
  void* data = nullptr;
  uint64_t bytes = 0;
  std::shared_ptr<const void> owner;  // keeps `data` alive while the I/O thread may touch it
  uint64_t sent = 0;                  // sends: header and payload bytes already written
  State state = State::Pending;
  std::exception_ptr error;
  int source = -1;  // receives: who it came from
  std::function<void(const Request&)> on_finish;
};
using RequestPtr = std::shared_ptr<Request>;

class Transport {
 public:
  // Rendezvous with options' host, timeout, topology and hub.
  Transport(Store& store, int rank, int size, const ProcessGroupOptions& options);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  RequestPtr post_recv(FrameKind kind, int source, uint64_t tag, uint32_t slot, const Signature& expected,
                       void* data, uint64_t bytes, std::shared_ptr<const void> owner,
                       std::function<void(const Request&)> on_finish = {});
  RequestPtr send(int dest, FrameKind kind, uint64_t tag, uint32_t slot, const Signature& signature,
                  const void* data, uint64_t bytes, std::shared_ptr<const void> owner,
                  std::function<void(const Request&)> on_finish = {});
  // Waits for the request; throws its error, the group's failure, or TimeoutError at deadline
  // (which also fails the group, since the ranks no longer agree on where they are).
  void wait(const Request& request, Clock::time_point deadline, Milliseconds timeout,
            const std::string& operation);
  // Removes a receive that has not started; one already being read is left to land.
  void cancel(const RequestPtr& request);
  // Closes the connection to `peer` as lost with `reason`, on the I/O thread; false if there is
  // none (not linked, or lost already).
  bool disconnect(int peer, const std::string& reason);
  // Marks the group unusable, fails every pending request and tells every live peer why.
  void fail_group(const std::string& reason);
  std::optional<std::string> group_failure() const;
  std::optional<std::string> peer_failure(int peer) const;
  // Waits until `peer` is lost or the group fails, or `until` passes: why (the group's failure
  // first), naming the rank, if so.
  std::optional<std::string> failure_involving(int peer, Clock::time_point until);
  // Collective frames with a sequence number at or below this are stale and dropped.
  void retire_collectives_through(uint64_t sequence);
  // Closes every connection and stops the I/O thread; pending requests fail. Idempotent.
  void shutdown();
  uint16_t port() const { return port_; }
  // Every rank of the group reads every other's memory directly (peer_memory.h), or null.
  const PeerMemory* peer_memory() const;

 private:
  struct Connection;
  struct Lane;
  // Whether this rank has a connection to `peer`, and whether it is the side that dials it
  // (a full mesh dials the lower ranks; a spoke dials the hub); the other side accepts.
  bool linked(int peer) const;
  bool dials(int peer) const;
  void accept_next();
  void read_hello(std::shared_ptr<asio::ip::tcp::socket> socket);
  void install(int peer, std::shared_ptr<asio::ip::tcp::socket> socket);
  void install_lane(int peer, asio::ip::tcp::socket& socket);
  void connect_to(Store& store, int peer, Clock::time_point deadline);
  void read_header(Connection& connection);
  void on_header(Connection& connection);
  // A whole frame read into memory of its own: to its posted receive, or the unexpected list.
  void on_payload(const FrameHeader& header, std::shared_ptr<uint8_t[]> payload);
  void queue_send(const RequestPtr& request);
  void write_next(Connection& connection);
  // Writes a small collective frame on the peer's lane; false if it must take the connection.
  bool send_on_lane(const RequestPtr& request);
  // Waits (holding `lock` on mutex_ on entry and exit) until done() or the deadline: as the
  // lanes' reader if no other thread is, else on changed_. done()'s value at the end.
  template <class Done>
  bool wait_locked(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, Done done);
  // The lanes' reader: one poll over every lane and wake_fd_, then what arrived is read.
  void read_lanes(Clock::time_point deadline);
  void read_lane(int peer);
  // Interrupts the lanes' reader's poll (a request it may wait for finished elsewhere).
  void wake_lane_reader();
  // Fails the peer's receives and sends with `reason`, closing its connection.
  void lose_peer(Connection& connection, const std::string& reason, bool lane_may_hold_frames = false);
  void lose_connection(Connection& connection, const asio::error_code& error);
  bool awaits_lane_locked(const Request& receive) const;
  void close_lane_reading(int peer);
  RequestPtr take_posted_locked(const FrameHeader& header);
  // Why the frame may not complete this receive (other collective, size or dtype), if so.
  std::optional<std::string> mismatch_locked(const Request& request, const FrameHeader& header) const;
  void refuse_locked(const RequestPtr& request, int source, const std::string& mismatch,
                     std::vector<RequestPtr>& finished);
  void deliver_locked(const RequestPtr& request, const FrameHeader& header, const uint8_t* payload,
                      std::vector<RequestPtr>& finished);
  void finish_locked(const RequestPtr& request, std::exception_ptr error, std::vector<RequestPtr>& finished);
  void run_callbacks(std::vector<RequestPtr>& finished);
  void fail_group_locked(const std::string& reason, std::vector<RequestPtr>& finished);

  const int rank_;
  const int size_;
  const Topology topology_;
  const int hub_;
  const Milliseconds timeout_;
  uint64_t session_ = 0;
  uint16_t port_ = 0;
  std::unique_ptr<PeerMemory> memory_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_guard_;
  asio::ip::tcp::acceptor acceptor_;
  std::vector<std::unique_ptr<Connection>> connections_;  // by rank; null for this rank
  std::vector<std::unique_ptr<Lane>> lanes_;              // by rank; null without a lane
  int wake_fd_ = -1;                                      // an eventfd; see wake_lane_reader
  std::thread io_thread_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int connected_ = 0;  // connections and lanes installed
  bool stopping_ = false;
  bool lane_reader_ = false;                     // a waiting thread reads the lanes
  std::atomic<bool> lane_reader_polls_ = false;  // ... and sleeps in poll (set under mutex_)
  int waiters_ = 0;                              // threads in wait_locked
  std::vector<std::optional<std::string>> peer_failures_;
  std::optional<std::string> group_failure_;
  bool peers_told_ = false;  // abort frames have gone out
  std::deque<RequestPtr> posted_;
  struct Unexpected {
    FrameHeader header;
    std::shared_ptr<uint8_t[]> payload;
  };
  std::deque<Unexpected> unexpected_;
  uint64_t retired_through_ = 0;
  bool any_retired_ = false;
};

}  // namespace tn::dist
