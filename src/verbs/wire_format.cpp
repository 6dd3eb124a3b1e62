#include "verbs/wire_format.hpp"

#include <fmt/format.h>

#include "common/wire.hpp"

namespace fabric::verbs {

namespace {

constexpr std::uint8_t kAddressMagic[3] = {'F', 'V', 'A'};
constexpr std::uint8_t kHandshakeMagic[3] = {'F', 'V', 'H'};
constexpr std::uint32_t kQpnMask = 0xffffff;

Status malformed(std::string_view what, std::string_view detail) {
  return {Errc::malformed, fmt::format("verbs {}: {}", what, detail)};
}

void write_header(wire::Writer& w, const std::uint8_t (&magic)[3], std::uint8_t version) {
  for (std::uint8_t m : magic) w.u8(m);
  w.u8(version);
}

Status read_header(wire::Reader& r, const std::uint8_t (&magic)[3], std::uint8_t version,
                   std::string_view what) {
  for (std::uint8_t m : magic) {
    auto b = r.u8();
    if (!b || *b != m) return malformed(what, "bad magic");
  }
  auto v = r.u8();
  if (!v) return malformed(what, "truncated header");
  if (*v != version) return malformed(what, fmt::format("unsupported version {}", *v));
  return Status::success();
}

void write_address_body(wire::Writer& w, const VerbsAddress& a) {
  w.bytes(std::as_bytes(std::span(a.gid)));
  w.u16(a.lid);
  w.u8(a.mtu);
  w.u8(0);
  w.u32(a.ud_qpn);
  w.u64(a.nonce);
}

Result<VerbsAddress> read_address_body(wire::Reader& r, std::string_view what) {
  VerbsAddress a;
  auto gid = r.bytes(a.gid.size());
  auto lid = r.u16();
  auto mtu = r.u8();
  auto reserved = r.u8();
  auto qpn = r.u32();
  auto nonce = r.u64();
  if (!gid || !lid || !mtu || !reserved || !qpn || !nonce) return malformed(what, "truncated");
  for (std::size_t i = 0; i < a.gid.size(); ++i) a.gid[i] = static_cast<std::uint8_t>((*gid)[i]);
  if (*mtu < 1 || *mtu > 5) return malformed(what, fmt::format("MTU code {} not in 1..5", *mtu));
  if (*reserved != 0) return malformed(what, "reserved byte is not zero");
  if ((*qpn & ~kQpnMask) != 0 || *qpn == 0) {
    return malformed(what, fmt::format("queue pair number {:#x} is not a 24-bit QPN", *qpn));
  }
  a.lid = *lid;
  a.mtu = *mtu;
  a.ud_qpn = *qpn;
  a.nonce = *nonce;
  return a;
}

}  // namespace

std::vector<std::byte> VerbsAddress::encode() const {
  wire::Writer w;
  write_header(w, kAddressMagic, kVersion);
  write_address_body(w, *this);
  return std::move(w).take();
}

Result<VerbsAddress> VerbsAddress::decode(std::span<const std::byte> bytes) {
  constexpr std::string_view kWhat = "address";
  if (bytes.size() != kBytes) {
    return malformed(kWhat, fmt::format("{} bytes, expected {}", bytes.size(), kBytes));
  }
  wire::Reader r(bytes);
  if (auto st = read_header(r, kAddressMagic, kVersion, kWhat); !st.ok()) return st;
  return read_address_body(r, kWhat);
}

std::vector<std::byte> Handshake::encode() const {
  wire::Writer w;
  write_header(w, kHandshakeMagic, kVersion);
  w.u8(static_cast<std::uint8_t>(type));
  w.u8(0);
  w.u16(0);
  w.u64(conn_id);
  write_header(w, kAddressMagic, VerbsAddress::kVersion);
  write_address_body(w, sender);
  w.u64(receiver_nonce);
  w.u32(msg_qpn);
  w.u32(write_qpn);
  w.u32(msg_psn);
  w.u32(write_psn);
  return std::move(w).take();
}

Result<Handshake> Handshake::decode(std::span<const std::byte> bytes) {
  constexpr std::string_view kWhat = "handshake";
  if (bytes.size() != kBytes) {
    return malformed(kWhat, fmt::format("{} bytes, expected {}", bytes.size(), kBytes));
  }
  wire::Reader r(bytes);
  if (auto st = read_header(r, kHandshakeMagic, kVersion, kWhat); !st.ok()) return st;
  Handshake h;
  auto type = r.u8();
  auto pad8 = r.u8();
  auto pad16 = r.u16();
  auto conn = r.u64();
  if (!type || !pad8 || !pad16 || !conn) return malformed(kWhat, "truncated");
  if (*type != static_cast<std::uint8_t>(Type::request) &&
      *type != static_cast<std::uint8_t>(Type::reply)) {
    return malformed(kWhat, fmt::format("unknown message type {}", *type));
  }
  if (*pad8 != 0 || *pad16 != 0) return malformed(kWhat, "reserved bytes are not zero");
  if (auto st = read_header(r, kAddressMagic, VerbsAddress::kVersion, kWhat); !st.ok()) return st;
  auto sender = read_address_body(r, kWhat);
  if (!sender) return sender.status();
  auto nonce = r.u64();
  auto msg_qpn = r.u32();
  auto write_qpn = r.u32();
  auto msg_psn = r.u32();
  auto write_psn = r.u32();
  if (!nonce || !msg_qpn || !write_qpn || !msg_psn || !write_psn) {
    return malformed(kWhat, "truncated");
  }
  for (std::uint32_t v : {*msg_qpn, *write_qpn, *msg_psn, *write_psn}) {
    if ((v & ~kQpnMask) != 0) {
      return malformed(kWhat, fmt::format("{:#x} does not fit 24 bits", v));
    }
  }
  h.type = static_cast<Type>(*type);
  h.conn_id = *conn;
  h.sender = *sender;
  h.receiver_nonce = *nonce;
  h.msg_qpn = *msg_qpn;
  h.write_qpn = *write_qpn;
  h.msg_psn = *msg_psn;
  h.write_psn = *write_psn;
  return h;
}

}  // namespace fabric::verbs
