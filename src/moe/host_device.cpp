#include "fabric/moe/host_device.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fabric/threads.hpp"

namespace fabric::moe {

float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(std::uint32_t{bits} << 16);
}

std::uint16_t float_to_bf16(float value) noexcept {
  std::uint32_t b = std::bit_cast<std::uint32_t>(value);
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays a (quiet) NaN
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<std::uint16_t>(b >> 16);
}

namespace {
CpuSet helper_cpus(const TransferEngine* engine) {
  if (engine != nullptr) return engine->thread_cpus().cpus;
  auto chosen = engine_thread_cpus();
  return chosen ? std::move(chosen->cpus) : CpuSet{};
}
}  // namespace

// Runs fn(begin, end) over [0, count) split into one contiguous part per
// thread; the caller takes part 0. Which thread does which part never changes
// a result: every output element is written by exactly one part.
struct HostDevice::Pool {
  // Helpers run where the engine's threads do, not on the creator's (maybe pinned) CPU.
  Pool(std::uint32_t threads, const CpuSet& cpus) {
    for (std::uint32_t i = 1; i < threads; ++i) {
      workers.emplace_back([this, i, cpus] {
        const PlacedThread placed("fabric-moe" + std::to_string(i), cpus);
        loop(i);
      });
    }
  }
  ~Pool() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (auto& w : workers) w.join();
  }

  void run(std::size_t count, const std::function<void(std::size_t, std::size_t)>& fn) {
    const std::size_t parts = workers.size() + 1;
    if (parts == 1 || count < 2 * parts) {
      if (count > 0) fn(0, count);
      return;
    }
    {
      std::lock_guard lock(mutex);
      job = &fn;
      job_count = count;
      pending = workers.size();
      ++generation;
    }
    wake.notify_all();
    fn(0, count / parts);
    std::unique_lock lock(mutex);
    finished.wait(lock, [&] { return pending == 0; });
    job = nullptr;
  }

  void loop(std::size_t index) {
    std::uint64_t seen = 0;
    for (;;) {
      const std::function<void(std::size_t, std::size_t)>* fn = nullptr;
      std::size_t count = 0;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping) return;
        seen = generation;
        fn = job;
        count = job_count;
      }
      const std::size_t parts = workers.size() + 1;
      (*fn)(count * index / parts, count * (index + 1) / parts);
      std::lock_guard lock(mutex);
      if (--pending == 0) finished.notify_one();
    }
  }

  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake, finished;
  const std::function<void(std::size_t, std::size_t)>* job = nullptr;
  std::size_t job_count = 0;
  std::size_t pending = 0;
  std::uint64_t generation = 0;
  bool stopping = false;
};

HostDevice::HostDevice(MoeGroup& group, ProxyMode mode, TransferEngine* engine)
    : group_(group),
      mode_(mode),
      pool_(std::make_unique<Pool>(group.config().host_threads, helper_cpus(engine))) {
  if (mode_ == ProxyMode::inline_steps) return;
  proxy_ = std::make_unique<Proxy>(group_);
  if (mode_ == ProxyMode::watcher) {
    auto w = engine != nullptr ? proxy_->watch(*engine)
                               : Result<Watcher>(Status(Errc::invalid_argument, "no engine"));
    if (w.ok()) watcher_ = std::move(w.value());
    else mode_ = ProxyMode::thread;  // no watcher: signal the thread directly
  }
}

HostDevice::~HostDevice() {
  watcher_.release();
  proxy_.reset();
}

Status HostDevice::notify(ProxyStep step) {
  if (mode_ == ProxyMode::watcher) {
    // What a kernel does: one 64-bit store of epoch * 4 + step.
    std::atomic_ref<std::uint64_t>(*watcher_.word())
        .store(std::uint64_t{group_.epoch()} * 4 + static_cast<std::uint32_t>(step),
               std::memory_order_release);
  } else {
    proxy_->signal(step);
  }
  return Status::success();
}

namespace {
Status too_small(const char* what, std::size_t have, std::size_t need) {
  return {Errc::invalid_argument, std::string("moe: ") + what + " holds " + std::to_string(have) +
                                      " elements, " + std::to_string(need) + " needed"};
}
}  // namespace

Status HostDevice::dispatch_send(std::span<const std::byte> x, std::span<const float> scales,
                                 std::span<const std::int32_t> topk_idx, std::uint32_t tokens) {
  const auto& c = group_.config();
  const std::size_t tb = token_bytes(c);
  if (x.size() < tokens * tb) return too_small("x (bytes)", x.size(), tokens * tb);
  if (scales.size() < std::size_t{tokens} * c.num_scales)
    return too_small("scales", scales.size(), std::size_t{tokens} * c.num_scales);
  if (proxy_) {
    if (auto st = proxy_->wait_idle(); !st.ok()) return st;
  }
  auto plan = group_.begin_dispatch(topk_idx, tokens);
  if (!plan.ok()) return plan.status();
  const SendPlan& p = **plan;
  const auto& layout = group_.layout(c.rank);
  std::byte* arena = group_.arena(c.rank);
  const std::size_t sb = scale_bytes(c);

  // Slots of destination d in order; the first private_tokens of each go first.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> early, late;  // (d, j)
  for (std::uint32_t d = 0; d < c.world_size; ++d)
    for (std::uint32_t j = 0; j < p.count[d]; ++j)
      (j < layout.private_tokens ? early : late).emplace_back(d, j);
  const auto stage = [&](const std::vector<std::pair<std::uint32_t, std::uint32_t>>& slots) {
    pool_->run(slots.size(), [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        const auto [d, j] = slots[i];
        const std::uint32_t t = p.token[p.first[d] + j];
        std::byte* slot = arena + p.slot(layout, d, j);
        std::memcpy(slot, x.data() + t * tb, tb);
        if (sb > 0) std::memcpy(slot + tb, scales.data() + std::size_t{t} * c.num_scales, sb);
      }
    });
  };
  stage(early);
  if (proxy_) {
    (void)notify(ProxyStep::private_staged);
    stage(late);
    return notify(ProxyStep::all_staged);
  }
  if (auto st = group_.post_private(); !st.ok()) return st;
  stage(late);
  return group_.mark_staged();
}

Status HostDevice::dispatch_recv(std::span<std::byte> recv_x, std::span<float> recv_scales,
                                 std::span<std::uint32_t> expert_count) {
  const auto& c = group_.config();
  const auto& layout = group_.layout(c.rank);
  const std::size_t tb = token_bytes(c);
  const std::size_t local = group_.placement().local_experts(c.rank);
  if (recv_x.size() < layout.recv_rows * tb)
    return too_small("recv_x (bytes)", recv_x.size(), layout.recv_rows * tb);
  if (recv_scales.size() < std::size_t{layout.recv_rows} * c.num_scales)
    return too_small("recv_scales", recv_scales.size(), std::size_t{layout.recv_rows} * c.num_scales);
  if (expert_count.size() < local) return too_small("expert_count", expert_count.size(), local);
  if (proxy_) {
    if (auto st = proxy_->wait_dispatched(); !st.ok()) return st;
  } else if (auto plan = group_.complete_dispatch(); !plan.ok()) {
    return plan.status();
  }
  const ReceivePlan& p = group_.receive_plan();
  const std::size_t sb = scale_bytes(c);
  pool_->run(p.row_slot.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t row = b; row < e; ++row) {
      const std::uint32_t slot = p.row_slot[row];
      std::byte* out = recv_x.data() + row * tb;
      float* out_scales = recv_scales.data() + row * c.num_scales;
      if (slot == ReceivePlan::kPadding) {
        std::memset(out, 0, tb);
        if (sb > 0) std::memset(out_scales, 0, sb);
        continue;
      }
      const SlotRef ref = p.slots[slot];
      const std::byte* in = group_.arena(ref.owner) + ref.offset;
      std::memcpy(out, in, tb);
      if (sb > 0) std::memcpy(out_scales, in + tb, sb);
    }
  });
  std::copy(p.expert_count.begin(), p.expert_count.end(), expert_count.begin());
  return Status::success();
}

Status HostDevice::combine_send(std::span<const std::byte> expert_out) {
  const auto& c = group_.config();
  const auto& layout = group_.layout(c.rank);
  const std::size_t rb = std::size_t{c.hidden} * element_bytes(c.combine_input);
  if (expert_out.size() < layout.recv_rows * rb)
    return too_small("expert_out (bytes)", expert_out.size(), layout.recv_rows * rb);
  const ReceivePlan& p = group_.receive_plan();
  std::byte* arena = group_.arena(c.rank);
  pool_->run(p.gather_row.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i)
      std::memcpy(arena + layout.exchange_row(i), expert_out.data() + p.gather_row[i] * rb, rb);
  });
  if (proxy_) return notify(ProxyStep::rows_gathered);  // the proxy copies to node peers too
  // The proxy posts the inter-node WRITEs before any direct copy starts.
  if (auto st = group_.post_combine(); !st.ok()) return st;
  if (auto st = group_.push_combine_direct(); !st.ok()) return st;
  return group_.mark_combine_pushed();
}

Status HostDevice::combine_recv(std::span<const float> topk_weights, std::span<std::byte> out) {
  const auto& c = group_.config();
  const SendPlan& p = group_.send_plan();
  const std::size_t tokens = p.group_tokens;
  const std::size_t r = c.top_k;
  const std::size_t h = c.hidden;
  const std::size_t ob = element_bytes(c.combine_output);
  if (topk_weights.size() < tokens * r) return too_small("topk_weights", topk_weights.size(), tokens * r);
  if (out.size() < tokens * h * ob) return too_small("out (bytes)", out.size(), tokens * h * ob);
  if (proxy_) {
    if (auto st = proxy_->wait_combined(); !st.ok()) return st;
  } else if (auto st = group_.await_combine(); !st.ok()) {
    return st;
  }
  const auto& layout = group_.layout(c.rank);
  const std::byte* arena = group_.arena(c.rank);
  const bool bf16_in = c.combine_input == ElementType::bf16;
  const bool bf16_out = c.combine_output == ElementType::bf16;
  pool_->run(tokens, [&](std::size_t b, std::size_t e) {
    std::vector<float> acc(h);
    for (std::size_t t = b; t < e; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::size_t k = 0; k < r; ++k) {
        const std::int32_t row = p.combine_row[t * r + k];
        if (row < 0) continue;
        const float w = topk_weights[t * r + k];
        const std::byte* in = arena + layout.combine_row(static_cast<std::uint64_t>(row));
        if (bf16_in) {
          const auto* v = reinterpret_cast<const std::uint16_t*>(in);
          for (std::size_t i = 0; i < h; ++i) acc[i] = acc[i] + w * bf16_to_float(v[i]);
        } else {
          const auto* v = reinterpret_cast<const float*>(in);
          for (std::size_t i = 0; i < h; ++i) acc[i] = acc[i] + w * v[i];
        }
      }
      std::byte* o = out.data() + t * h * ob;
      if (bf16_out) {
        auto* ov = reinterpret_cast<std::uint16_t*>(o);
        for (std::size_t i = 0; i < h; ++i) ov[i] = float_to_bf16(acc[i]);
      } else {
        std::memcpy(o, acc.data(), h * 4);
      }
    }
  });
  if (proxy_) return notify(ProxyStep::rows_consumed);
  return group_.finish_combine();
}

Status HostDevice::wait_idle() { return proxy_ ? proxy_->wait_idle() : Status::success(); }

}  // namespace fabric::moe
