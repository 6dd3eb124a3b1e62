#pragma once
// Sender::Impl: the state every sender_*.cpp shares. A prepared request (Entry) has one Transfer
// per decoder that asked for it. Events (messages, write completions, ticks) and public calls
// change them under `mutex` and collect what follows in Actions, which run() carries out once
// the mutex is released: sends, state reports and the writes to submit.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "fabric/kv/sender.hpp"
#include "link.hpp"
#include "outbox.hpp"
#include "peers.hpp"
#include "released_ids.hpp"
#include "request_table.hpp"
#include "write_batch.hpp"

namespace fabric::kv {

struct Sender::Impl : std::enable_shared_from_this<Sender::Impl> {
  // A decoder, known from its HELLO: the layout and regions its requests' writes go to.
  struct Peer : PeerLife {
    KvLayout layout;
    std::vector<MrDesc> regions;
  };
  // One decoder's request for one id.
  struct Transfer {
    std::uint64_t peer = 0;  // the decoder's instance
    msg::Request req;
    std::uint32_t align = 1;
    TokenRange cached_range;
    WriteBatch cached;
    std::uint64_t outstanding = 0;
    bool stopping = false;
    bool cancel_requested = false;
    bool peer_dead = false;
    bool tail_posted = false;
    bool ended = false;
    Status error;
    State end = State::waiting;
  };
  struct Entry {
    std::vector<std::uint32_t> pages;
    std::uint32_t num_tokens = 0;
    std::uint32_t receivers = 1;
    std::optional<LocalSlice> tail;
    std::vector<std::uint32_t> done_tokens;  // per layer
    std::vector<std::pair<std::uint32_t, TokenRange>> chunks;  // in the order they were done
    std::vector<std::unique_ptr<Transfer>> transfers;
    RequestStatus status;
    Clock::time_point deadline;
    bool local_cancel = false;
    bool missing_failed = false;
    std::uint32_t declined = 0;  // decoders that said they will not ask (DECLINE)
  };
  // A decoder's request that came before its prepare().
  struct Early {
    std::uint64_t peer = 0;
    msg::Request req;
    Clock::time_point expires;
  };
  // A write that only completes a packet's immediate: the end of a transfer with no tail.
  struct ImmWrite {
    std::uint32_t imm = 0;
    MrDesc dst;
  };
  using Write = std::variant<PagedWrite, SingleWrite, ImmWrite>;
  struct Submit {
    Transfer* transfer = nullptr;
    std::string id;
    Write write;
  };
  struct Actions : Outbox {
    std::vector<Submit> submits;
  };
  // How a transfer with nothing outstanding ends, and what its decoder is told (nothing when it
  // is gone).
  struct TransferEnd {
    State state = State::done;
    std::optional<msg::Body> reply;
  };

  Impl(TransferEngine& e, SenderConfig c)
      : engine(e),
        config(std::move(c)),
        link(e, config.liveness),
        released(config.released_ids_kept) {}

  TransferEngine& engine;
  SenderConfig config;
  Link link;
  ReleasedIds released;
  mutable std::mutex mutex;
  PeerTable<Peer> peers;
  RequestTable<Entry> entries{"KV sender"};
  std::unordered_map<std::string, std::vector<Early>> early;
  // DECLINEs for requests not prepared yet: (decoder, expiry) per id.
  std::unordered_map<std::string, std::vector<std::pair<std::uint64_t, Clock::time_point>>>
      early_declines;

  // ------------------------------------------------ the state machine, pure (sender_states.cpp)
  // nullopt while the transfer still has work to post (its tail).
  static std::optional<TransferEnd> transfer_end(const std::string& id, const Transfer& t,
                                                 bool local_cancel);
  // nullopt while a decoder may still ask or a transfer still runs.
  static std::optional<RequestStatus> request_end(const std::string& id, const Entry& e);

  // ------------------------------------------------ under mutex
  // sender_states.cpp: applying the transitions.
  void reply(Actions& a, std::uint64_t peer, msg::Body body);
  void stop_transfer(Transfer& t, Status why);
  void check_transfer(Actions& a, const std::string& id, Entry& e, Transfer& t);
  void check_entry(Actions& a, const std::string& id, Entry& e);
  // sender_admit.cpp: a decoder asks for a request, or says it will not.
  Status validate(const Entry& e, const Peer& p, const msg::Request& q, Transfer& t);
  void accept(Actions& a, const std::string& id, Entry& e, std::uint64_t peer, msg::Request q);
  void decline(Actions& a, const std::string& id, Entry& e, std::uint64_t from);
  // sender_writes.cpp: what a computed chunk or the end of the layers posts for a transfer.
  Status queue_chunk(Actions& a, const std::string& id, Entry& e, Transfer& t,
                     std::uint32_t layer, TokenRange range);
  void queue_tail(Actions& a, const std::string& id, Entry& e, Transfer& t);
  // One past the last source token the decoder wants.
  static std::uint32_t wanted_end(const Transfer& t) { return t.req.src_first + t.req.num_tokens; }
  // Every layer has been written up to the decoder's last wanted token: the tail may follow.
  static bool ready_for_tail(const Entry& e, const Transfer& t);

  // ------------------------------------------------ events (sender_events.cpp)
  void on_message(msg::Message&& m);
  void handle(Actions& a, std::uint64_t from, msg::Hello& h);
  void handle(Actions& a, std::uint64_t from, msg::Request& q);
  void handle(Actions& a, std::uint64_t from, msg::Cancel& c);
  void handle(Actions& a, std::uint64_t from, msg::Decline& d);
  template <typename T>
  void handle(Actions&, std::uint64_t, T&) {}  // not for a sender (any message marks the peer heard)
  void on_write_done(Transfer* t, const std::string& id, const Status& st);
  void on_tick(Clock::time_point now);

  // A public call that changes request `id`: change(actions, id, entry) under the mutex, then
  // run() what it decided. A refused change (its Status) runs nothing.
  template <typename Change>
  Status change_request(std::string_view id, Change&& change) {
    Actions a;
    {
      std::lock_guard lock(mutex);
      auto found = entries.get(id);
      if (!found.ok()) return found.status();
      if (auto st = change(a, std::string(id), **found); !st.ok()) return st;
    }
    run(std::move(a));
    return Status::success();
  }

  // ------------------------------------------------ outside the mutex (sender_submit.cpp)
  Status submit(const Submit& s, OnDone done);
  void run(Actions a);
};

}  // namespace fabric::kv
