#include "read_source.hpp"

#include <vector>

#include "fabric_test/data.hpp"

namespace fabric::conformance {

namespace {
using test::Channel;

enum class Op : std::uint8_t { unchanged = 1, quit = 2 };

int source_main(Channel& ch, const EngineConfig& config, std::uint64_t size) {
  auto engine = child_engine(config);
  CHILD_REQUIRE(engine != nullptr, "read source engine");
  std::vector<std::byte> readable(size);
  std::vector<std::byte> write_only(size);
  test::fill_random(readable, kReadableSeed);
  test::fill_random(write_only, kPrivateSeed);
  auto r = engine->reg_mr(readable.data(), readable.size(), Device::host(),
                          Access::remote_write | Access::remote_read);
  CHILD_REQUIRE_OK(r.status());
  auto w = engine->reg_mr(write_only.data(), write_only.size());
  CHILD_REQUIRE_OK(w.status());
  CHILD_REQUIRE(ch.send_desc(r->desc), ch.last_error());
  CHILD_REQUIRE(ch.send_desc(w->desc), ch.last_error());
  for (;;) {
    auto op = ch.recv_pod<Op>(std::chrono::seconds(90));
    CHILD_REQUIRE(op.has_value(), "waiting for a command: " + ch.last_error());
    if (*op == Op::quit) break;
    CHILD_REQUIRE(*op == Op::unchanged, "unknown command");
    std::string report;
    if (auto same = test::bytes_equal(readable, test::random_bytes(size, kReadableSeed)); !same) {
      report += "readable region changed: " + std::string(same.message()) + "; ";
    }
    if (auto same = test::bytes_equal(write_only, test::random_bytes(size, kPrivateSeed));
        !same) {
      report += "write-only region changed: " + std::string(same.message());
    }
    CHILD_REQUIRE(ch.send_string(report), ch.last_error());
  }
  engine->stop();
  engine.reset();
  CHILD_REQUIRE(ch.send_string("bye"), ch.last_error());
  return test::kChildOk;
}

}  // namespace

ReadSource::ReadSource(const EngineConfig& config, std::uint64_t size)
    : child_(test::spawn_child(
          [config, size](Channel& ch) { return source_main(ch, config, size); },
          kChildLifetime)) {}

::testing::AssertionResult ReadSource::connect() {
  auto& ch = child_.channel();
  auto r = ch.recv_desc(kWait);
  auto w = r ? ch.recv_desc(kWait) : std::nullopt;
  if (!r || !w) {
    return ::testing::AssertionFailure()
           << "read source did not send its descriptors: " << ch.last_error();
  }
  readable_ = *r;
  write_only_ = *w;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ReadSource::unchanged() {
  auto& ch = child_.channel();
  if (!ch.send_pod(Op::unchanged)) return ::testing::AssertionFailure() << ch.last_error();
  auto report = ch.recv_string(kWait);
  if (!report) return ::testing::AssertionFailure() << ch.last_error();
  if (!report->empty()) return ::testing::AssertionFailure() << *report;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ReadSource::finish() {
  auto& ch = child_.channel();
  if (!ch.send_pod(Op::quit) || !ch.expect("bye", kWait)) {
    return ::testing::AssertionFailure() << "read source did not stop cleanly: "
                                         << ch.last_error() << "; process "
                                         << child_.wait_exit(kWait).to_string();
  }
  const auto exit = child_.wait_exit(kWait);
  if (!exit.ok()) return ::testing::AssertionFailure() << "read source process " << exit.to_string();
  return ::testing::AssertionSuccess();
}

}  // namespace fabric::conformance
