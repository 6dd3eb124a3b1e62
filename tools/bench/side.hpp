#pragma once
// What each process holds: one engine and one raw endpoint, with the same
// buffer registered on both, so engine and raw figures come from one run
// over the same memory.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fabric/engine.hpp>

#include "raw/endpoint.hpp"

namespace bench {

// Immediate values: data rounds, pings (to the target), pongs (back).
inline constexpr std::uint32_t kDataImm = 7;
inline constexpr std::uint32_t kPing = 8;
inline constexpr std::uint32_t kPong = 9;

struct SideConfig {
  std::string provider = "shm";  // the engine's name for it ("shm", "tcp", ...)
  std::string bind_address = "127.0.0.1";  // IP providers (engine and raw loop) bind here
  bool verbs = false;            // engine on the verbs backend, no raw loop
  bool record_post_timings = false;
  std::size_t buffer_bytes = 64u << 20;
  bool busy_poll = false;
  bool post_on_submit = false;
  bool metrics = true;  // EngineConfig::metrics
  // --metrics-ab: a second engine beside the first, EngineConfig::metrics off, on the same
  // buffer (Side::unmetered), so write rows time both in one run.
  bool metrics_ab = false;
  // --metrics-aa: the same second engine with metrics on: the two differ in nothing, so their
  // ratio is what this machine's noise alone gives --metrics-ab.
  bool metrics_aa = false;
  // >= 0: once the engine's threads exist, pin this (the calling) thread
  // here. The raw loop runs on it; the engine's threads keep floating.
  int pin_cpu = -1;
  // EngineConfig::nics; non-empty: no raw endpoint (it binds loopback only).
  std::vector<std::string> nics;
  // EngineConfig::request_timeout in ms; 0: the engine's default (60 s with nics).
  std::uint32_t request_timeout_ms = 0;
  std::uint32_t verbs_ack_timeout = 0;  // VerbsConfig::ack_timeout; 0: the default
  std::optional<std::uint32_t> verbs_max_inline;  // VerbsConfig::max_inline_data; unset: default
  // > 1: EngineConfig::groups of that many groups, `nics` split evenly among them, and the
  // buffer registered on every group; single writes take the groups in turn.
  std::uint32_t groups = 1;
};

// Ends the named provider the way the engine would (tcp → tcp;ofi_rxm) and
// whether the engine turns on delivery-complete for it by default.
std::string libfabric_provider(const std::string& name);
bool engine_uses_delivery_complete(const std::string& name);

struct PageBuffer {
  explicit PageBuffer(std::size_t len);
  ~PageBuffer();
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  std::byte* data = nullptr;
  std::size_t size = 0;
};

// An engine and the side's buffer as registered on it (and on its groups 1, 2, ...): what a
// write round submits from.
struct WriteEngine {
  fabric::TransferEngine* engine = nullptr;
  fabric::MrHandle buf;
  const std::vector<fabric::Registered>* group_bufs = nullptr;
};

struct Side {
  explicit Side(const SideConfig& cfg);
  ~Side();

  PageBuffer buf;       // source on the initiator, destination on the target
  PageBuffer imm_buf;   // landing zone for immediate-only writes
  std::unique_ptr<fabric::TransferEngine> engine;
  fabric::Registered eng_buf, eng_imm;
  // The same buffer registered on groups 1, 2, ... (SideConfig::groups).
  std::vector<fabric::Registered> group_bufs;
  std::shared_ptr<fabric::ImmCounter> data_counter, ping_counter, pong_counter;
  std::optional<raw::Endpoint> raw;  // libfabric backend only
  raw::Region raw_buf, raw_imm;
  // --metrics-ab: the same engine configuration with metrics off (on with --metrics-aa), `buf`
  // registered on it too. The target cannot tell the two apart: both write into the same
  // registration there.
  struct Unmetered {
    std::unique_ptr<fabric::TransferEngine> engine;
    fabric::Registered buf;
    std::vector<fabric::Registered> group_bufs;
  };
  std::optional<Unmetered> unmetered;

  [[nodiscard]] WriteEngine metered() const { return {engine.get(), eng_buf.handle, &group_bufs}; }
  [[nodiscard]] WriteEngine unmetered_engine() const {
    return {unmetered->engine.get(), unmetered->buf.handle, &unmetered->group_bufs};
  }

  // One line that tells the peer how to reach both halves of this side.
  std::string hello() const;
};

// Takes n arrivals from `c`, spinning then yielding. ImmCounter's own
// wait_and_consume sleeps 20 us steps once idle, which would be measured as
// engine latency here; this waits the way the raw loop does. With `progress`, every spin runs
// a pass of that engine's loop on this thread (TransferEngine::progress) and never yields,
// as the raw loop polls its own CQ.
fabric::Status spin_consume(fabric::ImmCounter& c, std::uint64_t n,
                            std::chrono::nanoseconds timeout,
                            fabric::TransferEngine* progress = nullptr);

// The peer as learned from its hello line.
struct Peer {
  fabric::MrDesc eng_buf, eng_imm;
  std::vector<fabric::MrDesc> group_bufs;  // its groups 1, 2, ...
  std::vector<std::uint8_t> raw_name;
  raw::RemoteRegion raw_buf, raw_imm;
  fi_addr_t raw_addr = FI_ADDR_UNSPEC;  // after insertion into our AV

  static Peer parse(const std::string& hello_line);
};

}  // namespace bench
