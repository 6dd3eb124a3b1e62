#pragma once
// The KV protocol's messages (SEND/RECV), version 2; docs/kv.md#messages has the tables.
// Every message starts with magic "FKV", the version, the type and the sender's engine
// instance id (RECV does not say who sent a message).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "fabric/kv/layout.hpp"
#include "fabric/kv/plan.hpp"
#include "fabric/memory.hpp"
#include "fabric/net_addr.hpp"
#include "fabric/status.hpp"

namespace fabric::kv::msg {

// 2: REQUEST carries src_first (a decoder that holds a prefix asks for the rest only); DECLINE.
inline constexpr std::uint8_t kVersion = 2;
inline constexpr std::size_t kMaxIdBytes = 256;
inline constexpr std::size_t kMaxTextBytes = 1024;

// Receiver -> sender on connect: who it is, its layout and its regions.
struct Hello {
  NetAddr from;
  KvLayout layout;
  std::vector<MrDesc> regions;
};
// Sender -> receiver: accepted, with the sender's layout (so both compute the plan).
struct HelloAck {
  NetAddr from;
  KvLayout layout;
};
// Receiver -> sender: move these heads of these tokens into these pages.
struct Request {
  std::string id;
  std::uint32_t imm = 0;
  std::uint64_t fingerprint = 0;
  std::uint32_t num_tokens = 0;
  // The first source token wanted: the decoder's token t is the prefill's token src_first + t
  // (the decoder holds the tokens before it already). A multiple of chunk_alignment.
  std::uint32_t src_first = 0;
  HeadRange heads;
  std::uint64_t expected_imms = 0;  // what this sender's writes must produce
  bool writes_tail = false;
  MrDesc tail;                      // when writes_tail: where the tail goes
  std::uint64_t tail_offset = 0;
  std::uint64_t tail_bytes = 0;
  std::vector<std::uint32_t> pages;  // the receiver's pages, token t in pages[t / tokens_per_page]
};
// Sender -> receiver: the request was accepted (nothing written yet), or rejected (nothing will
// be written), or the sender finished (every posted write completed; ok or the first error).
struct Accept {
  std::string id;
};
struct Reject {
  std::string id;
  Status status;
};
struct SenderDone {
  std::string id;
  Status status;
};
// Receiver -> sender: stop; sender -> receiver: stopped, every write it posted has completed.
struct Cancel {
  std::string id;
};
struct CancelAck {
  std::string id;
};
// Receiver -> sender: this decoder will not ask for the request (it holds the KV already); the
// sender stops waiting for it, as if its transfer had completed with nothing to write.
struct Decline {
  std::string id;
};
// Not sent any more (the engine's watch_peer pings peers for every workload); an older peer's
// is decoded and, as any message, only marks its sender heard.
struct Heartbeat {};

using Body = std::variant<Hello, HelloAck, Request, Accept, Reject, SenderDone, Cancel, CancelAck,
                          Heartbeat, Decline>;

struct Message {
  std::uint64_t from_instance = 0;
  Body body;
};

[[nodiscard]] std::vector<std::byte> encode(std::uint64_t from_instance, const Body& body);
// Errc::malformed naming the field, never a crash.
[[nodiscard]] Result<Message> decode(std::span<const std::byte> bytes);

}  // namespace fabric::kv::msg
