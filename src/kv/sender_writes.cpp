// What a transfer posts: each computed chunk of a layer as paged writes, then the tail (or a
// bare immediate) once every layer is written up to the decoder's last wanted token.

#include <algorithm>

#include "sender_impl.hpp"

namespace fabric::kv {

Status Sender::Impl::queue_chunk(Actions& a, const std::string& id, Entry& e, Transfer& t,
                                 std::uint32_t layer, TokenRange range) {
  const Peer& p = *peers.find(t.peer);
  // Only the tokens the decoder wants: [src_first, src_first + num_tokens).
  range.begin = std::max(range.begin, t.req.src_first);
  range.end = std::min(range.end, wanted_end(t));
  if (range.begin >= range.end) return Status::success();  // outside what the decoder wants
  if (!(t.cached_range == range)) {
    auto runs = plan_runs(config.layout, p.layout, t.req.heads, range, t.req.src_first);
    if (!runs.ok()) return runs.status();
    auto batch = make_batch(config.layout, e.pages, p.layout, t.req.pages, *runs);
    if (!batch.ok()) return batch.status();
    t.cached = std::move(*batch);
    t.cached_range = range;
  }
  for (std::uint32_t part = 0; part < config.layout.parts(); ++part) {
    const MrHandle& src = config.regions[config.layout.base(layer, part).region];
    const MrDesc& dst = p.regions[p.layout.base(layer, part).region];
    for (const auto& g : t.cached.groups) {
      a.submits.push_back({&t, id, paged_write(t.cached, g, config.layout, p.layout, layer, part,
                                               src, dst, t.req.imm)});
      ++t.outstanding;
    }
  }
  return Status::success();
}

bool Sender::Impl::ready_for_tail(const Entry& e, const Transfer& t) {
  if (t.tail_posted) return false;
  for (std::uint32_t d : e.done_tokens) {
    if (d < wanted_end(t)) return false;
  }
  return true;
}

void Sender::Impl::queue_tail(Actions& a, const std::string& id, Entry& e, Transfer& t) {
  const Peer& p = *peers.find(t.peer);
  t.tail_posted = true;
  ++t.outstanding;
  if (t.req.writes_tail && e.tail && t.req.tail_bytes > 0) {
    SingleWrite w;
    w.length = t.req.tail_bytes;
    w.imm = t.req.imm;
    w.src = *e.tail;
    w.dst = RemoteSlice{t.req.tail, t.req.tail_offset};
    w.routing = WriteRouting::pinned(0);  // one immediate, as the plan counts
    a.submits.push_back({&t, id, w});
  } else {
    a.submits.push_back({&t, id, ImmWrite{t.req.imm, p.regions.front()}});
  }
}

}  // namespace fabric::kv
