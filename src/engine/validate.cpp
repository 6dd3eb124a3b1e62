#include "engine/validate.hpp"

#include <fmt/format.h>

#include "common/checked.hpp"
#include "engine/registration.hpp"

namespace fabric::engine {

namespace {

Status out_of_range(std::string message) { return {Errc::out_of_range, std::move(message)}; }

// Page i covers [offset + indices[i]*stride, +page_length) and must fit in size.
Status check_pages(const char* side, const Pages& pages, std::uint64_t page_length,
                   std::uint64_t size) {
  // A page's start grows with its index (stride is unsigned), so the pages fit if the highest
  // index does: one pass of plain max over the indices (vectorised), one checked range. Only a
  // request that fails looks for the first page at fault, to name it.
  if (pages.indices.empty()) return Status::success();
  std::uint32_t highest = 0;
  for (const std::uint32_t index : pages.indices) highest = index > highest ? index : highest;
  const auto highest_start = checked::mul(highest, pages.stride);
  const auto last = highest_start ? checked::add(pages.offset, *highest_start) : std::nullopt;
  if (last && checked::range_fits(*last, page_length, size)) return Status::success();
  for (std::size_t i = 0; i < pages.indices.size(); ++i) {
    const std::uint32_t index = pages.indices[i];
    const auto start_in_pages = checked::mul(index, pages.stride);
    const auto start = start_in_pages ? checked::add(pages.offset, *start_in_pages) : std::nullopt;
    if (!start || !checked::range_fits(*start, page_length, size)) {
      return out_of_range(fmt::format(
          "{} page index {} (position {}) with stride {}, offset {} and page length {} ends "
          "past the {}-byte registration",
          side, index, i, pages.stride, pages.offset, page_length, size));
    }
  }
  return Status::success();
}

// Each check's condition as a plain predicate: a request that passes them all (the common
// case) builds no Status per check; one that fails runs the checks in turn for the message.
bool peer_ok(const NetAddr& peer, const LocalIdentity& self) noexcept {
  return !peer.empty() && peer.backend() == self.backend &&
         peer.num_domains() == self.num_domains && peer.provider() == self.provider;
}
bool remote_ok(const MrDesc& mr, const LocalIdentity& self) noexcept {
  return !mr.empty() && peer_ok(mr.owner(), self);
}
bool source_ok(const MrHandle& mr, const LocalIdentity& self) noexcept {
  return mr.registration() && mr.registration()->engine == self.engine && mr.valid();
}
bool routing_ok(const WriteRouting& routing) noexcept {
  return routing.mode == WriteRouting::Mode::shard || routing.mode == WriteRouting::Mode::pin;
}

}  // namespace

Status check_peer(const NetAddr& peer, const LocalIdentity& self) {
  if (peer_ok(peer, self)) return Status::success();
  if (peer.empty()) return {Errc::invalid_argument, "peer NetAddr is empty"};
  if (peer.backend() != self.backend || peer.provider() != self.provider) {
    return {Errc::invalid_argument,
            fmt::format("peer speaks {} {}, this engine {} {}", backend_name(peer.backend()),
                        peer.provider(), backend_name(self.backend), self.provider)};
  }
  return {Errc::invalid_argument,
          fmt::format("peer has {} domains per group, this engine {}; all peers must agree",
                      peer.num_domains(), self.num_domains)};
}

Status check_source(const MrHandle& mr, const LocalIdentity& self) {
  if (source_ok(mr, self)) return Status::success();
  if (!mr.registration()) return {Errc::invalid_argument, "source MrHandle is empty"};
  if (mr.registration()->engine != self.engine) {
    return {Errc::invalid_argument, "source MrHandle was registered by another engine"};
  }
  return {Errc::invalid_argument, "source MrHandle was deregistered"};
}

Status check_local_range(const MrHandle& mr, std::uint64_t offset, std::uint64_t length) {
  if (checked::range_fits(offset, length, mr.size())) return Status::success();
  return out_of_range(fmt::format(
      "source range offset {} length {} exceeds the {}-byte registration", offset, length,
      mr.size()));
}

Status check_remote(const MrDesc& mr, const LocalIdentity& self) {
  if (mr.empty()) return {Errc::invalid_argument, "destination MrDesc is empty"};
  return check_peer(mr.owner(), self);
}

Status check_remote_range(const MrDesc& mr, std::uint64_t offset, std::uint64_t length) {
  if (checked::range_fits(offset, length, mr.size())) return Status::success();
  return out_of_range(fmt::format(
      "destination range offset {} length {} exceeds the {}-byte registration", offset, length,
      mr.size()));
}

Status check_write_routing(const WriteRouting& routing) {
  if (routing_ok(routing)) return Status::success();
  // A value outside the enum (a cast, a corrupted struct) must not run as some mode.
  return {Errc::invalid_argument, fmt::format("undefined WriteRouting::Mode {}",
                                              static_cast<unsigned>(routing.mode))};
}

Status check_scatter_routing(const ScatterRouting& routing, std::size_t num_domains) {
  switch (routing.mode) {
    case ScatterRouting::Mode::shard_peers:
    case ScatterRouting::Mode::shard_bytes:
      return Status::success();
    case ScatterRouting::Mode::single_domain:
      if (routing.domain >= num_domains) {
        return {Errc::invalid_argument, fmt::format("scatter routing pins domain {} of {}",
                                                    routing.domain, num_domains)};
      }
      return Status::success();
  }
  return {Errc::invalid_argument, fmt::format("undefined ScatterRouting::Mode {}",
                                              static_cast<unsigned>(routing.mode))};
}

Status check_single_write(const SingleWrite& w, const LocalIdentity& self) {
  if (routing_ok(w.routing) && source_ok(w.src.mr, self) && remote_ok(w.dst.mr, self) &&
      checked::range_fits(w.src.offset, w.length, w.src.mr.size()) &&
      checked::range_fits(w.dst.offset, w.length, w.dst.mr.size())) [[likely]] {
    return Status::success();
  }
  if (auto st = check_write_routing(w.routing); !st.ok()) return st;
  if (auto st = check_source(w.src.mr, self); !st.ok()) return st;
  if (auto st = check_remote(w.dst.mr, self); !st.ok()) return st;
  if (auto st = check_local_range(w.src.mr, w.src.offset, w.length); !st.ok()) return st;
  return check_remote_range(w.dst.mr, w.dst.offset, w.length);
}

Status check_scatter_slices(const MrHandle& src, const std::vector<ScatterSlice>& slices,
                            const LocalIdentity& self) {
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const ScatterSlice& s = slices[i];
    if (remote_ok(s.dst, self) &&
        checked::range_fits(s.src_offset, s.length, src.size()) &&
        checked::range_fits(s.dst_offset, s.length, s.dst.size())) [[likely]] {
      continue;
    }
    Status st = check_remote(s.dst, self);
    if (st.ok()) st = check_local_range(src, s.src_offset, s.length);
    if (st.ok()) st = check_remote_range(s.dst, s.dst_offset, s.length);
    if (!st.ok()) return {st.code(), fmt::format("slice {}: {}", i, st.message())};
  }
  return Status::success();
}

Status check_paged_write(const PagedWrite& w, const LocalIdentity& self) {
  if (!source_ok(w.src, self) || !remote_ok(w.dst, self)) {
    if (auto st = check_source(w.src, self); !st.ok()) return st;
    if (auto st = check_remote(w.dst, self); !st.ok()) return st;
  }
  if (w.src_pages.indices.size() != w.dst_pages.indices.size()) {
    return {Errc::invalid_argument,
            fmt::format("{} source pages but {} destination pages", w.src_pages.indices.size(),
                        w.dst_pages.indices.size())};
  }
  if (w.page_length > kMaxWriteBytes) {
    return {Errc::invalid_argument, fmt::format("page length {} exceeds the {}-byte WRITE limit",
                                                w.page_length, kMaxWriteBytes)};
  }
  if (w.src_pages.indices.size() > std::numeric_limits<std::uint32_t>::max()) {
    return {Errc::invalid_argument, "more than 2^32-1 pages in one request"};
  }
  if (auto st = check_pages("source", w.src_pages, w.page_length, w.src.size()); !st.ok()) {
    return st;
  }
  return check_pages("destination", w.dst_pages, w.page_length, w.dst.size());
}

// ---------------------------------------------------------------- reads

namespace {

bool readable(const MrDesc& mr) noexcept { return has_access(mr.access(), Access::remote_read); }

// What a read needs beyond a write's checks: a provider that READs, and a source its owner made
// readable. The descriptor's bits are the owner's word; its provider enforces the keys anyway.
Status check_read_rights(const MrDesc& src, const LocalIdentity& self) {
  if (!self.reads) {
    return {Errc::unsupported,
            fmt::format("provider {} cannot READ (no FI_READ/FI_REMOTE_READ)", self.provider)};
  }
  if (!readable(src)) {
    return {Errc::invalid_argument,
            fmt::format("{} was registered without Access::remote_read: its owner does not let "
                        "peers read it",
                        src.describe())};
  }
  return Status::success();
}

Status check_read_source(const MrDesc& mr, const LocalIdentity& self) {
  if (mr.empty()) return {Errc::invalid_argument, "source MrDesc of the read is empty"};
  return check_peer(mr.owner(), self);
}

Status check_read_destination(const MrHandle& mr, const LocalIdentity& self) {
  if (source_ok(mr, self)) return Status::success();
  if (!mr.registration()) return {Errc::invalid_argument, "destination MrHandle is empty"};
  if (mr.registration()->engine != self.engine) {
    return {Errc::invalid_argument, "destination MrHandle was registered by another engine"};
  }
  return {Errc::invalid_argument, "destination MrHandle was deregistered"};
}

}  // namespace

Status check_single_read(const SingleRead& r, const LocalIdentity& self) {
  if (self.reads && routing_ok(r.routing) && source_ok(r.dst.mr, self) &&
      remote_ok(r.src.mr, self) && readable(r.src.mr) &&
      checked::range_fits(r.src.offset, r.length, r.src.mr.size()) &&
      checked::range_fits(r.dst.offset, r.length, r.dst.mr.size())) [[likely]] {
    return Status::success();
  }
  if (auto st = check_write_routing(r.routing); !st.ok()) return st;
  if (auto st = check_read_destination(r.dst.mr, self); !st.ok()) return st;
  if (auto st = check_read_source(r.src.mr, self); !st.ok()) return st;
  if (auto st = check_read_rights(r.src.mr, self); !st.ok()) return st;
  if (!checked::range_fits(r.src.offset, r.length, r.src.mr.size())) {
    return out_of_range(fmt::format(
        "read source range offset {} length {} exceeds the {}-byte registration", r.src.offset,
        r.length, r.src.mr.size()));
  }
  return out_of_range(fmt::format(
      "read destination range offset {} length {} exceeds the {}-byte registration",
      r.dst.offset, r.length, r.dst.mr.size()));
}

Status check_paged_read(const PagedRead& r, const LocalIdentity& self) {
  if (auto st = check_read_destination(r.dst, self); !st.ok()) return st;
  if (auto st = check_read_source(r.src, self); !st.ok()) return st;
  if (auto st = check_read_rights(r.src, self); !st.ok()) return st;
  if (r.src_pages.indices.size() != r.dst_pages.indices.size()) {
    return {Errc::invalid_argument,
            fmt::format("{} source pages but {} destination pages", r.src_pages.indices.size(),
                        r.dst_pages.indices.size())};
  }
  if (r.page_length > kMaxWriteBytes) {
    return {Errc::invalid_argument, fmt::format("page length {} exceeds the {}-byte READ limit",
                                                r.page_length, kMaxWriteBytes)};
  }
  if (r.src_pages.indices.size() > std::numeric_limits<std::uint32_t>::max()) {
    return {Errc::invalid_argument, "more than 2^32-1 pages in one request"};
  }
  if (auto st = check_pages("read source", r.src_pages, r.page_length, r.src.size()); !st.ok()) {
    return st;
  }
  return check_pages("read destination", r.dst_pages, r.page_length, r.dst.size());
}

}  // namespace fabric::engine
