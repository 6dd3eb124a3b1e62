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

}  // namespace

Status check_peer(const NetAddr& peer, const LocalIdentity& self) {
  if (peer.empty()) return {Errc::invalid_argument, "peer NetAddr is empty"};
  if (peer.backend() != self.backend || peer.provider() != self.provider) {
    return {Errc::invalid_argument,
            fmt::format("peer speaks {} {}, this engine {} {}", backend_name(peer.backend()),
                        peer.provider(), backend_name(self.backend), self.provider)};
  }
  if (peer.num_domains() != self.num_domains) {
    return {Errc::invalid_argument,
            fmt::format("peer has {} domains per group, this engine {}; all peers must agree",
                        peer.num_domains(), self.num_domains)};
  }
  return Status::success();
}

Status check_source(const MrHandle& mr, const LocalIdentity& self) {
  if (!mr.registration()) return {Errc::invalid_argument, "source MrHandle is empty"};
  if (mr.registration()->engine != self.engine) {
    return {Errc::invalid_argument, "source MrHandle was registered by another engine"};
  }
  if (!mr.valid()) return {Errc::invalid_argument, "source MrHandle was deregistered"};
  return Status::success();
}

Status check_local_range(const MrHandle& mr, std::uint64_t offset, std::uint64_t length) {
  if (!checked::range_fits(offset, length, mr.size())) {
    return out_of_range(fmt::format(
        "source range offset {} length {} exceeds the {}-byte registration", offset, length,
        mr.size()));
  }
  return Status::success();
}

Status check_remote(const MrDesc& mr, const LocalIdentity& self) {
  if (mr.empty()) return {Errc::invalid_argument, "destination MrDesc is empty"};
  return check_peer(mr.owner(), self);
}

Status check_remote_range(const MrDesc& mr, std::uint64_t offset, std::uint64_t length) {
  if (!checked::range_fits(offset, length, mr.size())) {
    return out_of_range(fmt::format(
        "destination range offset {} length {} exceeds the {}-byte registration", offset, length,
        mr.size()));
  }
  return Status::success();
}

Status check_write_routing(const WriteRouting& routing) {
  switch (routing.mode) {
    case WriteRouting::Mode::shard:
    case WriteRouting::Mode::pin:
      return Status::success();
  }
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
  if (auto st = check_write_routing(w.routing); !st.ok()) return st;
  if (auto st = check_source(w.src.mr, self); !st.ok()) return st;
  if (auto st = check_remote(w.dst.mr, self); !st.ok()) return st;
  if (auto st = check_local_range(w.src.mr, w.src.offset, w.length); !st.ok()) return st;
  return check_remote_range(w.dst.mr, w.dst.offset, w.length);
}

Status check_paged_write(const PagedWrite& w, const LocalIdentity& self) {
  if (auto st = check_source(w.src, self); !st.ok()) return st;
  if (auto st = check_remote(w.dst, self); !st.ok()) return st;
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

}  // namespace fabric::engine
