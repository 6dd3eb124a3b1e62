#pragma once
// The verbs backend's two wire formats, little-endian and versioned:
//  - VerbsAddress: one Domain's address inside a NetAddr (what a peer needs
//    to reach our UD handshake queue pair);
//  - Handshake: the request/reply exchanged over UD to connect RC queue pairs.
// docs/verbs.md lists the byte layout. Decoders reject every truncation,
// trailing byte and unknown version with Errc::malformed.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fabric/status.hpp"

namespace fabric::verbs {

struct VerbsAddress {
  static constexpr std::uint8_t kVersion = 1;
  static constexpr std::size_t kBytes = 36;

  std::array<std::uint8_t, 16> gid{};
  std::uint16_t lid = 0;
  std::uint8_t mtu = 0;         // enum ibv_mtu, 1..5
  std::uint32_t ud_qpn = 0;     // 24 bits
  std::uint64_t nonce = 0;      // random per Domain: a reused QPN is not us

  [[nodiscard]] std::vector<std::byte> encode() const;
  static Result<VerbsAddress> decode(std::span<const std::byte> bytes);
  friend bool operator==(const VerbsAddress&, const VerbsAddress&) = default;
};

struct Handshake {
  static constexpr std::uint8_t kVersion = 1;
  static constexpr std::size_t kBytes = 76;
  enum class Type : std::uint8_t { request = 1, reply = 2 };

  Type type = Type::request;
  std::uint64_t conn_id = 0;         // chosen by the initiator, echoed in the reply
  VerbsAddress sender;
  std::uint64_t receiver_nonce = 0;  // the Domain this is meant for
  std::uint32_t msg_qpn = 0;         // sender's SEND/RECV queue pair
  std::uint32_t write_qpn = 0;       // sender's WRITE queue pair
  std::uint32_t msg_psn = 0;
  std::uint32_t write_psn = 0;

  [[nodiscard]] std::vector<std::byte> encode() const;
  static Result<Handshake> decode(std::span<const std::byte> bytes);
  friend bool operator==(const Handshake&, const Handshake&) = default;
};

}  // namespace fabric::verbs
