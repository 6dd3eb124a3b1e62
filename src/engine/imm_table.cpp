#include "engine/imm_table.hpp"

namespace fabric::engine {

void ImmTable::arrive(std::uint32_t imm, std::uint64_t n) {
  Entry& e = entries_[imm];
  if (e.counter) {
    e.counter->add(n);
    return;
  }
  e.unclaimed += n;
  serve(imm, e);
}

void ImmTable::expect(std::uint32_t imm, std::uint64_t count, ImmCallback callback) {
  Entry& e = entries_[imm];
  e.expectations.push_back({count, std::move(callback)});
  serve(imm, e);
}

void ImmTable::serve(std::uint32_t imm, Entry& e) {
  while (!e.expectations.empty() && e.unclaimed >= e.expectations.front().count) {
    Expectation x = std::move(e.expectations.front());
    e.expectations.pop_front();
    e.unclaimed -= x.count;
    fire_(std::move(x.callback), imm, x.count);
  }
}

void ImmTable::attach(const std::shared_ptr<ImmCounter>& counter) {
  Entry& e = entries_[counter->imm()];
  e.counter = counter;
  if (e.unclaimed > 0) {
    counter->add(e.unclaimed);
    e.unclaimed = 0;
  }
}

void ImmTable::detach(std::uint32_t imm) {
  auto it = entries_.find(imm);
  if (it == entries_.end() || !it->second.counter) return;
  Entry& e = it->second;
  std::uint64_t left = e.counter->value();
  // Take what is left atomically so a concurrent consumer cannot double-spend it.
  while (left > 0 && !e.counter->try_consume(left)) left = e.counter->value();
  e.counter.reset();
  e.unclaimed += left;
  serve(imm, e);
}

std::uint64_t ImmTable::unclaimed(std::uint32_t imm) const {
  auto it = entries_.find(imm);
  return it == entries_.end() ? 0 : it->second.unclaimed;
}

}  // namespace fabric::engine
