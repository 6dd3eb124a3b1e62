#include <vector>

#include "fabric_test/child_process.hpp"
#include "field_config.hpp"
#include "peer_roles.hpp"

namespace fabric::field {

int run_mesh(proc::Channel& ch, const EngineConfig& given) {
  // The case bounds how long all pairs take to connect (many_engines_test.cpp), so one slow
  // first contact must not fail as a dead peer first: 32 processes starting on 2 loaded cores
  // left peers silent past 5 s.
  EngineConfig config = given;
  config.request_timeout = std::chrono::seconds(80);
  auto made = TransferEngine::create(config);
  CHILD_REQUIRE(made.ok(), made.status().to_string());
  auto engine = std::move(made).value();
  std::vector<std::byte> slot(64);
  auto reg = engine->reg_mr(slot.data(), slot.size());
  CHILD_REQUIRE_OK(reg.status());
  auto counter = engine->imm_counter(kImm);
  CHILD_REQUIRE_OK(counter.status());
  CHILD_REQUIRE(ch.send_desc(reg->desc), ch.last_error());

  // Every engine's descriptor, this one's included at position `self`.
  auto self = ch.recv_pod<std::uint32_t>(kWait + kWait);
  auto n = self ? ch.recv_pod<std::uint32_t>() : std::nullopt;
  CHILD_REQUIRE(n.has_value(), "no peer list: " + ch.last_error());
  std::vector<MrDesc> all;
  for (std::uint32_t i = 0; i < *n; ++i) {
    auto desc = ch.recv_desc();
    CHILD_REQUIRE(desc.has_value(), ch.last_error());
    all.push_back(*desc);
  }
  const auto start = std::chrono::steady_clock::now();
  auto done = std::make_shared<CompletionCounter>();
  for (std::uint32_t i = 0; i < *n; ++i) {
    if (i != *self) CHILD_REQUIRE_OK(engine->submit_imm(kImm, all[i], done));
  }
  Status st = done->wait(*n - 1, kWait + kWait);
  if (st.ok() && done->failed() > 0) st = Status(Errc::provider, "an immediate failed");
  if (st.ok()) st = (*counter)->wait(*n - 1, kWait + kWait);
  const auto took = std::chrono::steady_clock::now() - start;
  CHILD_REQUIRE(ch.send_status(st), ch.last_error());
  CHILD_REQUIRE(
      ch.send_pod(MeshReport{static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(took).count())}),
      ch.last_error());
  return stop_on_quit(ch, *engine);
}

}  // namespace fabric::field
