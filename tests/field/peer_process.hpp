#pragma once
// Starting the peer program (peer_roles.hpp) from a test that already runs engine threads:
// posix_spawn, which is safe there where fork() followed by allocation is not.

#include <chrono>
#include <string>

#include "fabric_test/child_process.hpp"

namespace fabric::field {

struct PeerSpec {
  std::string role;      // "target", "writer", "mesh", "lives"
  std::string provider;  // "shm", "tcp"
  int region_fd = -1;    // a target's (or lives') SharedRegion::fd()
  std::chrono::seconds lifetime{300};
};

// The peer process with its Channel. The peer dies with the thread that spawned it
// (PR_SET_PDEATHSIG follows the thread): spawn from the test's main thread only.
// Throws std::system_error when it cannot be started.
test::ChildProcess spawn_peer(const PeerSpec& spec);

// What each thread of the process is doing, from /proc: "tid state wchan; ..." (for a peer that
// does not answer).
std::string describe_threads(pid_t pid);

// Whether the process is in the stopped state ('T' in /proc/PID/stat), for SIGSTOP cases.
bool is_stopped(pid_t pid);

}  // namespace fabric::field
