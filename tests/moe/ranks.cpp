#include "ranks.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>

namespace fabric::moe::test {

namespace {

using fabric::test::Channel;

std::vector<std::byte> frame(char tag, std::span<const std::byte> body) {
  std::vector<std::byte> out(body.size() + 1);
  out[0] = static_cast<std::byte>(tag);
  std::copy(body.begin(), body.end(), out.begin() + 1);
  return out;
}

void put_u32(std::vector<std::byte>& out, std::uint32_t v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + 4);
}

}  // namespace

AllGather relay_all_gather(Channel& channel) {
  return [&channel](std::span<const std::byte> mine) -> Result<std::vector<std::vector<std::byte>>> {
    if (!channel.send_bytes(frame('G', mine)))
      return Status(Errc::provider, "relay: " + channel.last_error());
    auto reply = channel.recv_bytes(std::chrono::milliseconds(120000));
    if (!reply) return Status(Errc::timeout, "relay: " + channel.last_error());
    std::vector<std::vector<std::byte>> all;
    std::size_t at = 0;
    const auto take = [&](std::uint32_t& v) {
      if (reply->size() - at < 4) return false;
      std::memcpy(&v, reply->data() + at, 4);
      at += 4;
      return true;
    };
    std::uint32_t count = 0;
    if (!take(count)) return Status(Errc::malformed, "relay: short reply");
    for (std::uint32_t i = 0; i < count; ++i) {
      std::uint32_t len = 0;
      if (!take(len) || reply->size() - at < len) return Status(Errc::malformed, "relay: short reply");
      all.emplace_back(reply->begin() + at, reply->begin() + at + len);
      at += len;
    }
    return all;
  };
}

bool report(Channel& channel, const std::string& text) {
  return channel.send_bytes(frame('R', std::as_bytes(std::span(text.data(), text.size()))));
}

std::vector<RankOutcome> run_ranks(std::uint32_t world_size,
                                   const std::function<int(std::uint32_t, Channel&)>& body,
                                   std::chrono::seconds timeout) {
  std::vector<fabric::test::ChildProcess> children;
  for (std::uint32_t r = 0; r < world_size; ++r)
    children.push_back(fabric::test::spawn_child([&body, r](Channel& ch) { return body(r, ch); }, timeout));
  std::vector<RankOutcome> out(world_size);
  std::vector<bool> active(world_size, true);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Rounds: one frame from every rank still there. Gathers of a round are
  // answered together, in rank order; a rank that reports or dies leaves.
  for (;;) {
    std::vector<std::uint32_t> round;
    std::vector<std::vector<std::byte>> blobs;
    bool any = false;
    for (std::uint32_t r = 0; r < world_size; ++r) {
      if (!active[r]) continue;
      any = true;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto msg = children[r].channel().recv_bytes(std::max(left, std::chrono::milliseconds(1)));
      if (!msg || msg->empty()) {
        active[r] = false;
        continue;
      }
      if (static_cast<char>((*msg)[0]) == 'R') {
        out[r].report.assign(reinterpret_cast<const char*>(msg->data() + 1), msg->size() - 1);
        active[r] = false;
        continue;
      }
      round.push_back(r);
      blobs.emplace_back(msg->begin() + 1, msg->end());
    }
    if (!any) break;
    if (round.empty()) continue;
    std::vector<std::byte> reply;
    put_u32(reply, static_cast<std::uint32_t>(blobs.size()));
    for (const auto& b : blobs) {
      put_u32(reply, static_cast<std::uint32_t>(b.size()));
      reply.insert(reply.end(), b.begin(), b.end());
    }
    for (const auto r : round) (void)children[r].channel().send_bytes(reply);
  }
  if (std::chrono::steady_clock::now() >= deadline)
    std::fprintf(stderr, "[moe relay] deadline passed with ranks still running\n");
  for (std::uint32_t r = 0; r < world_size; ++r) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    out[r].exit = children[r].wait_exit(std::max(left, std::chrono::milliseconds(1000)));
  }
  return out;
}

}  // namespace fabric::moe::test
