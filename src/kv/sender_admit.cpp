// A decoder asks for a prepared request (accept, after validate), or says it will not (decline).

#include <fmt/format.h>

#include <algorithm>

#include "arguments.hpp"
#include "sender_impl.hpp"

namespace fabric::kv {

Status Sender::Impl::validate(const Entry& e, const Peer& p, const msg::Request& q, Transfer& t) {
  const KvLayout& mine = config.layout;
  if (q.fingerprint != mine.fingerprint()) {
    return {Errc::invalid_argument,
            fmt::format("layout fingerprint {:016x} differs from the prefiller's {:016x}",
                        q.fingerprint, mine.fingerprint())};
  }
  // A prefix is fine: a decoder may compute the last prompt token itself; and it may start
  // past a prefix it holds already (src_first).
  if (q.num_tokens == 0 || std::uint64_t{q.src_first} + q.num_tokens > e.num_tokens) {
    return {Errc::invalid_argument,
            fmt::format("request for {} tokens from token {}, the prefill has {}", q.num_tokens,
                        q.src_first, e.num_tokens)};
  }
  if (q.pages.size() != pages_for(q.num_tokens, p.layout.tokens_per_page)) {
    return {Errc::invalid_argument,
            fmt::format("{} destination pages for {} tokens of {} per page", q.pages.size(),
                        q.num_tokens, p.layout.tokens_per_page)};
  }
  for (std::size_t i = 0; i < q.pages.size(); ++i) {
    if (q.pages[i] >= p.layout.num_pages) {
      return {Errc::out_of_range, fmt::format("destination page {} (position {}) of {}",
                                              q.pages[i], i, p.layout.num_pages)};
    }
  }
  const TokenRange wanted{q.src_first, q.src_first + q.num_tokens};
  auto runs = plan_runs(mine, p.layout, q.heads, wanted, q.src_first);
  if (!runs.ok()) return runs.status();
  const std::uint64_t expected = sender_imm_count(runs->size(), mine);
  if (expected != q.expected_imms) {
    return {Errc::invalid_argument,
            fmt::format("the decoder expects {} immediates, this prefiller's plan makes {}",
                        q.expected_imms, expected)};
  }
  if (e.pages.size() == pages_for(e.num_tokens, mine.tokens_per_page)) {
    auto batch = make_batch(mine, e.pages, p.layout, q.pages, *runs);
    if (!batch.ok()) return batch.status();
    t.cached_range = wanted;
    t.cached = std::move(*batch);
  }  // else pages still to come (add_pages): each chunk plans its own batch
  t.align = chunk_alignment(mine, p.layout);
  for (const auto& [layer, range] : e.chunks) {
    const std::uint32_t end = std::min(range.end, wanted.end);
    if (end != wanted.end && end > wanted.begin && end % t.align != 0) {
      return {Errc::invalid_argument,
              fmt::format("a chunk ends at token {}, not a multiple of {}", range.end, t.align)};
    }
  }
  if (q.writes_tail && e.tail &&
      q.tail_bytes >
          e.tail->mr.size() - std::min<std::uint64_t>(e.tail->offset, e.tail->mr.size())) {
    return {Errc::out_of_range, fmt::format("tail of {} bytes, the prefiller has {}", q.tail_bytes,
                                            e.tail->mr.size() - e.tail->offset)};
  }
  return Status::success();
}

void Sender::Impl::accept(Actions& a, const std::string& id, Entry& e, std::uint64_t peer,
                          msg::Request q) {
  if (is_terminal(e.status.state) || e.local_cancel ||
      e.transfers.size() + e.declined >= e.receivers) {
    reply(a, peer,
          msg::Reject{id, Status(Errc::invalid_argument,
                                 fmt::format("request {} is not open for another decoder here",
                                             id))});
    return;
  }
  auto t = std::make_unique<Transfer>();
  t->peer = peer;
  t->req = std::move(q);
  if (auto st = validate(e, *peers.find(peer), t->req, *t); !st.ok()) {
    reply(a, peer, msg::Reject{id, st});
    return;
  }
  Transfer& tr = *e.transfers.emplace_back(std::move(t));
  reply(a, peer, msg::Accept{id});
  if (e.status.state == State::waiting) a.note(id, e.status, {State::transferring, {}});
  for (const auto& [layer, range] : e.chunks) {
    if (auto st = queue_chunk(a, id, e, tr, layer, range); !st.ok()) {
      stop_transfer(tr, st);
      break;
    }
  }
  if (!tr.stopping && ready_for_tail(e, tr)) queue_tail(a, id, e, tr);
  check_transfer(a, id, e, tr);
}

// One receiver fewer to wait for. A decoder that asked already is not declining (its transfer
// runs or ended); nor is a second DECLINE from one decoder.
void Sender::Impl::decline(Actions& a, const std::string& id, Entry& e, std::uint64_t from) {
  for (const auto& t : e.transfers) {
    if (t->peer == from) return;
  }
  if (is_terminal(e.status.state) || e.transfers.size() + e.declined >= e.receivers) return;
  ++e.declined;
  check_entry(a, id, e);
}

}  // namespace fabric::kv
