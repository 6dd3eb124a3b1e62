#pragma once
// Control messages between writer and target travel over the engine's own
// SEND/RECV, so the demo exercises that path too. Messages are small JSON
// objects with a "type" field.

#include <functional>
#include <string_view>

#include <fabric/engine.hpp>
#include <nlohmann/json.hpp>

#include "mailbox.hpp"

namespace demo {

class ControlChannel {
 public:
  ControlChannel(fabric::TransferEngine& engine, Mailbox& mailbox)
      : engine_(engine), mailbox_(mailbox) {}

  // Posts receive buffers whose messages land in the mailbox. Must run before
  // the peer learns our address, so its first message finds a buffer.
  void listen();
  // Returns once the engine reports the SEND complete; throws on failure.
  void send(const fabric::NetAddr& to, const nlohmann::json& message);
  // The next event, which must be of `type`; a "fail" from the peer, an
  // unexpected type or the wait limit throw.
  nlohmann::json expect(std::string_view type);
  // Runs repeatedly while expect() waits; throwing from it ends the wait.
  void set_watchdog(std::function<void()> watchdog) { watchdog_ = std::move(watchdog); }

 private:
  fabric::TransferEngine& engine_;
  Mailbox& mailbox_;
  std::function<void()> watchdog_;
};

}  // namespace demo
