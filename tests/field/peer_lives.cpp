#include "fabric_test/child_process.hpp"
#include "field_config.hpp"
#include "peer_roles.hpp"
#include "shared_region.hpp"

namespace fabric::field {

int run_lives(proc::Channel& ch, const EngineConfig& config) {
  SharedRegion region = SharedRegion::adopt(kRegionFd);
  for (;;) {
    auto made = TransferEngine::create(config);
    CHILD_REQUIRE(made.ok(), made.status().to_string());
    auto engine = std::move(made).value();
    auto reg = engine->reg_mr(region.data().data(), region.data().size(), Device::host(),
                              Access::remote_write);
    CHILD_REQUIRE_OK(reg.status());
    CHILD_REQUIRE(ch.send_desc(reg->desc), ch.last_error());
    auto command = ch.recv_string(kWait + kWait);
    CHILD_REQUIRE(command.has_value(), "waiting for next or quit: " + ch.last_error());
    // The life ends with its engine: its endpoint closes (shm unlinks its region file).
    engine->stop();
    if (*command == "quit") break;
    CHILD_REQUIRE(*command == "next", "unknown command " + *command);
  }
  CHILD_REQUIRE(ch.send_string("bye"), ch.last_error());
  return test::kChildOk;
}

}  // namespace fabric::field
