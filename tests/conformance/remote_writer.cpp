#include "remote_writer.hpp"

#include <cstring>
#include <memory>
#include <thread>

#include "fabric_test/data.hpp"
#include "fabric_test/sync.hpp"

namespace fabric::conformance {

namespace {
using test::Channel;

enum class Op : std::uint8_t { single = 1, paged = 2, imm = 3, burst = 4, quit = 5 };

// Fixed-size images of the specs for the Channel (std::optional and vectors
// are not trivially copyable).
struct SingleWire {
  std::uint64_t length, src_offset, dst_offset;
  std::uint32_t imm;
  std::uint8_t has_imm, routing_mode;
  std::uint32_t num_shards, domain;
};
struct PagedWire {
  std::uint64_t page_length, src_stride, src_offset, dst_stride, dst_offset;
  std::uint32_t imm;
  std::uint8_t has_imm;
};
struct ImmWire {
  std::uint32_t imm, count;
};
struct BurstWire {
  std::uint64_t length, src_stride, dst_stride;
  std::uint32_t count, imm;
  std::uint8_t has_imm;
};
struct BurstReply {
  std::uint64_t submitted, completed, failed, completed_later;
};

std::vector<std::byte> indices_bytes(const std::vector<std::uint32_t>& v) {
  const auto bytes = std::as_bytes(std::span(v));
  return {bytes.begin(), bytes.end()};
}
std::vector<std::uint32_t> indices_from(const std::vector<std::byte>& b) {
  std::vector<std::uint32_t> v(b.size() / sizeof(std::uint32_t));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(std::uint32_t));
  return v;
}

bool send_outcome(Channel& ch, bool accepted, const Status& status) {
  return ch.send_pod<std::uint8_t>(accepted ? 1 : 0) && ch.send_status(status);
}

Outcome recv_outcome(Channel& ch) {
  Outcome out;
  auto accepted = ch.recv_pod<std::uint8_t>(kWait + kWait);
  auto status = accepted ? ch.recv_status() : std::nullopt;
  if (!accepted || !status) {
    out.accepted = false;
    out.status = Status(Errc::timeout, "no outcome from the writer: " + ch.last_error());
    return out;
  }
  out.accepted = *accepted != 0;
  out.status = *status;
  return out;
}

// Submits, then waits (bounded) for the completion.
template <typename Submit>
bool run_and_report(Channel& ch, Submit&& submit) {
  auto flag = std::make_shared<CompletionFlag>();
  const Status submitted = submit(OnDone(flag));
  if (!submitted.ok()) return send_outcome(ch, false, submitted);
  Status done = flag->wait(kWait);
  if (!flag->done()) {
    done = Status(Errc::timeout, "no completion within " + std::to_string(kWait.count()) +
                                     " ms; the submission is still outstanding");
  }
  return send_outcome(ch, true, done);
}

int writer_main(Channel& ch, const EngineConfig& config, std::uint64_t src_size,
                std::uint64_t src_seed) {
  auto engine = child_engine(config);
  CHILD_REQUIRE(engine != nullptr, "writer engine");
  std::vector<std::byte> src(src_size);
  test::fill_random(src, src_seed);
  auto reg = engine->reg_mr(src.data(), src.size());
  CHILD_REQUIRE_OK(reg.status());
  CHILD_REQUIRE(ch.send_string("ready"), ch.last_error());
  CHILD_REQUIRE(ch.send_addr(engine->main_address()), ch.last_error());
  auto dst = ch.recv_desc(kWait);
  CHILD_REQUIRE(dst.has_value(), ch.last_error());

  std::vector<std::shared_ptr<CompletionCounter>> bursts;
  std::uint64_t burst_submitted = 0;
  for (;;) {
    // The parent may spend a while verifying large buffers between commands.
    auto op = ch.recv_pod<Op>(std::chrono::seconds(90));
    CHILD_REQUIRE(op.has_value(), "waiting for a command: " + ch.last_error());
    switch (*op) {
      case Op::single: {
        auto w = ch.recv_pod<SingleWire>();
        CHILD_REQUIRE(w.has_value(), ch.last_error());
        SingleWrite req;
        req.length = w->length;
        if (w->has_imm) req.imm = w->imm;
        req.src = {reg->handle, w->src_offset};
        req.dst = {*dst, w->dst_offset};
        req.routing = {static_cast<WriteRouting::Mode>(w->routing_mode), w->num_shards, w->domain};
        CHILD_REQUIRE(
            run_and_report(
                ch, [&](OnDone d) { return engine->submit_single_write(req, std::move(d)); }),
            ch.last_error());
        break;
      }
      case Op::paged: {
        auto w = ch.recv_pod<PagedWire>();
        auto src_idx = w ? ch.recv_bytes() : std::nullopt;
        auto dst_idx = src_idx ? ch.recv_bytes() : std::nullopt;
        CHILD_REQUIRE(dst_idx.has_value(), ch.last_error());
        PagedWrite req;
        req.page_length = w->page_length;
        if (w->has_imm) req.imm = w->imm;
        req.src = reg->handle;
        req.src_pages = {indices_from(*src_idx), w->src_stride, w->src_offset};
        req.dst = *dst;
        req.dst_pages = {indices_from(*dst_idx), w->dst_stride, w->dst_offset};
        CHILD_REQUIRE(
            run_and_report(
                ch, [&](OnDone d) { return engine->submit_paged_writes(req, std::move(d)); }),
            ch.last_error());
        break;
      }
      case Op::imm: {
        auto w = ch.recv_pod<ImmWire>();
        CHILD_REQUIRE(w.has_value(), ch.last_error());
        auto counter = std::make_shared<CompletionCounter>();
        Status rejected;
        std::uint64_t submitted = 0;
        for (std::uint32_t i = 0; i < w->count && rejected.ok(); ++i) {
          rejected =
              test::submit_with_retry([&] { return engine->submit_imm(w->imm, *dst, counter); });
          if (rejected.ok()) ++submitted;
        }
        const Status done = counter->wait(submitted, kWait);
        CHILD_REQUIRE(send_outcome(ch, rejected.ok(), rejected.ok() ? done : rejected),
                      ch.last_error());
        break;
      }
      case Op::burst: {
        auto w = ch.recv_pod<BurstWire>();
        CHILD_REQUIRE(w.has_value(), ch.last_error());
        auto counter = std::make_shared<CompletionCounter>();
        bursts.push_back(counter);
        Status first_error;
        std::uint64_t submitted = 0;
        for (std::uint32_t i = 0; i < w->count; ++i) {
          SingleWrite req;
          req.length = w->length;
          if (w->has_imm) req.imm = w->imm;
          req.src = {reg->handle, i * w->src_stride};
          req.dst = {*dst, i * w->dst_stride};
          const Status st =
              test::submit_with_retry([&] { return engine->submit_single_write(req, counter); });
          if (!st.ok()) {
            first_error = st;
            break;
          }
          ++submitted;
        }
        burst_submitted += submitted;
        const Status waited = counter->wait(submitted, kWait);
        if (first_error.ok() && !waited.ok()) first_error = waited;
        BurstReply reply{submitted, counter->completed(), counter->failed(), 0};
        // A duplicate delivery would show up as a count beyond `submitted`.
        std::this_thread::sleep_for(kQuiet);
        reply.completed_later = counter->completed();
        CHILD_REQUIRE(ch.send_pod(reply) && ch.send_status(first_error), ch.last_error());
        break;
      }
      case Op::quit: {
        engine->stop();
        std::uint64_t completed = 0;
        for (const auto& c : bursts) completed += c->completed();
        CHILD_REQUIRE(ch.send_pod(WriterSummary{burst_submitted, completed}), ch.last_error());
        engine.reset();
        return test::kChildOk;
      }
      default:
        CHILD_REQUIRE(false, "unknown command " + std::to_string(static_cast<int>(*op)));
    }
  }
}
}  // namespace

std::string Outcome::to_string() const {
  return (accepted ? "completed: " : "rejected at submit: ") + status.to_string();
}

RemoteWriter::RemoteWriter(const EngineConfig& config, std::uint64_t src_size,
                           std::uint64_t src_seed)
    : child_(test::spawn_child(
          [config, src_size, src_seed](Channel& ch) {
            return writer_main(ch, config, src_size, src_seed);
          },
          kChildLifetime)) {}

::testing::AssertionResult RemoteWriter::connect(const MrDesc& dst) {
  auto& ch = child_.channel();
  if (!ch.expect("ready", kWait)) {
    return ::testing::AssertionFailure() << "writer did not start: " << ch.last_error();
  }
  auto addr = ch.recv_addr(kWait);
  if (!addr) return ::testing::AssertionFailure() << "no address from the writer: " << ch.last_error();
  addr_ = *addr;
  if (!ch.send_desc(dst)) return ::testing::AssertionFailure() << ch.last_error();
  return ::testing::AssertionSuccess();
}

Outcome RemoteWriter::single_write(const SingleWriteSpec& spec) {
  auto& ch = child_.channel();
  const SingleWire w{spec.length,
                     spec.src_offset,
                     spec.dst_offset,
                     spec.imm.value_or(0),
                     static_cast<std::uint8_t>(spec.imm.has_value()),
                     static_cast<std::uint8_t>(spec.routing.mode),
                     spec.routing.num_shards,
                     spec.routing.domain};
  if (!ch.send_pod(Op::single) || !ch.send_pod(w)) {
    return {false, Status(Errc::timeout, "writer unreachable: " + ch.last_error())};
  }
  return recv_outcome(ch);
}

Outcome RemoteWriter::paged_write(const PagedWriteSpec& spec) {
  auto& ch = child_.channel();
  const PagedWire w{spec.page_length,
                    spec.src.stride,
                    spec.src.offset,
                    spec.dst.stride,
                    spec.dst.offset,
                    spec.imm.value_or(0),
                    static_cast<std::uint8_t>(spec.imm.has_value())};
  if (!ch.send_pod(Op::paged) || !ch.send_pod(w) ||
      !ch.send_bytes(indices_bytes(spec.src.indices)) ||
      !ch.send_bytes(indices_bytes(spec.dst.indices))) {
    return {false, Status(Errc::timeout, "writer unreachable: " + ch.last_error())};
  }
  return recv_outcome(ch);
}

Outcome RemoteWriter::imm(std::uint32_t imm, std::uint32_t count) {
  auto& ch = child_.channel();
  if (!ch.send_pod(Op::imm) || !ch.send_pod(ImmWire{imm, count})) {
    return {false, Status(Errc::timeout, "writer unreachable: " + ch.last_error())};
  }
  return recv_outcome(ch);
}

BurstResult RemoteWriter::burst(const BurstSpec& spec) {
  auto& ch = child_.channel();
  BurstResult out;
  const BurstWire w{spec.length,          spec.src_stride,
                    spec.dst_stride,      spec.count,
                    spec.imm.value_or(0), static_cast<std::uint8_t>(spec.imm.has_value())};
  if (!ch.send_pod(Op::burst) || !ch.send_pod(w)) {
    out.first_error = Status(Errc::timeout, "writer unreachable: " + ch.last_error());
    return out;
  }
  auto reply = ch.recv_pod<BurstReply>(kWait + kWait);
  auto status = reply ? ch.recv_status() : std::nullopt;
  if (!status) {
    out.first_error = Status(Errc::timeout, "no burst result from the writer: " + ch.last_error());
    return out;
  }
  out.submitted = reply->submitted;
  out.completed = reply->completed;
  out.failed = reply->failed;
  out.completed_later = reply->completed_later;
  out.first_error = *status;
  return out;
}

std::optional<WriterSummary> RemoteWriter::finish() {
  auto& ch = child_.channel();
  std::optional<WriterSummary> summary;
  if (ch.send_pod(Op::quit)) summary = ch.recv_pod<WriterSummary>(kWait);
  if (!summary) {
    ADD_FAILURE() << "writer did not acknowledge quit: " << ch.last_error();
  }
  const auto exit = child_.wait_exit(kWait);
  if (!exit.ok()) {
    ADD_FAILURE() << "writer process " << exit.to_string();
    return std::nullopt;
  }
  return summary;
}

}  // namespace fabric::conformance
