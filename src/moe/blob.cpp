#include "blob.hpp"

#include <cstring>

namespace fabric::moe {

namespace {

void put_u32(std::vector<std::byte>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}
void put_u64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}
void put_bytes(std::vector<std::byte>& out, std::span<const std::byte> bytes) {
  put_u32(out, static_cast<std::uint32_t>(bytes.size()));
  out.insert(out.end(), bytes.begin(), bytes.end());
}

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  bool u32(std::uint32_t& v) {
    if (in_.size() - at_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t(std::to_integer<std::uint8_t>(in_[at_ + i])) << (8 * i);
    at_ += 4;
    return true;
  }
  bool u64(std::uint64_t& v) {
    std::uint32_t lo = 0, hi = 0;
    if (!u32(lo) || !u32(hi)) return false;
    v = lo | (std::uint64_t{hi} << 32);
    return true;
  }
  bool bytes(std::vector<std::byte>& v) {
    std::uint32_t len = 0;
    if (!u32(len) || in_.size() - at_ < len) return false;
    v.assign(in_.begin() + at_, in_.begin() + at_ + len);
    at_ += len;
    return true;
  }
  [[nodiscard]] bool done() const { return at_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

constexpr std::uint32_t kBlobMagic = 0x4d4f4231;  // "1BOM"

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

std::uint64_t config_fingerprint(const MoeConfig& c) noexcept {
  std::uint64_t h = 0;
  for (const std::uint64_t v :
       {std::uint64_t{c.world_size}, std::uint64_t{c.num_experts}, std::uint64_t{c.hidden},
        std::uint64_t{c.dispatch_element_bytes}, std::uint64_t{c.num_scales},
        std::uint64_t(c.combine_input), std::uint64_t{c.max_tokens_per_rank},
        std::uint64_t{c.top_k}, std::uint64_t{c.max_private_tokens}, std::uint64_t{c.dp_size},
        std::uint64_t{c.node_size}, std::uint64_t{c.expert_alignment}})
    h = mix(h, v);
  return h;
}

std::vector<std::byte> encode_blob(const GroupBlob& b) {
  std::vector<std::byte> out;
  put_u32(out, kBlobMagic);
  put_u32(out, b.rank);
  put_u64(out, b.fingerprint);
  put_bytes(out, b.addr);
  put_bytes(out, b.desc);
  put_bytes(out, std::as_bytes(std::span(b.shm_name.data(), b.shm_name.size())));
  return out;
}

Result<GroupBlob> decode_blob(std::span<const std::byte> bytes) {
  Reader r(bytes);
  GroupBlob b;
  std::uint32_t magic = 0;
  std::vector<std::byte> name;
  if (!r.u32(magic) || magic != kBlobMagic || !r.u32(b.rank) || !r.u64(b.fingerprint) ||
      !r.bytes(b.addr) || !r.bytes(b.desc) || !r.bytes(name) || !r.done() || name.size() > 255)
    return Status(Errc::malformed, "moe: a rank's group blob is truncated or corrupt");
  b.shm_name.assign(reinterpret_cast<const char*>(name.data()), name.size());
  return b;
}

std::vector<std::byte> encode_imm_offer(std::uint32_t first) {
  std::vector<std::byte> out;
  put_u32(out, first);
  return out;
}

Result<std::uint32_t> decode_imm_offer(std::span<const std::byte> bytes) {
  Reader r(bytes);
  std::uint32_t first = 0;
  if (!r.u32(first) || !r.done())
    return Status(Errc::malformed, "moe: a rank's immediate block offer is truncated or corrupt");
  return first;
}

}  // namespace fabric::moe
