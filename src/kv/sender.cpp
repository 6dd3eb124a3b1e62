// The Sender's public calls; the state they share is in sender_impl.hpp.

#include "fabric/kv/sender.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "arguments.hpp"
#include "sender_impl.hpp"

namespace fabric::kv {

namespace {
constexpr std::string_view kSide = "KV sender";
}  // namespace

Sender::Sender(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Sender::~Sender() { impl_->link.stop(); }

Result<std::unique_ptr<Sender>> Sender::create(TransferEngine& engine, SenderConfig config) {
  if (auto st = config.layout.validate(); !st.ok()) return st;
  if (config.regions.size() != config.layout.num_regions) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV sender: {} regions for a layout of {}", config.regions.size(),
                              config.layout.num_regions));
  }
  std::vector<std::uint64_t> bytes;
  for (const MrHandle& r : config.regions) bytes.push_back(r.valid() ? r.size() : 0);
  if (auto st = check_parts_fit(kSide, config.layout, bytes); !st.ok()) return st;
  auto impl = std::make_shared<Impl>(engine, std::move(config));
  if (auto st = impl->link.start_for(impl); !st.ok()) return st;
  return std::unique_ptr<Sender>(new Sender(std::move(impl)));
}

Status Sender::prepare(std::string id, std::vector<std::uint32_t> pages, std::uint32_t num_tokens,
                       std::uint32_t receivers, std::optional<LocalSlice> tail) {
  auto& im = *impl_;
  const KvLayout& l = im.config.layout;
  if (auto st = check_id(kSide, id); !st.ok()) return st;
  if (num_tokens == 0 || receivers == 0) {
    return {Errc::invalid_argument, "KV sender: a request needs tokens and a receiver"};
  }
  // Fewer pages than the tokens need: the rest come by add_pages (vLLM allocates a prompt's
  // blocks chunk by chunk), before the layer_done that covers them.
  if (pages.size() > pages_for(num_tokens, l.tokens_per_page)) {
    return {Errc::invalid_argument, fmt::format("KV sender: {} pages for {} tokens of {} per page",
                                                pages.size(), num_tokens, l.tokens_per_page)};
  }
  if (auto st = check_pages(kSide, pages, l.num_pages); !st.ok()) return st;
  if (tail && !tail->mr.valid()) return {Errc::invalid_argument, "KV sender: invalid tail handle"};
  Impl::Actions a;
  {
    std::lock_guard lock(im.mutex);
    if (auto st = im.entries.check_new(id); !st.ok()) return st;
    im.released.forget(id);
    Impl::Entry& e = im.entries.add(id);
    e.pages = std::move(pages);
    e.num_tokens = num_tokens;
    e.receivers = receivers;
    e.tail = tail;
    e.done_tokens.assign(l.num_layers, 0);
    e.deadline = Clock::now() + im.config.receiver_timeout;
    // Decoders that asked, or declined, before this prepare.
    if (auto ea = im.early.find(id); ea != im.early.end()) {
      auto waiting = std::move(ea->second);
      im.early.erase(ea);
      for (auto& x : waiting) im.accept(a, id, e, x.peer, std::move(x.req));
    }
    if (auto ed = im.early_declines.find(id); ed != im.early_declines.end()) {
      auto declines = std::move(ed->second);
      im.early_declines.erase(ed);
      for (const auto& [peer, expires] : declines) im.decline(a, id, e, peer);
    }
  }
  im.run(std::move(a));
  return Status::success();
}

Status Sender::layer_done(std::string_view id, std::uint32_t layer) {
  return layer_done(id, layer, TokenRange{0, 0});
}

Status Sender::layer_done(std::string_view id, std::uint32_t layer, TokenRange tokens) {
  auto& im = *impl_;
  return im.change_request(id, [&](Impl::Actions& a, const std::string& key, Impl::Entry& e) {
    if (layer >= e.done_tokens.size()) {
      return Status(Errc::out_of_range,
                    fmt::format("KV sender: layer {} of {}", layer, e.done_tokens.size()));
    }
    if (tokens.begin == 0 && tokens.end == 0) tokens = TokenRange{e.done_tokens[layer], e.num_tokens};
    if (tokens.begin != e.done_tokens[layer] || tokens.end <= tokens.begin ||
        tokens.end > e.num_tokens) {
      return Status(Errc::invalid_argument,
                    fmt::format("KV sender: layer {} chunk [{}, {}) does not continue at token {} "
                                "of {}",
                                layer, tokens.begin, tokens.end, e.done_tokens[layer],
                                e.num_tokens));
    }
    if (pages_for(tokens.end, im.config.layout.tokens_per_page) > e.pages.size()) {
      return Status(Errc::invalid_argument,
                    fmt::format("KV sender: layer {} chunk [{}, {}) reaches past the {} pages "
                                "given (add_pages first)",
                                layer, tokens.begin, tokens.end, e.pages.size()));
    }
    for (const auto& t : e.transfers) {
      const std::uint32_t end = std::min(tokens.end, Impl::wanted_end(*t));
      if (end != Impl::wanted_end(*t) && end > t->req.src_first && end % t->align != 0) {
        return Status(Errc::invalid_argument,
                      fmt::format("KV sender: chunk end {} is not a multiple of {} (both sides' "
                                  "page boundaries)",
                                  tokens.end, t->align));
      }
    }
    if (is_terminal(e.status.state) || e.local_cancel) return Status::success();  // nothing to do
    e.done_tokens[layer] = tokens.end;
    e.chunks.emplace_back(layer, tokens);
    for (auto& t : e.transfers) {
      if (t->stopping || t->ended) continue;
      if (auto st = im.queue_chunk(a, key, e, *t, layer, tokens); !st.ok()) {
        im.stop_transfer(*t, st);
        im.check_transfer(a, key, e, *t);
        continue;
      }
      if (im.ready_for_tail(e, *t)) im.queue_tail(a, key, e, *t);
    }
    return Status::success();
  });
}

Status Sender::add_pages(std::string_view id, std::vector<std::uint32_t> pages) {
  auto& im = *impl_;
  const KvLayout& l = im.config.layout;
  std::lock_guard lock(im.mutex);
  auto found = im.entries.get(id);
  if (!found.ok()) return found.status();
  Impl::Entry& e = **found;
  if (e.pages.size() + pages.size() > pages_for(e.num_tokens, l.tokens_per_page)) {
    return {Errc::invalid_argument,
            fmt::format("KV sender: {} more pages for request {} that has {} of the {} its {} "
                        "tokens need",
                        pages.size(), id, e.pages.size(), pages_for(e.num_tokens, l.tokens_per_page),
                        e.num_tokens)};
  }
  if (auto st = check_pages(kSide, pages, l.num_pages, e.pages.size()); !st.ok()) return st;
  e.pages.insert(e.pages.end(), pages.begin(), pages.end());
  return Status::success();
}

Status Sender::cancel(std::string_view id) {
  auto& im = *impl_;
  return im.change_request(id, [&](Impl::Actions& a, const std::string& key, Impl::Entry& e) {
    if (is_terminal(e.status.state)) return Status::success();
    e.local_cancel = true;
    for (auto& t : e.transfers) {
      im.stop_transfer(*t, Status::success());
      im.check_transfer(a, key, e, *t);
    }
    im.check_entry(a, key, e);
    return Status::success();
  });
}

Result<RequestStatus> Sender::poll(std::string_view id) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->entries.status(id);
}

Status Sender::release(std::string_view id) {
  std::lock_guard lock(impl_->mutex);
  // Remembered, so that a decoder asking after the release is refused at once.
  return impl_->entries.release(id, [&](const std::string& key, const Impl::Entry& e) {
    impl_->released.add(key, e.status.state);
  });
}

std::size_t Sender::active_requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->entries.active();
}

}  // namespace fabric::kv
