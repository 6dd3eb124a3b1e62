#pragma once
// A device that does the kernels' work with CPU threads (count, stage,
// reorder, weighted sum) around the proxy steps of a MoeGroup, so the whole
// protocol runs on hosts without a GPU. Output order and arithmetic are fixed,
// so results are bitwise repeatable and independent of the thread count.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "fabric/moe/group.hpp"
#include "fabric/moe/proxy.hpp"

namespace fabric::moe {

// bfloat16 <-> float: exact widening; narrowing rounds to nearest even.
[[nodiscard]] float bf16_to_float(std::uint16_t bits) noexcept;
[[nodiscard]] std::uint16_t float_to_bf16(float value) noexcept;

// How the device hands the engine-side steps to the proxy: it runs them
// itself between its own steps (inline), signals a Proxy thread, or stores
// into the Proxy's watched word as a GPU kernel would (watcher).
enum class ProxyMode : std::uint8_t { inline_steps, thread, watcher };

class HostDevice {
 public:
  // `engine` is needed for ProxyMode::watcher only.
  explicit HostDevice(MoeGroup& group, ProxyMode mode = ProxyMode::inline_steps,
                      TransferEngine* engine = nullptr);
  ~HostDevice();
  HostDevice(const HostDevice&) = delete;
  HostDevice& operator=(const HostDevice&) = delete;

  // x: [tokens][hidden * dispatch_element_bytes]; scales: [tokens][num_scales]
  // (empty when num_scales is 0); topk_idx: [tokens][top_k]. With dp_size > 1
  // every member passes the dp group's identical tokens.
  Status dispatch_send(std::span<const std::byte> x, std::span<const float> scales,
                       std::span<const std::int32_t> topk_idx, std::uint32_t tokens);
  // recv_x: [layout.recv_rows][token bytes]; recv_scales: [recv_rows][num_scales];
  // expert_count: [local experts]. Local expert e's rows start at
  // receive_plan().expert_begin[e]; padding rows are zeroed.
  Status dispatch_recv(std::span<std::byte> recv_x, std::span<float> recv_scales,
                       std::span<std::uint32_t> expert_count);
  // expert_out: [recv_rows][hidden] of combine_input, in dispatch_recv's row order.
  Status combine_send(std::span<const std::byte> expert_out);
  // topk_weights: [tokens][top_k]; out: [tokens][hidden] of combine_output.
  // out[t] = sum over k in order of weight[t][k] * row(t, k), in FP32.
  Status combine_recv(std::span<const float> topk_weights, std::span<std::byte> out);

  // With a proxy: until it finished the last iteration (call before
  // quiesce() or reading the group's stats).
  Status wait_idle();
  [[nodiscard]] MoeGroup& group() noexcept { return group_; }

 private:
  Status notify(ProxyStep step);

  MoeGroup& group_;
  ProxyMode mode_;
  std::unique_ptr<Proxy> proxy_;
  Watcher watcher_;
  struct Pool;
  std::unique_ptr<Pool> pool_;
};

}  // namespace fabric::moe
