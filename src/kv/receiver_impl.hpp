#pragma once
// Receiver::Impl: the state every receiver_*.cpp shares. A request (Entry) has one Leg per
// prefill rank that writes part of it; it ends once every leg is quiet (no write of it can land
// any more). Events and public calls change them under `mutex`, wake waiters on `changed`, and
// send and report what follows (Outbox) once the mutex is released.

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fabric/kv/receiver.hpp"
#include "link.hpp"
#include "outbox.hpp"
#include "peers.hpp"
#include "request_table.hpp"

namespace fabric::kv {

struct Receiver::Impl : std::enable_shared_from_this<Receiver::Impl> {
  // A prefill rank, with this receiver's regions registered for it alone; joined once it
  // answered HELLO.
  struct Source : PeerLife {
    KvLayout layout;
    std::vector<Registered> regions;
    Status hello_error;
    bool fencing = false;
    // fence() has finished: its keys are revoked and its requests failed, so connect() may
    // start a new epoch with it (a starved process that speaks again is not dead for good).
    bool fenced = false;
  };
  struct Leg {
    std::uint32_t source = 0;
    HeadRange heads;
    std::uint64_t expected = 0;
    bool accepted = false;
    bool quiet = false;  // no write of this leg can land any more
  };
  struct Entry {
    std::vector<std::uint32_t> pages;
    std::uint32_t num_tokens = 0;
    std::uint32_t imm = 0;
    std::uint64_t total = 0;
    std::vector<Leg> legs;
    RequestStatus status;
    bool stopping = false;
    bool user_cancel = false;
    bool count_reached = false;
    Status error;
    Clock::time_point stop_deadline;
    std::optional<Clock::time_point> quarantine_until;
  };

  Impl(TransferEngine& e, ReceiverConfig c, ImmReservation block)
      : engine(e), config(std::move(c)), link(e, config.liveness), imms(std::move(block)) {}

  TransferEngine& engine;
  ReceiverConfig config;
  Link link;
  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  PeerTable<Source> sources;
  RequestTable<Entry> entries{"KV receiver"};
  // Values of `imms` whose expectation is still pending on the engine: a request in flight, or
  // a released one whose writes never all landed (mapped to "", never reused: its expectation
  // would take the next request's arrivals).
  std::unordered_map<std::uint32_t, std::string> by_imm;
  // This receiver's own immediates (kReceiverImms, reserved on the engine, released with it): one
  // per request, carried to the prefill ranks in msg::Request::imm, so they need no range.
  ImmReservation imms;
  std::uint32_t next_imm = 0;  // index into imms, cycling

  // ------------------------------------------------ the state machine (receiver_states.cpp)
  // How a stopping request ends once every leg is quiet and its quarantine is over; nullopt
  // before, or when it is not stopping (it ends done, by its count).
  static std::optional<RequestStatus> quiet_end(const Entry& e, Clock::time_point now);
  void finish_if_quiet(Outbox& a, const std::string& id, Entry& e, Clock::time_point now);
  // Cancels every leg still writing; the request ends failed with `why` (or cancelled, for the
  // user's cancel) once they are quiet.
  void begin_stop(Outbox& a, const std::string& id, Entry& e, Status why, bool user);
  // The request `id` and its leg on `source`, or null.
  Entry* find_leg(const std::string& id, std::uint32_t source, Leg*& leg);

  // ------------------------------------------------ events (receiver_events.cpp)
  void on_message(msg::Message&& m);
  void handle(Outbox& a, std::uint32_t s, msg::HelloAck& h);
  void handle(Outbox& a, std::uint32_t s, msg::Accept& m);
  void handle(Outbox& a, std::uint32_t s, msg::Reject& m);
  void handle(Outbox& a, std::uint32_t s, msg::SenderDone& m);
  void handle(Outbox& a, std::uint32_t s, msg::CancelAck& m);
  template <typename T>
  void handle(Outbox&, std::uint32_t, T&) {}  // not for a receiver (heartbeats only mark the rank)
  // Every immediate of a request's plan arrived.
  void on_count(std::uint32_t imm);
  void on_tick(Clock::time_point now);

  // ------------------------------------------------ sources
  // receiver_fence.cpp: revokes a source's keys and fails its requests.
  void fence(std::uint32_t s, const std::string& why);
  // receiver_connect.cpp: a connect() to a rank whose handshake another connect() began.
  Result<std::uint32_t> join_connect(std::uint32_t index, const NetAddr& sender,
                                     std::chrono::milliseconds timeout);
  // receiver_request.cpp: a source the public calls may name: joined and alive.
  [[nodiscard]] Status check_source(std::uint32_t s) const;
  // receiver_request.cpp: the next value of the block no pending expectation holds.
  Result<std::uint32_t> take_imm();

  void deliver(Outbox& a) { a.deliver(link, config.on_state); }
};

}  // namespace fabric::kv
