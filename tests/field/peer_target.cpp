#include <unistd.h>

#include <thread>

#include "fabric_test/child_process.hpp"
#include "field_config.hpp"
#include "messages.hpp"
#include "peer_roles.hpp"
#include "shared_region.hpp"

namespace fabric::field {

int run_target(proc::Channel& ch, const EngineConfig& config) {
  SharedRegion region = SharedRegion::adopt(kRegionFd);
  auto made = TransferEngine::create(config);
  CHILD_REQUIRE(made.ok(), made.status().to_string());
  auto engine = std::move(made).value();
  RegionHeader& header = region.header();
  auto reg = engine->reg_mr(region.data().data(), region.data().size(), Device::host(),
                            Access::remote_write | Access::remote_read);
  CHILD_REQUIRE_OK(reg.status());
  CHILD_REQUIRE_OK(engine->submit_recvs(config.max_message_size, 64,
                                        [&header](std::span<const std::byte> m) {
                                          const auto seq = check_message(m);
                                          if (!seq || *seq >= RegionHeader::kMaxSends) {
                                            header.messages_bad.fetch_add(1);
                                            return;
                                          }
                                          header.seen[*seq / 64].fetch_or(
                                              std::uint64_t{1} << (*seq % 64));
                                          header.messages_ok.fetch_add(1);
                                        }));
  CHILD_REQUIRE(ch.send_desc(reg->desc), ch.last_error());
  // Lives until told to quit (or killed, which is the point of most cases). "quit" carries how
  // many SENDs the test saw complete: those are taken in before the engine stops, so a message
  // reported delivered and then dropped shows as missing rather than as a race with stop().
  auto quit = ch.recv_pod<std::uint64_t>(std::chrono::hours(1));
  CHILD_REQUIRE(quit.has_value(), "waiting for quit: " + ch.last_error());
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (header.messages_ok.load() < *quit && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polls a count, bounded
  }
  engine->stop();
  CHILD_REQUIRE(ch.send_string("bye"), ch.last_error());
  return test::kChildOk;
}

}  // namespace fabric::field
