#include "messages.hpp"

#include <fmt/format.h>

#include "wire.hpp"

namespace fabric::kv::msg {

namespace {

enum class Type : std::uint8_t {
  hello = 1,
  hello_ack = 2,
  request = 3,
  accept = 4,
  reject = 5,
  sender_done = 6,
  cancel = 7,
  cancel_ack = 8,
  heartbeat = 9,
  decline = 10,
};

constexpr std::size_t kMaxBases = 1u << 16;
constexpr std::size_t kMaxRegions = 1u << 14;
constexpr std::size_t kMaxPages = 1u << 24;
constexpr std::size_t kMaxBlobBytes = 4096;

void put_layout(wire::Writer& w, const KvLayout& l) {
  w.put<std::uint8_t>(static_cast<std::uint8_t>(l.kind));
  for (std::uint32_t v : {l.num_layers, l.num_pages, l.tokens_per_page, l.total_kv_heads,
                          l.head_begin, l.num_heads, l.head_size, l.elem_bytes}) {
    w.put<std::uint32_t>(v);
  }
  w.put<std::uint64_t>(l.page_stride);
  w.put<std::uint64_t>(l.head_stride);
  w.put<std::uint64_t>(l.token_stride);
  w.put<std::uint32_t>(l.num_regions);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(l.bases.size()));
  for (const PartBase& b : l.bases) {
    w.put<std::uint32_t>(b.region);
    w.put<std::uint64_t>(b.offset);
  }
}

Result<KvLayout> get_layout(wire::Reader& r) {
  KvLayout l;
  l.kind = static_cast<KvKind>(r.get<std::uint8_t>());
  for (std::uint32_t* v : {&l.num_layers, &l.num_pages, &l.tokens_per_page, &l.total_kv_heads,
                           &l.head_begin, &l.num_heads, &l.head_size, &l.elem_bytes}) {
    *v = r.get<std::uint32_t>();
  }
  l.page_stride = r.get<std::uint64_t>();
  l.head_stride = r.get<std::uint64_t>();
  l.token_stride = r.get<std::uint64_t>();
  l.num_regions = r.get<std::uint32_t>();
  const auto n = r.get<std::uint32_t>();
  if (r.failed() || n > kMaxBases || n * 12ull > r.remaining()) {
    return Status(Errc::malformed, "KV message: truncated layout");
  }
  l.bases.resize(n);
  for (PartBase& b : l.bases) {
    b.region = r.get<std::uint32_t>();
    b.offset = r.get<std::uint64_t>();
  }
  if (auto st = l.validate(); !st.ok()) {
    return Status(Errc::malformed, "KV message: invalid layout: " + st.message());
  }
  return l;
}

void put_status(wire::Writer& w, const Status& s) {
  w.put<std::uint8_t>(static_cast<std::uint8_t>(s.code()));
  w.put_string(s.message().substr(0, kMaxTextBytes));
}

Status get_status(wire::Reader& r) {
  const auto code = r.get<std::uint8_t>();
  std::string text = r.get_string(kMaxTextBytes);
  if (code > static_cast<std::uint8_t>(Errc::cancelled)) return {Errc::provider, text};
  if (code == 0) return Status::success();
  return {static_cast<Errc>(code), std::move(text)};
}

template <typename T>
Result<T> get_blob(wire::Reader& r, const char* what) {
  auto bytes = r.get_bytes(kMaxBlobBytes);
  if (r.failed()) return Status(Errc::malformed, fmt::format("KV message: truncated {}", what));
  auto v = T::decode(bytes);
  if (!v.ok()) {
    return Status(Errc::malformed, fmt::format("KV message: bad {}: {}", what,
                                               v.status().message()));
  }
  return v;
}

struct Encoder {
  wire::Writer& w;
  void operator()(const Hello& m) {
    w.put<std::uint8_t>(static_cast<std::uint8_t>(Type::hello));
    w.put_bytes(m.from.encode());
    put_layout(w, m.layout);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(m.regions.size()));
    for (const MrDesc& d : m.regions) w.put_bytes(d.encode());
  }
  void operator()(const HelloAck& m) {
    w.put<std::uint8_t>(static_cast<std::uint8_t>(Type::hello_ack));
    w.put_bytes(m.from.encode());
    put_layout(w, m.layout);
  }
  void operator()(const Request& m) {
    w.put<std::uint8_t>(static_cast<std::uint8_t>(Type::request));
    w.put_string(m.id);
    w.put<std::uint32_t>(m.imm);
    w.put<std::uint64_t>(m.fingerprint);
    w.put<std::uint32_t>(m.num_tokens);
    w.put<std::uint32_t>(m.src_first);
    w.put<std::uint32_t>(m.heads.begin);
    w.put<std::uint32_t>(m.heads.end);
    w.put<std::uint64_t>(m.expected_imms);
    w.put<std::uint8_t>(m.writes_tail ? 1 : 0);
    if (m.writes_tail) {
      w.put_bytes(m.tail.encode());
      w.put<std::uint64_t>(m.tail_offset);
      w.put<std::uint64_t>(m.tail_bytes);
    }
    w.put<std::uint32_t>(static_cast<std::uint32_t>(m.pages.size()));
    for (std::uint32_t p : m.pages) w.put<std::uint32_t>(p);
  }
  void operator()(const Accept& m) { id_only(Type::accept, m.id); }
  void operator()(const Reject& m) {
    id_only(Type::reject, m.id);
    put_status(w, m.status);
  }
  void operator()(const SenderDone& m) {
    id_only(Type::sender_done, m.id);
    put_status(w, m.status);
  }
  void operator()(const Cancel& m) { id_only(Type::cancel, m.id); }
  void operator()(const CancelAck& m) { id_only(Type::cancel_ack, m.id); }
  void operator()(const Decline& m) { id_only(Type::decline, m.id); }
  void operator()(const Heartbeat&) { w.put<std::uint8_t>(static_cast<std::uint8_t>(Type::heartbeat)); }
  void id_only(Type t, const std::string& id) {
    w.put<std::uint8_t>(static_cast<std::uint8_t>(t));
    w.put_string(id);
  }
};

Result<Body> decode_body(Type type, wire::Reader& r) {
  switch (type) {
    case Type::hello: {
      auto from = get_blob<NetAddr>(r, "sender address");
      if (!from.ok()) return from.status();
      auto layout = get_layout(r);
      if (!layout.ok()) return layout.status();
      const auto n = r.get<std::uint32_t>();
      if (r.failed() || n > kMaxRegions) return Status(Errc::malformed, "KV hello: region count");
      if (n < layout->num_regions) {
        return Status(Errc::malformed, fmt::format("KV hello: {} regions for a layout of {}", n,
                                                   layout->num_regions));
      }
      Hello h{*from, *layout, {}};
      for (std::uint32_t i = 0; i < n; ++i) {
        auto d = get_blob<MrDesc>(r, "region");
        if (!d.ok()) return d.status();
        h.regions.push_back(*d);
      }
      return Body{std::move(h)};
    }
    case Type::hello_ack: {
      auto from = get_blob<NetAddr>(r, "sender address");
      if (!from.ok()) return from.status();
      auto layout = get_layout(r);
      if (!layout.ok()) return layout.status();
      return Body{HelloAck{*from, *layout}};
    }
    case Type::request: {
      Request q;
      q.id = r.get_string(kMaxIdBytes);
      q.imm = r.get<std::uint32_t>();
      q.fingerprint = r.get<std::uint64_t>();
      q.num_tokens = r.get<std::uint32_t>();
      q.src_first = r.get<std::uint32_t>();
      q.heads.begin = r.get<std::uint32_t>();
      q.heads.end = r.get<std::uint32_t>();
      q.expected_imms = r.get<std::uint64_t>();
      const auto tail = r.get<std::uint8_t>();
      if (tail > 1) return Status(Errc::malformed, "KV request: tail flag");
      q.writes_tail = tail == 1;
      if (q.writes_tail) {
        auto d = get_blob<MrDesc>(r, "tail region");
        if (!d.ok()) return d.status();
        q.tail = *d;
        q.tail_offset = r.get<std::uint64_t>();
        q.tail_bytes = r.get<std::uint64_t>();
      }
      const auto n = r.get<std::uint32_t>();
      if (r.failed() || n > kMaxPages || n * 4ull > r.remaining()) {
        return Status(Errc::malformed, "KV request: truncated page list");
      }
      q.pages.resize(n);
      for (auto& p : q.pages) p = r.get<std::uint32_t>();
      if (q.id.empty()) return Status(Errc::malformed, "KV request: empty request id");
      return Body{std::move(q)};
    }
    case Type::accept:
      return Body{Accept{r.get_string(kMaxIdBytes)}};
    case Type::reject: {
      Reject m{r.get_string(kMaxIdBytes), {}};
      m.status = get_status(r);
      return Body{std::move(m)};
    }
    case Type::sender_done: {
      SenderDone m{r.get_string(kMaxIdBytes), {}};
      m.status = get_status(r);
      return Body{std::move(m)};
    }
    case Type::cancel:
      return Body{Cancel{r.get_string(kMaxIdBytes)}};
    case Type::cancel_ack:
      return Body{CancelAck{r.get_string(kMaxIdBytes)}};
    case Type::heartbeat:
      return Body{Heartbeat{}};
    case Type::decline: {
      Decline d{r.get_string(kMaxIdBytes)};
      if (d.id.empty()) return Status(Errc::malformed, "KV decline: empty request id");
      return Body{std::move(d)};
    }
  }
  return Status(Errc::malformed, fmt::format("KV message: unknown type {}",
                                             static_cast<int>(type)));
}

}  // namespace

std::vector<std::byte> encode(std::uint64_t from_instance, const Body& body) {
  wire::Writer w;
  for (char c : {'F', 'K', 'V'}) w.put<std::uint8_t>(static_cast<std::uint8_t>(c));
  w.put<std::uint8_t>(kVersion);
  w.put<std::uint64_t>(from_instance);
  std::visit(Encoder{w}, body);
  return std::move(w.bytes());
}

Result<Message> decode(std::span<const std::byte> bytes) {
  wire::Reader r(bytes);
  const bool magic = r.get<std::uint8_t>() == 'F' && r.get<std::uint8_t>() == 'K' &&
                     r.get<std::uint8_t>() == 'V';
  if (!magic || r.failed()) return Status(Errc::malformed, "KV message: bad magic");
  const auto version = r.get<std::uint8_t>();
  if (version != kVersion) {
    return Status(Errc::malformed,
                  fmt::format("KV message: version {} (this side speaks {})", version, kVersion));
  }
  Message m;
  m.from_instance = r.get<std::uint64_t>();
  const auto type = static_cast<Type>(r.get<std::uint8_t>());
  if (r.failed()) return Status(Errc::malformed, "KV message: truncated header");
  auto body = decode_body(type, r);
  if (!body.ok()) return body.status();
  if (r.failed()) return Status(Errc::malformed, "KV message: truncated body");
  if (r.remaining() != 0) {
    return Status(Errc::malformed, fmt::format("KV message: {} trailing bytes", r.remaining()));
  }
  m.body = std::move(*body);
  return m;
}

}  // namespace fabric::kv::msg
