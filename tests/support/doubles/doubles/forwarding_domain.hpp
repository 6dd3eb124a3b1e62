#pragma once
// A Domain decorator that forwards every call to the Domain it wraps. Test doubles derive from
// it and override only what they change (ReorderingDomain: poll; a gated Domain: poll), so a
// new Domain method is forwarded in one place.

#include <memory>
#include <span>
#include <utility>

#include "domain/domain.hpp"

namespace fabric::domain {

class ForwardingDomain : public Domain {
 public:
  explicit ForwardingDomain(std::unique_ptr<Domain> inner) : inner_(std::move(inner)) {}

  [[nodiscard]] std::span<const std::byte> address() const noexcept override {
    return inner_->address();
  }
  [[nodiscard]] const Limits& limits() const noexcept override { return inner_->limits(); }
  Result<std::unique_ptr<MemoryRegion>> register_memory(const MemorySpan& span,
                                                        Access access) override {
    return inner_->register_memory(span, access);
  }
  Result<PeerHandle> resolve_peer(std::span<const std::byte> address) override {
    return inner_->resolve_peer(address);
  }
  Status post_write(const WriteDesc& write) override { return inner_->post_write(write); }
  Status post_read(const ReadDesc& read) override { return inner_->post_read(read); }
  Status post_send(PeerHandle peer, const void* buf, std::size_t length, void* desc,
                   Token token) override {
    return inner_->post_send(peer, buf, length, desc, token);
  }
  Status post_recv(void* buf, std::size_t length, void* desc, Token token) override {
    return inner_->post_recv(buf, length, desc, token);
  }
  std::size_t poll(std::span<Event> out) override { return inner_->poll(out); }
  bool progress_pending() noexcept override { return inner_->progress_pending(); }
  Status fence_peer(std::span<const std::byte> address) override {
    return inner_->fence_peer(address);
  }
  void close_endpoint() noexcept override { inner_->close_endpoint(); }

 protected:
  [[nodiscard]] Domain& inner() noexcept { return *inner_; }

 private:
  std::unique_ptr<Domain> inner_;
};

}  // namespace fabric::domain
