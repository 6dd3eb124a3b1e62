#pragma once
// What a process holds, read from /proc: its inet sockets (to prove IP
// providers stay on loopback) and its /dev/shm files (to prove engines clean
// up after themselves).

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace fabric::test {

struct InetSocket {
  std::string proto;    // "tcp", "tcp6", "udp", "udp6"
  std::string address;  // local address, printable ("127.0.0.1", "::1", "0.0.0.0")
  std::uint16_t port = 0;
  std::uint64_t inode = 0;
  bool loopback = false;  // 127.0.0.0/8, ::1 or ::ffff:127.x.y.z
  bool unbound = false;   // wildcard address and port 0: created, never bound or connected

  [[nodiscard]] std::string to_string() const;
};

// The inet sockets among `pid`'s open fds (matched by inode against
// /proc/<pid>/net/{tcp,tcp6,udp,udp6}). Unix sockets are not listed.
// Throws std::runtime_error when /proc cannot be read.
std::vector<InetSocket> inet_sockets_of(pid_t pid);

// /dev/shm files `pid` has mapped or open right now (full paths).
std::set<std::string> shm_files_used_by(pid_t pid);

// Names (not paths) of the entries of /dev/shm.
std::set<std::string> list_dev_shm();

// True when `name` contains `pid` as a whole decimal number (not as part of a
// longer one): "fi_shm_1234_0" contains 1234, "fi_12345" does not.
bool name_mentions_pid(const std::string& name, pid_t pid);

}  // namespace fabric::test
