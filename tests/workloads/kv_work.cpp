#include "kv_work.hpp"

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

namespace fabric::workloads::test {

namespace {

using Clock = std::chrono::steady_clock;

kv::KvLayout layout() {
  auto shard = kv::shard_heads(2, 1, 0);
  return kv::vllm_nhd(kv::CacheShape{2, 8, 4, 2, *shard, 16, 2});
}

std::uint32_t all_tokens(const kv::KvLayout& l) { return l.num_pages * l.tokens_per_page; }

std::vector<std::uint32_t> all_pages(const kv::KvLayout& l) {
  std::vector<std::uint32_t> pages(l.num_pages);
  for (std::uint32_t p = 0; p < l.num_pages; ++p) pages[p] = p;
  return pages;
}

// Each region as large as the parts based in it.
std::vector<std::vector<std::byte>> region_memory(const kv::KvLayout& l) {
  std::vector<std::size_t> size(l.num_regions, 0);
  for (const auto& b : l.bases) size[b.region] = std::max<std::size_t>(size[b.region], b.offset + l.span_bytes());
  std::vector<std::vector<std::byte>> out;
  for (auto n : size) out.emplace_back(n);
  return out;
}

std::byte pattern(const std::string& id, std::uint32_t region, std::uint64_t offset) {
  std::uint32_t h = 2166136261u;
  for (char c : id) h = (h ^ static_cast<std::uint8_t>(c)) * 16777619u;
  return static_cast<std::byte>((h + region * 7919u + offset * 131u + (offset >> 8)) & 0xffu);
}

std::string request_id(std::uint32_t sender, std::uint32_t k) {
  return "s" + std::to_string(sender) + "-" + std::to_string(k);
}

}  // namespace

// The sender's request states, from its on_state callback.
struct KvSenderWork::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, kv::RequestStatus> states;
};

KvSenderWork::~KvSenderWork() { sender_.reset(); }

Result<std::unique_ptr<KvSenderWork>> KvSenderWork::create(TransferEngine& engine) {
  std::unique_ptr<KvSenderWork> w(new KvSenderWork());
  const auto l = layout();
  w->memory_ = region_memory(l);
  w->state_ = std::make_shared<State>();
  kv::SenderConfig c;
  c.layout = l;
  for (auto& m : w->memory_) {
    auto reg = engine.reg_mr(m.data(), m.size());
    if (!reg.ok()) return reg.status();
    c.regions.push_back(reg->handle);
  }
  c.on_state = [state = w->state_](const std::string& id, const kv::RequestStatus& s) {
    std::lock_guard lock(state->mutex);
    state->states[id] = s;
    state->changed.notify_all();
  };
  auto sender = kv::Sender::create(engine, std::move(c));
  if (!sender.ok()) return sender.status();
  w->sender_ = std::move(sender).value();
  return w;
}

Outcome KvSenderWork::run(std::uint32_t sender, std::uint32_t count, std::chrono::milliseconds bound) {
  Outcome out;
  const auto l = layout();
  for (std::uint32_t k = 0; k < count && out.ok(); ++k) {
    const std::string id = request_id(sender, k);
    // The previous request has completed, so its pages are free to refill.
    for (std::uint32_t r = 0; r < memory_.size(); ++r)
      for (std::size_t o = 0; o < memory_[r].size(); ++o) memory_[r][o] = pattern(id, r, o);
    if (auto st = sender_->prepare(id, all_pages(l), all_tokens(l)); !st.ok()) {
      out.fail("prepare " + id + ": " + st.to_string());
      break;
    }
    for (std::uint32_t layer = 0; layer < l.num_layers; ++layer) {
      if (auto st = sender_->layer_done(id, layer); !st.ok()) out.fail("layer_done " + id + ": " + st.to_string());
    }
    std::unique_lock lock(state_->mutex);
    const bool ended = state_->changed.wait_for(lock, bound, [&] {
      auto it = state_->states.find(id);
      return it != state_->states.end() && kv::is_terminal(it->second.state);
    });
    if (!ended) {
      out.fail("sender: " + id + " not terminal within the bound");
      break;
    }
    const auto s = state_->states[id];
    lock.unlock();
    if (s.state != kv::State::done) {
      out.fail("sender: " + id + " " + std::string(kv::state_name(s.state)) + ": " + s.error.to_string());
      break;
    }
    (void)sender_->release(id);
    ++out.done;
  }
  return out;
}

Result<std::unique_ptr<KvReceiverWork>> KvReceiverWork::create(TransferEngine& engine, const Plan& plan) {
  std::unique_ptr<KvReceiverWork> w(new KvReceiverWork());
  const auto l = layout();
  w->memory_ = region_memory(l);
  kv::ReceiverConfig c;
  c.layout = l;
  for (auto& m : w->memory_) c.regions.push_back(kv::RegionMemory{m.data(), m.size()});
  // The victim is dead for good: no write of it can land, so its requests need not wait out
  // the default quarantine (shm cannot fence).
  c.quarantine = std::chrono::milliseconds(1000);
  (void)plan;
  auto receiver = kv::Receiver::create(engine, std::move(c));
  if (!receiver.ok()) return receiver.status();
  w->receiver_ = std::move(receiver).value();
  return w;
}

Status KvReceiverWork::connect(const std::vector<NetAddr>& senders, std::chrono::milliseconds bound) {
  for (const auto& a : senders) {
    auto s = receiver_->connect(a, bound);
    if (!s.ok()) return s.status();
    sources_.push_back(*s);
  }
  return {};
}

Outcome KvReceiverWork::run(const Plan& plan) {
  Outcome out;
  const auto l = layout();
  bool victim_dead = false;
  for (std::uint32_t k = 0; k < plan.kv_requests && out.ok(); ++k) {
    for (std::uint32_t sender = 0; sender < sources_.size() && out.ok(); ++sender) {
      const bool victims = static_cast<std::int32_t>(sender) == plan.victim;
      if (victims && victim_dead) continue;
      const bool must_fail = victims && k == plan.kv_before_death;
      const std::string id = request_id(sender, k);
      const std::uint32_t source[] = {sources_[sender]};
      const auto t0 = Clock::now();
      auto expected = receiver_->request(id, all_pages(l), all_tokens(l), source);
      if (!expected.ok()) {
        out.fail("request " + id + ": " + expected.status().to_string());
        break;
      }
      auto got = receiver_->wait(id, plan.wait_bound);
      if (!got.ok()) {
        out.fail("wait " + id + ": " + got.status().to_string());
        break;
      }
      if (must_fail) {
        if (got->state != kv::State::failed || got->error.ok()) {
          out.fail(id + " to the dead sender ended " + std::string(kv::state_name(got->state)) + ", not failed");
          break;
        }
        ++out.failed;
        out.fail_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
        victim_dead = true;
        (void)receiver_->release(id);
        continue;
      }
      if (got->state != kv::State::done) {
        out.fail(id + " " + std::string(kv::state_name(got->state)) + ": " + got->error.to_string());
        break;
      }
      for (const auto& b : l.bases) {
        for (std::uint64_t o = b.offset; o < b.offset + l.span_bytes(); ++o) {
          if (memory_[b.region][o] != pattern(id, b.region, o)) {
            out.fail(id + ": region " + std::to_string(b.region) + " byte " + std::to_string(o) + " differs");
            break;
          }
        }
      }
      out.imms += *expected;
      (void)receiver_->release(id);
      if (out.ok()) ++out.done;
    }
  }
  return out;
}

}  // namespace fabric::workloads::test
