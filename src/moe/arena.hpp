#pragma once
// The memory of one rank's arena: shared memory that the other processes of
// its node map (the direct-copy path), or anonymous memory when it has no
// node peers. Move-only owner of the mapping.

#include <cstddef>
#include <string>

#include "fabric/status.hpp"

namespace fabric::moe {

class Arena {
 public:
  Arena() = default;
  ~Arena();
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A zeroed arena of `bytes`; `shared` makes it mappable by name (name()).
  static Result<Arena> create(std::size_t bytes, bool shared);
  // Maps a peer's arena by the name it published.
  static Result<Arena> open(const std::string& name, std::size_t bytes);

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  // Removes the name (the mappings stay); idempotent.
  void unlink() noexcept;

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
};

}  // namespace fabric::moe
