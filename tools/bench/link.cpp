#include "link.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace bench {

namespace {
// A forked target never outlives the bench (PR_SET_PDEATHSIG); this bounds
// one whose bench is alive but wedged. Longer than any sweep.
constexpr std::chrono::hours kTargetLifetime{6};
}  // namespace

void Link::send(const std::string& line) {
  if (!channel_.send_string(line)) throw std::runtime_error("control channel: " + channel_.last_error());
}

std::string Link::recv(std::chrono::milliseconds timeout) {
  std::optional<std::string> line = channel_.recv_string(timeout);
  if (!line) throw std::runtime_error("control channel: " + channel_.last_error());
  return std::move(*line);
}

std::string Link::expect(const std::string& word, std::chrono::milliseconds timeout) {
  std::string line = recv(timeout);
  if (line.starts_with("fail ")) throw std::runtime_error("target: " + line.substr(5));
  if (line.rfind(word, 0) != 0) {
    throw std::runtime_error(fmt::format("target said '{}' (wanted '{}')", line, word));
  }
  return line;
}

Child fork_child(const std::function<int(Link&)>& body) {
  fabric::proc::ChildProcess process = fabric::proc::spawn_child(
      [body](fabric::proc::Channel& channel) {
        Link link(std::move(channel));
        try {
          return body(link);
        } catch (const std::exception& e) {
          // The bench reports what its targets tell it, so that one failure
          // (an unknown provider in all five processes) is one line; printed
          // here only when the bench can no longer be told.
          try {
            link.send(fmt::format("fail {}", e.what()));
          } catch (...) {
            fmt::print(stderr, "fabric-bench target: {}\n", e.what());
          }
          return 1;
        }
      },
      kTargetLifetime);
  Link link(std::move(process.channel()));
  return Child{std::move(process), std::move(link)};
}

std::string reap_all(std::vector<Child>& children, std::chrono::steady_clock::time_point deadline) {
  std::string failed;
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (!children[i].process) continue;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const fabric::proc::ChildExit exit =
        children[i].process->wait_exit(std::max(left, std::chrono::milliseconds::zero()));
    if (!exit.ok() && failed.empty()) {
      failed = fmt::format("target process {} {}", i, exit.to_string());
    }
  }
  return failed;
}

}  // namespace bench
