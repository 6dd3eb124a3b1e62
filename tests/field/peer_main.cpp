// fabric_field_peer --role target|writer|mesh|lives --provider P --parent PID --lifetime SECONDS
// The Channel to the test is fd 3; a target's shared region is fd 4 (peer_roles.hpp).

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>

#include "fabric_test/child_process.hpp"
#include "fabric_test/env.hpp"
#include "fabric_test/victim.hpp"
#include "field_config.hpp"
#include "peer_roles.hpp"

namespace fabric::field {
int stop_on_quit(proc::Channel& ch, TransferEngine& engine) {
  auto command = ch.recv_string(kWait + kWait);
  CHILD_REQUIRE(command && *command == "quit", "waiting for quit: " + ch.last_error());
  engine.stop();
  CHILD_REQUIRE(ch.send_string("bye"), ch.last_error());
  return test::kChildOk;
}
}  // namespace fabric::field

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  // Dies with the test: the parent's pid is checked after prctl, closing the race where the
  // test died before it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (std::to_string(::getppid()) != args["--parent"]) return 2;
  // A test wedged on its side still cannot leave this process behind.
  ::signal(SIGALRM, SIG_DFL);
  ::alarm(static_cast<unsigned>(std::atoi(args["--lifetime"].c_str())));
  fabric::test::use_loopback_environment();

  const std::string role = args["--role"];
  // Peers are the processes the suite stops and kills (docs/reliability.md#shm-locks).
  const fabric::EngineConfig config =
      fabric::test::victim_config(fabric::field::engine_config(args["--provider"]));
  fabric::proc::Channel channel(fabric::field::kChannelFd);
  try {
    if (role == "target") return fabric::field::run_target(channel, config);
    if (role == "writer") return fabric::field::run_writer(channel, config);
    if (role == "mesh") return fabric::field::run_mesh(channel, config);
    if (role == "lives") return fabric::field::run_lives(channel, config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[field peer %d] %s: %s\n", static_cast<int>(::getpid()), role.c_str(),
                 e.what());
    return fabric::test::kChildException;
  }
  std::fprintf(stderr, "[field peer] unknown role '%s'\n", role.c_str());
  return 2;
}
