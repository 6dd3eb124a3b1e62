// Receiver::request and Receiver::decline: the plan of a request over its sources (one leg
// each), its immediate and expected count, and the REQUEST (or DECLINE) sent to each source.

#include <fmt/format.h>

#include <limits>

#include "arguments.hpp"
#include "receiver_impl.hpp"

namespace fabric::kv {

namespace {
constexpr std::string_view kSide = "KV receiver";
}  // namespace

Status Receiver::Impl::check_source(std::uint32_t s) const {
  if (!sources.joined(s)) {
    return {Errc::not_found, fmt::format("KV receiver: source {} is not connected", s)};
  }
  if (!sources[s].alive) {
    return {Errc::invalid_argument, fmt::format("KV receiver: source {} is dead", s)};
  }
  return Status::success();
}

Result<std::uint32_t> Receiver::Impl::take_imm() {
  for (std::uint32_t tried = 0; tried < imms.count(); ++tried) {
    const std::uint32_t imm = imms.first() + next_imm;
    next_imm = (next_imm + 1) % imms.count();
    if (!by_imm.contains(imm)) return imm;
  }
  return Status(Errc::out_of_range,
                fmt::format("KV receiver: every immediate of its block \"{}\" [{:#x}, +{}) is "
                            "held by a request in flight or one whose writes never all landed",
                            imms.owner(), imms.first(), imms.count()));
}

Result<std::uint64_t> Receiver::request(std::string id, std::vector<std::uint32_t> pages,
                                        std::uint32_t num_tokens,
                                        std::span<const std::uint32_t> source_list,
                                        std::optional<Tail> tail, std::uint32_t src_first) {
  auto& im = *impl_;
  const KvLayout& mine = im.config.layout;
  if (auto st = check_id(kSide, id); !st.ok()) return st;
  if (num_tokens == 0 || source_list.empty() ||
      std::uint64_t{src_first} + num_tokens > std::numeric_limits<std::uint32_t>::max()) {
    return Status(Errc::invalid_argument, "KV receiver: a request needs tokens and sources");
  }
  if (pages.size() != pages_for(num_tokens, mine.tokens_per_page)) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV receiver: {} pages for {} tokens of {} per page", pages.size(),
                              num_tokens, mine.tokens_per_page));
  }
  if (auto st = check_pages(kSide, pages, mine.num_pages); !st.ok()) return st;
  if (tail) {
    if (tail->region >= im.config.regions.size() ||
        tail->offset + tail->bytes > im.config.regions[tail->region].length) {
      return Status(Errc::out_of_range, "KV receiver: tail outside its region");
    }
  }
  Impl::Entry entry;
  std::vector<std::pair<NetAddr, msg::Request>> sends;
  std::uint32_t imm = 0;
  std::uint64_t total = 0;
  {
    std::lock_guard lock(im.mutex);
    if (auto st = im.entries.check_new(id); !st.ok()) return st;
    std::vector<HeadRange> held;
    for (std::uint32_t s : source_list) {
      if (auto st = im.check_source(s); !st.ok()) return st;
      const KvLayout& l = im.sources[s].layout;
      held.push_back({l.head_begin, l.head_begin + l.num_heads});
    }
    auto routes = plan_routes(held, HeadRange{mine.head_begin, mine.head_begin + mine.num_heads},
                              im.config.spread);
    if (!routes.ok()) return routes.status();
    auto taken = im.take_imm();
    if (!taken.ok()) return taken.status();
    imm = *taken;
    for (std::size_t i = 0; i < routes->size(); ++i) {
      const Route& r = (*routes)[i];
      const std::uint32_t s = source_list[r.source];
      const KvLayout& src = im.sources[s].layout;
      auto runs = plan_runs(src, mine, r.heads, TokenRange{src_first, src_first + num_tokens},
                            src_first);
      if (!runs.ok()) return runs.status();
      Impl::Leg leg{s, r.heads, sender_imm_count(runs->size(), src), false, false};
      entry.total += leg.expected;
      msg::Request q;
      q.id = id;
      q.imm = imm;
      q.fingerprint = mine.fingerprint();
      q.num_tokens = num_tokens;
      q.src_first = src_first;
      q.heads = r.heads;
      q.expected_imms = leg.expected;
      if (tail && i == 0) {  // one source writes the tail
        q.writes_tail = true;
        q.tail = im.sources[s].regions[tail->region].desc;
        q.tail_offset = tail->offset;
        q.tail_bytes = tail->bytes;
      }
      q.pages = pages;
      sends.emplace_back(im.sources[s].addr, std::move(q));
      entry.legs.push_back(leg);
    }
    entry.pages = std::move(pages);
    entry.num_tokens = num_tokens;
    entry.imm = imm;
    total = entry.total;
    im.entries.add(id, std::move(entry));
    im.by_imm[imm] = id;
  }
  std::weak_ptr<Impl> weak = impl_;
  if (auto st = im.engine.expect_imm_count(
          imm, total, [weak](std::uint32_t value, std::uint64_t) {
            if (auto self = weak.lock()) self->on_count(value);
          });
      !st.ok()) {
    std::lock_guard lock(im.mutex);
    im.entries.erase(id);
    im.by_imm.erase(imm);
    return st;
  }
  Outbox a;
  for (auto& [to, q] : sends) {
    if (auto st = im.link.send(to, q); !st.ok()) {
      std::lock_guard lock(im.mutex);
      Impl::Entry* e = im.entries.find(id);
      if (e == nullptr) break;
      for (auto& l : e->legs) {
        if (im.sources[l.source].addr == to) l.quiet = true;  // never sent
      }
      im.begin_stop(a, id, *e,
                    Status(st.code(), "KV receiver: sending the request: " + st.message()), false);
    }
  }
  im.deliver(a);
  return total;
}

Status Receiver::decline(std::string_view id, std::span<const std::uint32_t> source_list) {
  auto& im = *impl_;
  if (auto st = check_id(kSide, id); !st.ok()) return st;
  std::vector<NetAddr> to;
  {
    std::lock_guard lock(im.mutex);
    for (std::uint32_t s : source_list) {
      if (auto st = im.check_source(s); !st.ok()) return st;
      to.push_back(im.sources[s].addr);
    }
  }
  for (const NetAddr& addr : to) {
    if (auto st = im.link.send(addr, msg::Decline{std::string(id)}); !st.ok()) return st;
  }
  return Status::success();
}

}  // namespace fabric::kv
