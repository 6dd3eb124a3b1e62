#include "child_process.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/core.h>

#include "common/rendezvous.hpp"
#include "demo_error.hpp"

namespace demo {
namespace {
// A target never outlives its writer (PR_SET_PDEATHSIG, kept across exec);
// this bounds one whose writer is alive but wedged. The alarm survives exec.
constexpr std::chrono::hours kTargetLifetime{2};

int exit_code(const fabric::proc::ChildExit& e) {
  using Kind = fabric::proc::ChildExit::Kind;
  if (e.kind == Kind::exited) return e.code;
  if (e.kind == Kind::signaled) return 128 + e.signal;
  return -1;
}
}  // namespace

ChildProcess ChildProcess::spawn(const std::vector<std::string>& args) {
  // Exec through /proc/self/exe (immune to PATH and cwd), but give the child
  // the real path as argv[0] so it is recognisable in ps.
  char self[4096] = {};
  const ssize_t self_len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::vector<std::string> argv = {
      self_len > 0 ? std::string(self, static_cast<std::size_t>(self_len)) : "fabric-demo"};
  argv.insert(argv.end(), args.begin(), args.end());
  fabric::proc::ChildProcess process = fabric::proc::spawn_child(
      [argv](fabric::proc::Channel& channel) mutable {
        // Allocating after fork is safe here: spawn() runs before the writer
        // has any thread (spawn_child warns otherwise). The child's end of the
        // channel must survive exec (the parent's stays CLOEXEC).
        const int fd = channel.native_handle();
        if (::fcntl(fd, F_SETFD, 0) != 0) return 126;
        argv.emplace_back("--bootstrap-fd");
        argv.emplace_back(std::to_string(fd));
        std::vector<char*> raw;
        for (auto& a : argv) raw.push_back(a.data());
        raw.push_back(nullptr);
        ::execv("/proc/self/exe", raw.data());
        return 127;
      },
      std::chrono::duration_cast<std::chrono::seconds>(kTargetLifetime));
  fabric::proc::Channel channel = std::move(process.channel());
  return ChildProcess(std::move(process), std::move(channel));
}

ChildProcess ChildProcess::remote(const std::string& host_port) {
  const tools::HostPort server = tools::parse_host_port(host_port);
  fmt::print(stderr, "fabric-demo: connecting to {}\n", server.to_string());
  tools::Fd socket = tools::connect_to(server, std::chrono::seconds(3), "fabric-demo");
  return ChildProcess(std::nullopt, fabric::proc::Channel(socket.release()));
}

std::string ChildProcess::read_line(std::chrono::milliseconds timeout) {
  std::optional<std::string> line = channel_.recv_string(timeout);
  if (line) return std::move(*line);
  throw DemoError(fmt::format("{} did not report its address: {}",
                              process_ ? "the target process" : "the server",
                              channel_.last_error()));
}

int ChildProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (!process_) return 0;
  const fabric::proc::ChildExit e = process_->wait_exit(timeout);
  if (e.kind == fabric::proc::ChildExit::Kind::timed_out) {
    throw DemoError("target process did not exit within the wait limit; killed it");
  }
  return exit_code(e);
}

void ChildProcess::check_alive() {
  if (!process_) return;
  if (const auto e = process_->exited()) {
    throw DemoError("target process exited unexpectedly: " + e->to_string());
  }
}

void send_bootstrap(int fd, const std::string& line) {
  fabric::proc::Channel channel(fd);  // closed when sent
  if (!channel.send_string(line)) {
    throw DemoError("cannot send the bootstrap line to the writer: " + channel.last_error());
  }
}

}  // namespace demo
