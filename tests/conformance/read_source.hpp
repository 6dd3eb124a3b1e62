#pragma once
// A child process whose memory the parent READs. It registers two regions of `size` bytes, each
// filled with its own seed's byte stream: one with Access::remote_read (readable), one with the
// default access (write-only to peers), and hands out both descriptors. On command it reports
// whether both still hold their bytes: a READ must never change its source.

#include <cstdint>

#include "fabric/fabric.hpp"
#include "fabric_test/child_process.hpp"
#include "fixture.hpp"

namespace fabric::conformance {

inline constexpr std::uint64_t kReadableSeed = 0x4ead'0000;
inline constexpr std::uint64_t kPrivateSeed = 0x9417'0000;

class ReadSource {
 public:
  // Forks the child. Call before the parent creates its own engine.
  ReadSource(const EngineConfig& config, std::uint64_t size);

  // Waits for the child's engine and both descriptors.
  [[nodiscard]] ::testing::AssertionResult connect();
  [[nodiscard]] const MrDesc& readable() const { return readable_; }
  [[nodiscard]] const MrDesc& write_only() const { return write_only_; }

  // Whether both regions still hold their seeds' bytes.
  ::testing::AssertionResult unchanged();
  // Stops the child's engine and reaps the process.
  ::testing::AssertionResult finish();
  [[nodiscard]] ChildProcess& process() { return child_; }

 private:
  ChildProcess child_;
  MrDesc readable_;
  MrDesc write_only_;
};

}  // namespace fabric::conformance
