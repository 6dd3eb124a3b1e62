#pragma once
// What a Sender or Receiver decided while holding its mutex, done once the mutex is released:
// the messages to send and the state changes to report. Sending or calling the user's callback
// under the mutex would let a slow peer or a slow callback hold up every other event.

#include <string>
#include <utility>
#include <vector>

#include "fabric/kv/state.hpp"
#include "fabric/net_addr.hpp"
#include "link.hpp"
#include "messages.hpp"

namespace fabric::kv {

struct Outbox {
  std::vector<std::pair<NetAddr, msg::Body>> sends;
  std::vector<std::pair<std::string, RequestStatus>> notes;

  void send(const NetAddr& to, msg::Body body) { sends.emplace_back(to, std::move(body)); }
  // Moves a request to `next` and queues the report of it.
  void note(const std::string& id, RequestStatus& status, RequestStatus next) {
    status = next;
    notes.emplace_back(id, std::move(next));
  }
  // Outside the mutex. A failed send is logged only: liveness finds a peer that is gone.
  void deliver(Link& link, const StateCallback& on_state);
};

}  // namespace fabric::kv
