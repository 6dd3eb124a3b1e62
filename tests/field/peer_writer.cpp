#include <vector>

#include "fabric_test/child_process.hpp"
#include "fabric_test/data.hpp"
#include "field_config.hpp"
#include "peer_roles.hpp"

namespace fabric::field {

int run_writer(proc::Channel& ch, const EngineConfig& config) {
  auto made = TransferEngine::create(config);
  CHILD_REQUIRE(made.ok(), made.status().to_string());
  auto engine = std::move(made).value();
  auto batch = ch.recv_pod<WriterBatch>(kWait);
  CHILD_REQUIRE(batch.has_value(), "no batch: " + ch.last_error());
  // Write i's source is the stream of seed i: the test rebuilds what each WRITE carried. The
  // test may READ it too (to have contacted this peer itself before it fences it).
  std::vector<std::byte> src(batch->count * batch->length);
  for (std::uint32_t i = 0; i < batch->count; ++i) {
    test::fill_random(std::span(src).subspan(i * batch->length, batch->length), i + 1);
  }
  auto reg = engine->reg_mr(src.data(), src.size(), Device::host(),
                            Access::remote_write | Access::remote_read);
  CHILD_REQUIRE_OK(reg.status());
  CHILD_REQUIRE(ch.send_desc(reg->desc), ch.last_error());
  auto dst = ch.recv_desc(kWait + kWait);
  CHILD_REQUIRE(dst.has_value(), "no destination: " + ch.last_error());
  std::vector<std::shared_ptr<CompletionFlag>> done;
  for (std::uint32_t i = 0; i < batch->count; ++i) {
    SingleWrite w;
    w.length = batch->length;
    w.src = {reg->handle, i * batch->length};
    w.dst = {*dst, i * batch->length};
    w.imm = kImm;
    done.push_back(std::make_shared<CompletionFlag>());
    CHILD_REQUIRE_OK(engine->submit_single_write(w, done.back()));
  }
  CHILD_REQUIRE(ch.send_string("posted"), ch.last_error());
  for (auto& flag : done) {
    // Ok or an error; a WRITE never settled is the failure this reports as a timeout status.
    CHILD_REQUIRE(ch.send_status(flag->wait(kRequestTimeout + kWait)), ch.last_error());
  }
  return stop_on_quit(ch, *engine);
}

}  // namespace fabric::field
