#include "published.hpp"

#include <cstring>

namespace fabric::workloads::test {

namespace {

// Host byte order: the ranks are processes of one machine.
void put(std::vector<std::byte>& out, std::uint32_t v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + 4);
}
void put(std::vector<std::byte>& out, const std::vector<std::byte>& bytes) {
  put(out, static_cast<std::uint32_t>(bytes.size()));
  out.insert(out.end(), bytes.begin(), bytes.end());
}

struct Reader {
  std::span<const std::byte> in;
  std::size_t at = 0;
  bool get(std::uint32_t& v) {
    if (in.size() - at < 4) return false;
    std::memcpy(&v, in.data() + at, 4);
    at += 4;
    return true;
  }
  bool get(std::vector<std::byte>& v) {
    std::uint32_t n = 0;
    if (!get(n) || in.size() - at < n) return false;
    v.assign(in.begin() + at, in.begin() + at + n);
    at += n;
    return true;
  }
};

}  // namespace

std::vector<std::byte> encode(const Published& p) {
  std::vector<std::byte> out;
  put(out, p.addr);
  put(out, p.kv_addr);
  put(out, p.arena);
  put(out, p.weights_first);
  put(out, p.weights_count);
  put(out, p.acks);
  put(out, p.ack_first);
  return out;
}

Result<Published> decode_published(std::span<const std::byte> bytes) {
  Published p;
  Reader r{bytes};
  if (!r.get(p.addr) || !r.get(p.kv_addr) || !r.get(p.arena) || !r.get(p.weights_first) || !r.get(p.weights_count) ||
      !r.get(p.acks) || !r.get(p.ack_first) || r.at != bytes.size()) {
    return Status(Errc::malformed, "a rank's published blob is truncated");
  }
  return p;
}

}  // namespace fabric::workloads::test
