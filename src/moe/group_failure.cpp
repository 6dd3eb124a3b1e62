// The abort protocol: the group's first error, the ranks it names, and the notices that make
// every survivor name the rank that died rather than a survivor that stopped because of it.

#include <algorithm>
#include <string>

#include "group_impl.hpp"

namespace fabric::moe {

namespace {

std::string rank_list(const std::vector<std::uint32_t>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

// Ranks that some peer reported dead (abort notices received), if any.
std::vector<std::uint32_t> MoeGroup::Impl::reported_dead() {
  std::vector<std::uint32_t> dead;
  for (const auto r : peers)
    if (counter(ImmKind::abort, r).value() > 0) dead.push_back(r);
  return dead;
}

// Fails the group naming `ranks`, and tells every other peer so that it
// names the same ranks instead of the survivors that stopped talking to it.
Status MoeGroup::Impl::fail_naming(const std::string& what, std::vector<std::uint32_t> ranks) {
  const auto dead = reported_dead();
  std::string text;
  if (!dead.empty()) {
    ranks = dead;
    text = "moe " + what + " (epoch " + std::to_string(epoch) + "): rank(s) " +
           rank_list(ranks) + " reported dead or unreachable by a peer";
  } else {
    text = "moe " + what + " (epoch " + std::to_string(epoch) + "): nothing from rank(s) " +
           rank_list(ranks) + " within " + std::to_string(config.timeout.count()) +
           " ms (dead or unreachable)";
  }
  for (const auto p : peers) {
    if (std::find(ranks.begin(), ranks.end(), p) != ranks.end()) continue;
    for (const auto r : ranks)
      if (engine->submit_imm(imm(ImmKind::abort, r), descs[p], notices).ok()) ++notices_submitted;
  }
  return fail({Errc::timeout, text}, std::move(ranks));
}

std::vector<std::uint32_t> MoeGroup::broken_ranks() const {
  std::lock_guard lock(impl_->error_mutex);
  return impl_->broken;
}
Status MoeGroup::error() const {
  std::lock_guard lock(impl_->error_mutex);
  return impl_->error;
}

std::uint64_t MoeGroup::stray_immediates() const {
  std::uint64_t total = 0;
  // A peer's leave word is not surplus: it may come while this rank still runs (it left first).
  const std::size_t leave_first = static_cast<std::size_t>(ImmKind::leave) * impl_->n();
  for (std::size_t i = 0; i < impl_->counters.size(); ++i)
    if (impl_->counters[i] && (i < leave_first || i >= leave_first + impl_->n()))
      total += impl_->counters[i]->value();
  return total;
}

}  // namespace fabric::moe
