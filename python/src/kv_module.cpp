// fabric_lib._kv (a submodule of fabric_lib._native): the binding of the KV module (docs/kv.md). A
// Sender or Receiver runs on the fabric_lib.Engine it is given (engine=), beside the process's other
// workloads, or on an engine of its own made from its options; it registers the memory it is given
// (resolved as Engine.reg_mr resolves it, memory.hpp) and keeps those objects alive until it
// closes and deregisters them.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "errors.hpp"
#include "memory.hpp"
#include "workload_engine.hpp"
#include "fabric/engine.hpp"
#include "fabric/kv/layout.hpp"
#include "fabric/kv/plan.hpp"
#include "fabric/kv/receiver.hpp"
#include "fabric/kv/sender.hpp"

namespace py = pybind11;
using namespace fabric;
using namespace fabric::kv;
// fabric_lib's exception classes (FabricError and one subclass per Errc).
using fabric::python::check;
using fabric::python::MemoryTarget;
using fabric::python::take;
using fabric::python::WorkloadEngine;

namespace {

// Runs `f` with the GIL released and returns its Status or Result untouched: the Python error
// is raised only after the GIL is back (check/take), never from inside the released region,
// where setting a Python exception crashes the interpreter.
template <typename F>
auto released(F&& f) {
  py::gil_scoped_release unlocked;
  return std::forward<F>(f)();
}

struct EngineOptions {
  std::string provider = "tcp";
  std::string bind_address = "127.0.0.1";
  int request_timeout_ms = 5000;
  int max_message_size = 64 * 1024;
  // cpulist ("2-3") for every thread of the engine; empty: FABRIC_CPUS, else the process's CPUs.
  std::string thread_cpus;
};

// The config of a Sender's or Receiver's own engine (no engine= given).
std::function<EngineConfig()> own_config(const EngineOptions& o) {
  return [o] {
    EngineConfig c;
    c.provider = o.provider;
    c.bind_address = o.bind_address;
    c.request_timeout = std::chrono::milliseconds(o.request_timeout_ms);
    c.max_message_size = static_cast<std::uint32_t>(o.max_message_size);
    if (!o.thread_cpus.empty()) c.thread_cpus = take(CpuSet::parse(o.thread_cpus));
    return c;
  };
}

py::bytes address_of(const WorkloadEngine& e) {
  auto b = e.get().main_address().encode();
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

py::tuple status_tuple(const RequestStatus& s) {
  return py::make_tuple(std::string(state_name(s.state)),
                        s.error.ok() ? py::object(py::none()) : py::object(py::str(s.error.to_string())));
}

// A region as Engine.reg_mr takes one (a writable C-contiguous buffer or a contiguous tensor, a
// CUDA tensor as memory of its GPU), or a (ptr, length[, device]) tuple for memory Python does not
// own: one resolver, so KV refuses what the engine refuses with the same errors.
MemoryTarget resolve_region(py::handle obj) {
  if (!py::isinstance<py::tuple>(obj)) {
    return python::resolve_memory(obj, std::nullopt, py::none(), py::none());
  }
  const auto raw = py::reinterpret_borrow<py::tuple>(obj);
  if (raw.size() < 2 || raw.size() > 3 || !py::isinstance<py::int_>(raw[1])) {
    throw py::type_error("a raw KV region is (ptr, length) or (ptr, length, device)");
  }
  return python::resolve_memory(raw[0], raw[1].cast<std::int64_t>(),
                                raw.size() == 3 ? raw[2] : py::handle(py::none()), py::none());
}

// Resolves every region (under the GIL, before any is registered) and keeps their objects.
std::vector<MemoryTarget> resolve_regions(const py::sequence& regions,
                                          std::vector<py::object>& keepers) {
  std::vector<MemoryTarget> out;
  for (py::handle r : regions) {
    out.push_back(resolve_region(r));
    keepers.push_back(out.back().keeper);
  }
  return out;
}

class PySender {
 public:
  PySender(KvLayout layout, const py::sequence& regions, const py::object& tail, EngineOptions o,
           int heartbeat_ms, int receiver_timeout_ms, const py::object& engine)
      : engine_(engine, own_config(o)) {
    try {
      TransferEngine& e = engine_.get();
      SenderConfig cfg;
      cfg.layout = std::move(layout);
      std::vector<MemoryRange> ranges;
      for (const MemoryTarget& r : resolve_regions(regions, keepers_)) {
        ranges.push_back({r.ptr, r.length, r.device});
      }
      std::optional<MemoryTarget> tail_memory;
      if (!tail.is_none()) {
        tail_memory = resolve_region(tail);
        keepers_.push_back(tail_memory->keeper);
      }
      // One batch: vLLM hands one tensor per layer, and reg_mr each pays a worker round trip.
      for (auto& r : take(released([&] { return e.reg_mrs(ranges); }))) registered_.push_back(r.handle);
      cfg.regions = registered_;
      if (tail_memory) {
        const MemoryTarget& t = *tail_memory;
        tail_ = take(released([&] { return e.reg_mr(t.ptr, t.length, t.device); })).handle;
        registered_.push_back(tail_);
      }
      cfg.liveness.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
      cfg.receiver_timeout = std::chrono::milliseconds(receiver_timeout_ms);
      sender_ = take(released([&] { return Sender::create(e, cfg); }));
    } catch (...) {
      close();  // no destructor runs for a constructor that threw: a shared engine keeps nothing
      throw;
    }
  }
  ~PySender() { close(); }
  void close() {
    if (!engine_) return;
    {
      py::gil_scoped_release r;
      sender_.reset();
      // An own engine drops them as it stops; a shared one keeps serving the other workloads.
      if (engine_.shared()) {
        for (const auto& h : registered_) (void)engine_.get().dereg_mr(h);
      }
      registered_.clear();
    }
    keepers_.clear();  // deregistered: the memory may go (under the GIL again)
    engine_.close();
  }
  py::bytes address() const { return address_of(engine_); }
  void prepare(const std::string& id, std::vector<std::uint32_t> pages, std::uint32_t tokens,
               std::uint32_t receivers, std::optional<std::uint64_t> tail_offset) {
    std::optional<LocalSlice> tail;
    if (tail_offset) {
      if (!tail_.valid()) python::raise_error(Errc::invalid_argument, "this Sender was made without a tail region");
      tail = LocalSlice{tail_, *tail_offset};
    }
    Sender& s = live();
    check(released([&] { return s.prepare(id, std::move(pages), tokens, receivers, tail); }));
  }
  void layer_done(const std::string& id, std::uint32_t layer,
                  std::optional<std::pair<std::uint32_t, std::uint32_t>> tokens) {
    Sender& s = live();
    check(released([&] {
      return tokens ? s.layer_done(id, layer, TokenRange{tokens->first, tokens->second})
                    : s.layer_done(id, layer);
    }));
  }
  void add_pages(const std::string& id, std::vector<std::uint32_t> pages) {
    check(live().add_pages(id, std::move(pages)));  // only takes the sender's lock: no release
  }
  void cancel(const std::string& id) {
    Sender& s = live();
    check(released([&] { return s.cancel(id); }));
  }
  py::tuple poll(const std::string& id) { return status_tuple(take(live().poll(id))); }
  void release(const std::string& id) { check(live().release(id)); }
  std::size_t active() { return live().active_requests(); }

 private:
  Sender& live() {
    if (!sender_) python::raise_error(Errc::shutdown, "the KV Sender is closed");
    return *sender_;
  }
  WorkloadEngine engine_;
  std::vector<py::object> keepers_;   // the regions' and the tail's objects, while registered
  std::vector<MrHandle> registered_;  // the regions', then the tail's
  MrHandle tail_;
  std::unique_ptr<Sender> sender_;
};

class PyReceiver {
 public:
  PyReceiver(KvLayout layout, const py::sequence& regions, EngineOptions o, std::uint64_t spread,
             int heartbeat_ms, int quarantine_ms, const py::object& engine)
      : engine_(engine, own_config(o)) {
    ReceiverConfig cfg;
    cfg.layout = std::move(layout);
    for (const MemoryTarget& r : resolve_regions(regions, keepers_)) {
      cfg.regions.push_back({r.ptr, r.length, r.device});
    }
    cfg.spread = spread;
    cfg.liveness.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
    cfg.quarantine = std::chrono::milliseconds(quarantine_ms);
    TransferEngine& e = engine_.get();
    receiver_ = take(released([&] { return Receiver::create(e, cfg); }));
  }
  ~PyReceiver() { close(); }
  void close() {
    if (!engine_) return;
    {
      py::gil_scoped_release r;
      receiver_.reset();  // deregisters its regions and gives its immediates back
    }
    keepers_.clear();
    engine_.close();
  }
  py::bytes address() const { return address_of(engine_); }
  std::uint32_t connect(const py::bytes& addr, double timeout_s) {
    std::string raw = addr;
    auto a = take(NetAddr::decode(std::as_bytes(std::span(raw.data(), raw.size()))));
    Receiver& rx = live();
    const auto timeout = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    return take(released([&] { return rx.connect(a, timeout); }));
  }
  KvLayout source_layout(std::uint32_t s) { return take(live().source_layout(s)); }
  std::uint64_t request(const std::string& id, std::vector<std::uint32_t> pages,
                        std::uint32_t tokens, std::vector<std::uint32_t> sources,
                        std::optional<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>> tail,
                        std::uint32_t src_first) {
    std::optional<Tail> t;
    if (tail) t = Tail{std::get<0>(*tail), std::get<1>(*tail), std::get<2>(*tail)};
    Receiver& rx = live();
    return take(
        released([&] { return rx.request(id, std::move(pages), tokens, sources, t, src_first); }));
  }
  void decline(const std::string& id, std::vector<std::uint32_t> sources) {
    Receiver& rx = live();
    check(released([&] { return rx.decline(id, sources); }));
  }
  void cancel(const std::string& id) {
    Receiver& rx = live();
    check(released([&] { return rx.cancel(id); }));
  }
  py::tuple poll(const std::string& id) { return status_tuple(take(live().poll(id))); }
  py::tuple wait(const std::string& id, double timeout_s) {
    Receiver& rx = live();
    const auto timeout = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    return status_tuple(take(released([&] { return rx.wait(id, timeout); })));
  }
  void release(const std::string& id) { check(live().release(id)); }
  std::size_t active() { return live().active_requests(); }

 private:
  Receiver& live() {
    if (!receiver_) python::raise_error(Errc::shutdown, "the KV Receiver is closed");
    return *receiver_;
  }
  WorkloadEngine engine_;
  // The regions' objects: the receiver registers them again for each source it connects.
  std::vector<py::object> keepers_;
  std::unique_ptr<Receiver> receiver_;
};

using HR = std::pair<std::uint32_t, std::uint32_t>;

}  // namespace

namespace fabric::python {

// fabric_lib._kv, a submodule of fabric_lib._native (module.cpp): one extension, one copy of the
// engine library in the process.
void bind_kv(py::module_& m) {
  m.doc() = "Native binding of fabric-lib's KV module; import fabric_lib.kv instead.";

  py::class_<KvLayout>(m, "Layout", "Where one instance's KV cache lives (docs/kv.md#layout).")
      .def(py::init<>())
      .def_property(
          "kind", [](const KvLayout& l) { return static_cast<int>(l.kind); },
          [](KvLayout& l, int k) { l.kind = static_cast<KvKind>(k); }, "1 separate, 2 fused, 3 mla")
      .def_readwrite("num_layers", &KvLayout::num_layers)
      .def_readwrite("num_pages", &KvLayout::num_pages)
      .def_readwrite("tokens_per_page", &KvLayout::tokens_per_page)
      .def_readwrite("total_kv_heads", &KvLayout::total_kv_heads)
      .def_readwrite("head_begin", &KvLayout::head_begin)
      .def_readwrite("num_heads", &KvLayout::num_heads)
      .def_readwrite("head_size", &KvLayout::head_size)
      .def_readwrite("elem_bytes", &KvLayout::elem_bytes)
      .def_readwrite("page_stride", &KvLayout::page_stride)
      .def_readwrite("head_stride", &KvLayout::head_stride)
      .def_readwrite("token_stride", &KvLayout::token_stride)
      .def_readwrite("num_regions", &KvLayout::num_regions)
      .def_property(
          "bases",
          [](const KvLayout& l) {
            std::vector<std::pair<std::uint32_t, std::uint64_t>> out;
            for (const auto& b : l.bases) out.emplace_back(b.region, b.offset);
            return out;
          },
          [](KvLayout& l, const std::vector<std::pair<std::uint32_t, std::uint64_t>>& v) {
            l.bases.clear();
            for (auto [r, o] : v) l.bases.push_back({r, o});
          },
          "(region, offset) per (layer, part), layer-major")
      .def_property_readonly("parts", &KvLayout::parts)
      .def_property_readonly("entry_bytes", &KvLayout::entry_bytes)
      .def_property_readonly("span_bytes", &KvLayout::span_bytes)
      .def("validate", [](const KvLayout& l) { check(l.validate()); })
      .def("fingerprint", &KvLayout::fingerprint)
      .def("offset", &KvLayout::offset, py::arg("layer"), py::arg("part"), py::arg("page"),
           py::arg("head"), py::arg("token"));

  auto shape = [](std::uint32_t layers, std::uint32_t pages, std::uint32_t tpp,
                  std::uint32_t total, std::uint32_t head_begin, std::uint32_t heads,
                  std::uint32_t head_size, std::uint32_t elem) {
    return CacheShape{layers, pages, tpp, total, HeadShard{head_begin, heads}, head_size, elem};
  };
  const char* shape_doc = "(num_layers, num_pages, tokens_per_page, total_kv_heads, head_begin, "
                          "num_heads, head_size, elem_bytes), one region per layer";
#define FABRIC_KV_FACTORY(name)                                                               \
  m.def(                                                                                      \
      #name,                                                                                  \
      [shape](std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t d,             \
              std::uint32_t e, std::uint32_t f, std::uint32_t g, std::uint32_t h) {           \
        return name(shape(a, b, c, d, e, f, g, h));                                           \
      },                                                                                      \
      py::arg("num_layers"), py::arg("num_pages"), py::arg("tokens_per_page"),              \
      py::arg("total_kv_heads"), py::arg("head_begin"), py::arg("num_heads"),                \
      py::arg("head_size"), py::arg("elem_bytes"), shape_doc)
  FABRIC_KV_FACTORY(vllm_nhd);
  FABRIC_KV_FACTORY(vllm_hnd);
  FABRIC_KV_FACTORY(vllm_cpu);
  FABRIC_KV_FACTORY(fused_hnd);
  FABRIC_KV_FACTORY(heads_first);
#undef FABRIC_KV_FACTORY
  m.def("mla_layout", &mla_layout, py::arg("num_layers"), py::arg("num_pages"),
        py::arg("tokens_per_page"), py::arg("latent"), py::arg("elem_bytes"));
  m.def(
      "shard_heads",
      [](std::uint32_t total, std::uint32_t tp, std::uint32_t rank) {
        auto s = take(shard_heads(total, tp, rank));
        return std::make_pair(s.begin, s.count);
      },
      py::arg("total_kv_heads"), py::arg("tp_size"), py::arg("rank"));
  m.def(
      "receivers_per_source",
      [](const std::vector<HR>& sources, const std::vector<HR>& dests) {
        std::vector<HeadRange> s, d;
        for (auto [b, e] : sources) s.push_back({b, e});
        for (auto [b, e] : dests) d.push_back({b, e});
        return take(receivers_per_source(s, d));
      },
      py::arg("sources"), py::arg("destinations"));

  py::class_<EngineOptions>(m, "EngineOptions",
                            "The engine a Sender or Receiver makes for itself when given none.")
      .def(py::init<>())
      .def_readwrite("provider", &EngineOptions::provider)
      .def_readwrite("bind_address", &EngineOptions::bind_address)
      .def_readwrite("request_timeout_ms", &EngineOptions::request_timeout_ms)
      .def_readwrite("max_message_size", &EngineOptions::max_message_size)
      .def_readwrite("thread_cpus", &EngineOptions::thread_cpus);

  py::class_<PySender>(m, "Sender",
                       "The prefill side (fabric::kv::Sender), on the given fabric_lib.Engine or "
                       "its own.")
      .def(py::init<KvLayout, py::sequence, py::object, EngineOptions, int, int, py::object>(),
           py::arg("layout"), py::arg("regions"), py::arg("tail"), py::arg("options"),
           py::arg("heartbeat_ms"), py::arg("receiver_timeout_ms"), py::arg("engine") = py::none())
      .def_property_readonly("address", &PySender::address)
      .def("prepare", &PySender::prepare, py::arg("id"), py::arg("pages"), py::arg("num_tokens"),
           py::arg("receivers") = 1, py::arg("tail_offset") = py::none())
      .def("layer_done", &PySender::layer_done, py::arg("id"), py::arg("layer"),
           py::arg("tokens") = py::none())
      .def("add_pages", &PySender::add_pages, py::arg("id"), py::arg("pages"))
      .def("cancel", &PySender::cancel, py::arg("id"))
      .def("poll", &PySender::poll, py::arg("id"))
      .def("release", &PySender::release, py::arg("id"))
      .def("active_requests", &PySender::active)
      .def("close", &PySender::close);

  py::class_<PyReceiver>(m, "Receiver",
                         "The decode side (fabric::kv::Receiver), on the given fabric_lib.Engine or "
                         "its own.")
      .def(py::init<KvLayout, py::sequence, EngineOptions, std::uint64_t, int, int, py::object>(),
           py::arg("layout"), py::arg("regions"), py::arg("options"), py::arg("spread"),
           py::arg("heartbeat_ms"), py::arg("quarantine_ms"), py::arg("engine") = py::none())
      .def_property_readonly("address", &PyReceiver::address)
      .def("connect", &PyReceiver::connect, py::arg("address"), py::arg("timeout") = 30.0)
      .def("source_layout", &PyReceiver::source_layout, py::arg("source"))
      .def("request", &PyReceiver::request, py::arg("id"), py::arg("pages"),
           py::arg("num_tokens"), py::arg("sources"), py::arg("tail") = py::none(),
           py::arg("src_first") = 0)
      .def("decline", &PyReceiver::decline, py::arg("id"), py::arg("sources"))
      .def("cancel", &PyReceiver::cancel, py::arg("id"))
      .def("poll", &PyReceiver::poll, py::arg("id"))
      .def("wait", &PyReceiver::wait, py::arg("id"), py::arg("timeout"))
      .def("release", &PyReceiver::release, py::arg("id"))
      .def("active_requests", &PyReceiver::active)
      .def("close", &PyReceiver::close);
}

}  // namespace fabric::python
