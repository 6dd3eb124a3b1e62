#include "traffic.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "fabric_test/data.hpp"
#include "field_config.hpp"
#include "messages.hpp"

namespace fabric::field {

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxThreads = 4;
constexpr std::uint64_t kSrcBytes = 4 << 20;
constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kReadMax = 64 * 1024;

std::string where(const Incarnation& peer, const char* what, std::uint64_t offset,
                  std::uint64_t length) {
  return "peer " + std::to_string(peer.id()) + ": an ok " + what + " of " +
         std::to_string(length) + " bytes at offset " + std::to_string(offset) +
         " does not hold the bytes sent";
}
}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::single: return "single_write";
    case Kind::paged: return "paged_write";
    case Kind::send: return "send";
    case Kind::imm: return "imm";
    case Kind::read: return "single_read";
  }
  return "?";
}

std::size_t metrics_index(Kind kind) {
  for (std::size_t i = 0; i < kRequestKinds; ++i) {
    if (request_kind_name(i) == kind_name(kind)) return i;
  }
  return kRequestKinds;
}

struct Traffic::Request {
  Kind kind = Kind::single;
  std::shared_ptr<Incarnation> peer;
  std::size_t thread = 0;
  std::optional<std::uint32_t> chunk;
  std::optional<std::uint32_t> read_slot;
  std::uint64_t dst_offset = 0;
  std::uint64_t src_offset = 0;
  std::uint64_t length = 0;  // the payload, as metrics() counts it
  std::vector<std::uint32_t> src_pages;
  std::vector<std::uint32_t> dst_pages;
  std::uint64_t seq = 0;
};

Traffic::Traffic(TransferEngine& engine, std::size_t slots, std::uint64_t seed)
    : engine_(engine), seed_(seed), src_(kSrcBytes), reads_(kMaxThreads * kWindow * kReadMax),
      slots_(slots) {
  test::fill_random(src_, seed);
  auto src = engine_.reg_mr(src_.data(), src_.size());
  auto reads = engine_.reg_mr(reads_.data(), reads_.size());
  if (!src.ok() || !reads.ok()) {
    throw std::runtime_error("Traffic: reg_mr: " + src.status().to_string() + " / " +
                             reads.status().to_string());
  }
  src_mr_ = src->handle;
  reads_mr_ = reads->handle;
}

Traffic::~Traffic() { (void)stop(kWait); }

void Traffic::start(std::size_t threads) {
  threads_ = std::min(threads, kMaxThreads);
  for (std::size_t t = 0; t < threads_; ++t) {
    windows_.push_back(std::make_unique<std::counting_semaphore<kWindow>>(kWindow));
    std::vector<std::uint32_t> slots;
    for (std::uint32_t s = 0; s < kWindow; ++s) slots.push_back(static_cast<std::uint32_t>(t * kWindow + s));
    free_reads_.push_back(std::move(slots));
  }
  for (std::size_t t = 0; t < threads_; ++t) workers_.emplace_back([this, t] { run(t); });
}

bool Traffic::stop(std::chrono::milliseconds bound) {
  stopping_ = true;
  changed_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, bound, [&] { return outstanding_.load() == 0; });
}

std::shared_ptr<Incarnation> Traffic::swap(std::size_t slot, std::shared_ptr<Incarnation> next) {
  std::lock_guard lock(mutex_);
  std::swap(slots_[slot], next);
  changed_.notify_all();
  return next;
}

std::shared_ptr<Incarnation> Traffic::at(std::size_t slot) {
  std::lock_guard lock(mutex_);
  return slots_[slot];
}

bool Traffic::wait_ok(const Incarnation& peer, std::uint64_t n, std::chrono::milliseconds bound) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, bound, [&] { return peer.ok.load() >= n; });
}

bool Traffic::wait_idle(const Incarnation& peer, std::chrono::milliseconds bound) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, bound, [&] { return peer.outstanding.load() == 0; });
}

bool Traffic::wait_released(std::chrono::milliseconds bound) {
  // Nothing signals the provider giving operations back: polled, bounded.
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (engine_.metrics().held_after_report != 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::string Traffic::first_refusal() {
  std::lock_guard lock(mutex_);
  return first_refusal_;
}

void Traffic::run(std::size_t thread) {
  std::mt19937_64 rng(seed_ * 7919 + thread);
  auto& window = *windows_[thread];
  while (!stopping_.load()) {
    if (!window.try_acquire_for(std::chrono::milliseconds(50))) continue;
    if (!submit(thread, rng, window)) window.release();
  }
}

bool Traffic::submit(std::size_t thread, std::mt19937_64& rng,
                     std::counting_semaphore<kWindow>& /*window*/) {
  auto r = std::make_shared<Request>();
  r->thread = thread;
  {
    std::unique_lock lock(mutex_);
    std::vector<std::size_t> live;
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      if (slots_[s]) live.push_back(s);
    }
    if (live.empty()) {
      // Nothing to send to while every slot restarts: wait for a swap, bounded.
      changed_.wait_for(lock, std::chrono::milliseconds(50));
      return false;
    }
    r->peer = slots_[live[rng() % live.size()]];
  }
  Incarnation& peer = *r->peer;
  const unsigned pick = rng() % 100;
  r->kind = pick < 35 ? Kind::single : pick < 55 ? Kind::paged : pick < 75 ? Kind::send
          : pick < 85 ? Kind::imm : Kind::read;
  if (r->kind == Kind::send && peer.next_send.load() >= RegionHeader::kMaxSends) r->kind = Kind::imm;
  if (r->kind == Kind::single || r->kind == Kind::paged) {
    r->chunk = peer.take_chunk();
    if (!r->chunk) return false;  // cannot happen with kWindow * threads < kChunks
  }
  if (r->kind == Kind::read) {
    std::lock_guard lock(mutex_);
    auto& free = free_reads_[thread];
    r->read_slot = free.back();
    free.pop_back();
  }

  peer.outstanding.fetch_add(1);
  outstanding_.fetch_add(1);
  OnDone done(DoneCallback([this, r](const Status& st) { complete(r, st); }));
  Status st;
  switch (r->kind) {
    case Kind::single: {
      const unsigned size_class = rng() % 10;
      const std::uint64_t max = size_class < 4 ? 256 : size_class < 7 ? 4096
                              : size_class < 9 ? 64 * 1024 : kChunk;
      r->length = 1 + rng() % max;
      r->dst_offset = *r->chunk * kChunk + rng() % (kChunk - r->length + 1);
      r->src_offset = rng() % (kSrcBytes - r->length + 1);
      SingleWrite w;
      w.length = r->length;
      w.src = {src_mr_, r->src_offset};
      w.dst = {peer.dst(), r->dst_offset};
      st = engine_.submit_single_write(w, std::move(done));
      break;
    }
    case Kind::paged: {
      const std::uint32_t n = 1 + rng() % 16;
      std::vector<std::uint32_t> all(kChunk / kPage);
      for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = i;
      std::shuffle(all.begin(), all.end(), rng);
      r->dst_pages.assign(all.begin(), all.begin() + n);
      for (std::uint32_t i = 0; i < n; ++i) r->src_pages.push_back(rng() % (kSrcBytes / kPage));
      r->length = n * kPage;
      PagedWrite w;
      w.page_length = kPage;
      w.src = src_mr_;
      w.src_pages = {r->src_pages, kPage, 0};
      w.dst = peer.dst();
      w.dst_pages = {r->dst_pages, kPage, *r->chunk * kChunk};
      st = engine_.submit_paged_writes(w, std::move(done));
      break;
    }
    case Kind::send: {
      r->seq = peer.next_send.fetch_add(1);
      const auto message = make_message(r->seq, peer.id(), kMinMessage + rng() % (kMaxMessage - kMinMessage + 1));
      r->length = message.size();
      st = engine_.submit_send(peer.addr(), message, std::move(done));
      break;
    }
    case Kind::imm:
      st = engine_.submit_imm(kImm, peer.dst(), std::move(done));
      break;
    case Kind::read: {
      r->length = 1 + rng() % kReadMax;
      r->src_offset = rng() % (kReadArea - r->length + 1);
      SingleRead rd;
      rd.length = r->length;
      rd.src = {peer.dst(), kChunk * kChunks + r->src_offset};
      rd.dst = {reads_mr_, *r->read_slot * kReadMax};
      st = engine_.submit_single_read(rd, std::move(done));
      break;
    }
  }
  if (st.ok()) {
    tally_[static_cast<std::size_t>(r->kind)].accepted.fetch_add(1);
    return true;
  }
  // Refused: no completion will come, so undo what the request held.
  if (r->chunk) peer.give_chunk(*r->chunk);
  if (r->read_slot) {
    std::lock_guard lock(mutex_);
    free_reads_[thread].push_back(*r->read_slot);
  }
  peer.outstanding.fetch_sub(1);
  outstanding_.fetch_sub(1);
  if (st.code() == Errc::again) {
    std::this_thread::yield();  // back-pressure: the engine's window is full
  } else {
    refused_.fetch_add(1);
    std::lock_guard lock(mutex_);
    if (first_refusal_.empty()) first_refusal_ = std::string(kind_name(r->kind)) + ": " + st.to_string();
  }
  return false;
}

void Traffic::check(Request& r) {
  Incarnation& peer = *r.peer;
  const std::byte* mem = peer.memory().data();
  switch (r.kind) {
    case Kind::single:
      if (std::memcmp(mem + r.dst_offset, src_.data() + r.src_offset, r.length) != 0) {
        peer.record_wrong(where(peer, "single write", r.dst_offset, r.length));
      }
      break;
    case Kind::paged:
      for (std::size_t i = 0; i < r.dst_pages.size(); ++i) {
        const std::uint64_t at = *r.chunk * kChunk + r.dst_pages[i] * kPage;
        if (std::memcmp(mem + at, src_.data() + r.src_pages[i] * kPage, kPage) != 0) {
          peer.record_wrong(where(peer, "paged write's page", at, kPage));
          break;
        }
      }
      break;
    case Kind::send:
      peer.record_ok_send(r.seq);  // checked when the peer quits
      break;
    case Kind::imm:
      break;
    case Kind::read:
      if (std::memcmp(reads_.data() + *r.read_slot * kReadMax,
                      peer.read_area().data() + r.src_offset, r.length) != 0) {
        peer.record_wrong(where(peer, "read", r.src_offset, r.length));
      }
      break;
  }
}

void Traffic::complete(const std::shared_ptr<Request>& r, const Status& status) {
  Incarnation& peer = *r->peer;
  KindTally& tally = tally_[static_cast<std::size_t>(r->kind)];
  if (status.ok()) {
    check(*r);
    tally.ok.fetch_add(1);
    tally.bytes_ok.fetch_add(r->kind == Kind::imm ? 0 : r->length);
    peer.ok.fetch_add(1);
  } else {
    tally.failed.fetch_add(1);
    peer.failed.fetch_add(1);
    peer.record_failure(kind_name(r->kind), status);
  }
  if (r->chunk) peer.give_chunk(*r->chunk);
  {
    std::lock_guard lock(mutex_);
    if (r->read_slot) free_reads_[r->thread].push_back(*r->read_slot);
    peer.outstanding.fetch_sub(1);
    outstanding_.fetch_sub(1);
  }
  windows_[r->thread]->release();
  changed_.notify_all();
}

}  // namespace fabric::field
