#include "engine/imm_table.hpp"

#include <fmt/format.h>

namespace fabric::engine {

void ImmTable::arrive(std::uint32_t imm, std::uint64_t n) {
  arrivals_.fetch_add(n, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  auto it = entries_.try_emplace(imm).first;
  Entry& e = it->second;
  if (e.counter && e.expectations.empty()) {
    e.counter->add(n);
    return;
  }
  e.unclaimed += n;
  serve(it);
}

void ImmTable::expect(std::uint32_t imm, std::uint64_t count, ImmCallback callback) {
  std::lock_guard lock(mutex_);
  auto it = entries_.try_emplace(imm).first;
  it->second.expectations.push_back({count, std::move(callback)});
  serve(it);
}

void ImmTable::serve(std::unordered_map<std::uint32_t, Entry>::iterator it) {
  const std::uint32_t imm = it->first;
  Entry& e = it->second;
  while (!e.expectations.empty() && e.unclaimed >= e.expectations.front().count) {
    Expectation x = std::move(e.expectations.front());
    e.expectations.pop_front();
    e.unclaimed -= x.count;
    fire_(std::move(x.callback), imm, x.count);
  }
  // An expectation can only precede a counter when the two calls raced from
  // different threads (imm_counter() refuses otherwise); it keeps its claim.
  if (e.counter && e.expectations.empty() && e.unclaimed > 0) {
    e.counter->add(e.unclaimed);
    e.unclaimed = 0;
  }
  if (e.expectations.empty() && !e.counter && e.unclaimed == 0) entries_.erase(it);
}

Status ImmTable::attach(const std::shared_ptr<ImmCounter>& counter) {
  std::lock_guard lock(mutex_);
  auto it = entries_.try_emplace(counter->imm()).first;
  Entry& e = it->second;
  if (!e.expectations.empty()) {
    const std::size_t pending = e.expectations.size();
    return {Errc::invalid_argument,
            fmt::format("imm {} has {} pending expect_imm_count expectation(s); a counter would "
                        "take the arrivals they wait for (wait for them to fire first)",
                        counter->imm(), pending)};
  }
  e.counter = counter;
  serve(it);
  return Status::success();
}

void ImmTable::detach(std::uint32_t imm) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(imm);
  if (it == entries_.end() || !it->second.counter) return;
  Entry& e = it->second;
  std::uint64_t left = e.counter->value();
  // Take what is left atomically so a concurrent consumer cannot double-spend it.
  while (left > 0 && !e.counter->try_consume(left)) left = e.counter->value();
  e.counter.reset();
  e.unclaimed += left;
  serve(it);
}

std::uint64_t ImmTable::unclaimed(std::uint32_t imm) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(imm);
  return it == entries_.end() ? 0 : it->second.unclaimed;
}

}  // namespace fabric::engine
