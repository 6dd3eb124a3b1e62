#include "control_channel.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <fabric/completion.hpp>

#include "demo_error.hpp"
#include "options.hpp"

namespace demo {
namespace {
// Few messages are ever in flight at once; a small pool is plenty.
constexpr std::uint32_t kReceiveBuffers = 16;
}  // namespace

void ControlChannel::listen() {
  Mailbox& mailbox = mailbox_;
  auto on_recv = [&mailbox](std::span<const std::byte> data) {
    // The span dies when we return, so parse (copy) it here.
    const auto* text = reinterpret_cast<const char*>(data.data());
    nlohmann::json message = nlohmann::json::parse(text, text + data.size(), nullptr, false);
    if (message.is_discarded() || !message.is_object() || !message.contains("type")) {
      message = {{"type", "fail"}, {"error", "received an unparsable control message"}};
    }
    mailbox.push(std::move(message));
  };
  check(engine_.submit_recvs(engine_.config().max_message_size, kReceiveBuffers, on_recv),
        "submit_recvs");
}

void ControlChannel::send(const fabric::NetAddr& to, const nlohmann::json& message) {
  const std::string text = message.dump();
  const std::span<const std::byte> bytes{reinterpret_cast<const std::byte*>(text.data()),
                                         text.size()};
  auto flag = std::make_shared<fabric::CompletionFlag>();
  const auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
  for (;;) {
    const fabric::Status status = engine_.submit_send(to, bytes, flag);
    if (status.code() != fabric::Errc::again) {
      check(status, "submit_send");
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) check(status, "submit_send (still busy)");
    std::this_thread::yield();
  }
  check(flag->wait(kWaitLimit), "send of '" + message.value("type", "?") + "' message");
}

nlohmann::json ControlChannel::expect(std::string_view type) {
  const auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
  std::optional<nlohmann::json> event;
  while (!event && std::chrono::steady_clock::now() < deadline) {
    if (watchdog_) watchdog_();
    event = mailbox_.pop(std::chrono::milliseconds(100));
  }
  if (!event) {
    throw DemoError("no '" + std::string(type) + "' message from the peer within " +
                    std::to_string(kWaitLimit.count()) + " s");
  }
  const std::string got = event->value("type", "");
  if (got == "fail") throw DemoError("peer failed: " + event->value("error", "(no reason)"));
  if (got != type) {
    throw DemoError("expected a '" + std::string(type) + "' message, got '" + got + "'");
  }
  return std::move(*event);
}

}  // namespace demo
