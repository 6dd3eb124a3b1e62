#include "fabric_test/proc_inspect.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace fabric::test {

namespace {

std::string proc_path(pid_t pid, const std::string& rest) {
  return "/proc/" + std::to_string(pid) + "/" + rest;
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return names;
  while (const dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.emplace_back(e->d_name);
    }
  }
  ::closedir(dir);
  return names;
}

std::string read_link(const std::string& path) {
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), static_cast<std::size_t>(n)) : std::string();
}

// /proc/net/{tcp,udp}: the address is the in-memory (network order) bytes
// printed as host-order 32-bit words, so copying each word back restores the
// original bytes.
bool decode_address(const std::string& hex, bool v6, InetSocket& out) {
  const auto colon = hex.find(':');
  if (colon == std::string::npos) return false;
  const std::string addr_hex = hex.substr(0, colon);
  out.port = static_cast<std::uint16_t>(std::stoul(hex.substr(colon + 1), nullptr, 16));
  const std::size_t words = v6 ? 4 : 1;
  if (addr_hex.size() != words * 8) return false;
  std::array<unsigned char, 16> bytes{};
  for (std::size_t w = 0; w < words; ++w) {
    const auto word =
        static_cast<std::uint32_t>(std::stoul(addr_hex.substr(w * 8, 8), nullptr, 16));
    std::memcpy(bytes.data() + w * 4, &word, 4);
  }
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), text, sizeof text);
  out.address = text;
  bool wildcard = true;
  for (std::size_t i = 0; i < words * 4; ++i) wildcard = wildcard && bytes[i] == 0;
  out.unbound = wildcard && out.port == 0;
  if (!v6) {
    out.loopback = bytes[0] == 127;
  } else {
    static constexpr unsigned char kLoop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    out.loopback = std::memcmp(bytes.data(), kLoop6, 16) == 0 ||
                   (std::memcmp(bytes.data(), kMapped, 12) == 0 && bytes[12] == 127);
  }
  return true;
}

void scan_table(pid_t pid, const std::string& proto, std::map<std::uint64_t, InetSocket>& out) {
  std::ifstream table(proc_path(pid, "net/" + proto));
  std::string line;
  std::getline(table, line);  // header
  const bool v6 = proto.back() == '6';
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retrnsmt, uid, timeout;
    std::uint64_t inode = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retrnsmt >> uid >>
          timeout >> inode)) {
      continue;
    }
    InetSocket s;
    s.proto = proto;
    s.inode = inode;
    if (decode_address(local, v6, s)) out.emplace(inode, std::move(s));
  }
}

}  // namespace

std::string InetSocket::to_string() const {
  std::string host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
  return proto + " " + host + ":" + std::to_string(port) + (unbound ? " (unbound)" : "") +
         " inode " + std::to_string(inode);
}

std::vector<InetSocket> inet_sockets_of(pid_t pid) {
  const std::string fd_dir = proc_path(pid, "fd");
  if (::access(fd_dir.c_str(), R_OK) != 0) {
    throw std::runtime_error("cannot read " + fd_dir + ": " + std::strerror(errno));
  }
  std::set<std::uint64_t> socket_inodes;
  for (const auto& fd : list_dir(fd_dir)) {
    const std::string target = read_link(fd_dir + "/" + fd);
    if (target.rfind("socket:[", 0) == 0) {
      socket_inodes.insert(std::stoull(target.substr(8)));
    }
  }
  std::map<std::uint64_t, InetSocket> all;
  for (const char* proto : {"tcp", "tcp6", "udp", "udp6"}) scan_table(pid, proto, all);
  std::vector<InetSocket> mine;
  for (const auto inode : socket_inodes) {
    if (auto it = all.find(inode); it != all.end()) mine.push_back(it->second);
  }
  return mine;
}

std::set<std::string> shm_files_used_by(pid_t pid) {
  std::set<std::string> files;
  auto consider = [&](std::string path) {
    if (const auto pos = path.find(" (deleted)"); pos != std::string::npos) path.erase(pos);
    if (path.rfind("/dev/shm/", 0) == 0) files.insert(path);
  };
  std::ifstream maps(proc_path(pid, "maps"));
  std::string line;
  while (std::getline(maps, line)) {
    if (const auto pos = line.find('/'); pos != std::string::npos) consider(line.substr(pos));
  }
  const std::string fd_dir = proc_path(pid, "fd");
  for (const auto& fd : list_dir(fd_dir)) consider(read_link(fd_dir + "/" + fd));
  return files;
}

std::set<std::string> list_dev_shm() {
  const auto names = list_dir("/dev/shm");
  return {names.begin(), names.end()};
}

bool name_mentions_pid(const std::string& name, pid_t pid) {
  const std::string needle = std::to_string(pid);
  for (auto pos = name.find(needle); pos != std::string::npos; pos = name.find(needle, pos + 1)) {
    const bool digit_before = pos > 0 && std::isdigit(static_cast<unsigned char>(name[pos - 1]));
    const auto after = pos + needle.size();
    const bool digit_after =
        after < name.size() && std::isdigit(static_cast<unsigned char>(name[after]));
    if (!digit_before && !digit_after) return true;
  }
  return false;
}

}  // namespace fabric::test
