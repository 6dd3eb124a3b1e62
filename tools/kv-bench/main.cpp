// fabric-kv-bench: layer-by-layer KV push against the same request moved in one batch after
// prefill ends, on a Qwen3-235B-like layout scaled to this machine (docs/kv.md#figures).
//
// Two processes on one host: the decoder (a forked child) and the prefiller (this process),
// one engine each. Per request the prefiller "computes" each layer for --compute-us (a sleep:
// the GPU computes, the host is free), then calls layer_done (layerwise) or, in bulk mode,
// calls layer_done for every layer once all are computed. Both sides stamp steady_clock,
// which is system-wide, so the decoder's ready time and the prefiller's compute times compare.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/kv/receiver.hpp"
#include "fabric/kv/sender.hpp"
#include "fabric_proc/child_process.hpp"
#include "registration.hpp"

using namespace fabric;
using namespace fabric::kv;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string provider = "tcp";
  std::uint32_t layers = 94;
  std::uint32_t tokens = 2048;
  std::uint32_t tokens_per_page = 64;
  std::uint32_t kv_heads = 2;  // this rank's: Qwen3-235B has 4 KV heads, TP2 here
  std::uint32_t head_size = 128;
  std::uint32_t compute_us = 3000;
  std::uint32_t repeat = 5;
  std::uint32_t reg_tensors = 1000;
  bool registration_only = false;
  // Two netbed hosts instead of loopback: each role enters its network namespace and binds its
  // NIC's address (docs/netbed.md). Empty: both on 127.0.0.1.
  std::string prefill_netns, decode_netns;
  std::string prefill_bind = "127.0.0.1", decode_bind = "127.0.0.1";
  std::string json = "kv-bench.json";
};

// Steps between the two processes wait at most this long (a request of --repeat is far shorter).
constexpr std::chrono::seconds kStep{300};
// The decoder process never outlives this.
constexpr std::chrono::seconds kDecoderLifetime{3600};

KvLayout layout_of(const Options& o) {
  const std::uint32_t pages = (o.tokens + o.tokens_per_page - 1) / o.tokens_per_page;
  return vllm_hnd({o.layers, pages, o.tokens_per_page, o.kv_heads, {0, o.kv_heads}, o.head_size, 2});
}

// Moves this (still single-threaded) process into /run/netns/NAME, so every engine thread lives
// there.
void enter_netns(const std::string& name) {
  if (name.empty()) return;
  const std::string path = "/run/netns/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "entering %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(1);
  }
  ::close(fd);
}

std::unique_ptr<TransferEngine> engine_of(const Options& o, const std::string& bind) {
  EngineConfig c;
  c.provider = o.provider;
  c.bind_address = bind;
  auto e = TransferEngine::create(c);
  if (!e.ok()) {
    std::fprintf(stderr, "engine: %s\n", e.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(*e);
}

std::vector<std::vector<std::byte>> alloc(const KvLayout& l) {
  std::vector<std::vector<std::byte>> m;
  for (std::uint32_t i = 0; i < l.num_regions; ++i) m.emplace_back(2 * l.page_stride * l.num_pages, std::byte{1});
  return m;
}

std::int64_t ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int decoder(const Options& o, proc::Channel& ch) {
  enter_netns(o.decode_netns);
  auto engine = engine_of(o, o.decode_bind);
  KvLayout l = layout_of(o);
  auto mem = alloc(l);
  ReceiverConfig cfg;
  cfg.layout = l;
  for (auto& m : mem) cfg.regions.push_back({m.data(), m.size()});
  auto rx = Receiver::create(*engine, cfg);
  if (!rx.ok()) {
    std::fprintf(stderr, "decoder: %s\n", rx.status().to_string().c_str());
    return 1;
  }
  if (!ch.send_addr(engine->main_address(), kStep)) return 1;
  auto peer = ch.recv_addr(kStep);
  if (!peer) return 1;
  const auto c0 = Clock::now();
  auto src = (*rx)->connect(*peer, std::chrono::seconds(30));
  const auto c1 = Clock::now();
  if (!src.ok()) {
    std::fprintf(stderr, "decoder: connect: %s\n", src.status().to_string().c_str());
    return 1;
  }
  // Registering this decoder's regions for the sender happened inside connect.
  if (!ch.send_pod<std::int64_t>(ns(c1) - ns(c0), kStep)) return 1;
  std::vector<std::uint32_t> pages(l.num_pages);
  std::iota(pages.begin(), pages.end(), 0u);
  const std::uint32_t s = *src;
  for (std::uint32_t i = 0;; ++i) {
    auto go = ch.recv_pod<std::uint32_t>(kStep);
    if (!go) return 1;
    if (*go == 0) break;
    const std::string id = "r" + std::to_string(i);
    if (!(*rx)->request(id, pages, o.tokens, std::span(&s, 1)).ok()) return 1;
    auto st = (*rx)->wait(id, std::chrono::seconds(120));
    const std::int64_t ready = ns(Clock::now());
    const std::int64_t ok = st.ok() && st->state == State::done ? 1 : 0;
    if (!ch.send_pod(ok, kStep) || !ch.send_pod(ready, kStep)) return 1;
    (void)(*rx)->release(id);
  }
  return 0;
}

// vLLM allocates one tensor per layer; 256 KiB each.
constexpr std::uint64_t kTensorBytes = 256 * 1024;

void put_registration(nlohmann::json& out, const RegistrationFigures& f) {
  out["registration_tensors"] = f.tensors;
  out["registration_tensor_bytes"] = f.tensor_bytes;
  out["registration_ms"] = f.reg_mrs_ms;  // what the kv module does (one batch)
  out["registration_reg_mr_each_ms"] = f.reg_mr_ms;
  out["registration_raw_fi_mr_reg_ms"] = f.raw_ms;
  out["registration_vs_raw"] = f.raw_ms > 0 ? f.reg_mrs_ms / f.raw_ms : 0.0;
}

void print_registration(const RegistrationFigures& f) {
  std::printf("registration of %u tensors of %llu KiB: reg_mrs %.1f ms, reg_mr each %.1f ms, "
              "raw fi_mr_reg %.1f ms (reg_mrs / raw = %.2f)\n",
              f.tensors, static_cast<unsigned long long>(f.tensor_bytes / 1024), f.reg_mrs_ms,
              f.reg_mr_ms, f.raw_ms, f.raw_ms > 0 ? f.reg_mrs_ms / f.raw_ms : 0.0);
}

struct Measurement {
  std::string mode;
  std::vector<double> compute_done_ms;  // per layer, from the start
  double last_compute_ms = 0, ready_ms = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"fabric-kv-bench: layerwise KV push vs one batch after prefill"};
  app.add_option("--provider", o.provider, "libfabric provider (tcp, shm, sockets)");
  app.add_option("--layers", o.layers);
  app.add_option("--tokens", o.tokens, "prompt tokens per request");
  app.add_option("--tokens-per-page", o.tokens_per_page);
  app.add_option("--kv-heads", o.kv_heads, "KV heads on each rank");
  app.add_option("--head-size", o.head_size);
  app.add_option("--compute-us", o.compute_us, "simulated compute per layer");
  app.add_option("--repeat", o.repeat, "requests per mode");
  app.add_option("--reg-tensors", o.reg_tensors, "tensors for the registration measurement");
  app.add_flag("--registration-only", o.registration_only,
               "measure only the registration of --reg-tensors tensors");
  app.add_option("--prefill-netns", o.prefill_netns, "network namespace of the prefiller (netbed host)");
  app.add_option("--decode-netns", o.decode_netns, "network namespace of the decoder (netbed host)");
  app.add_option("--prefill-bind", o.prefill_bind, "the prefiller engine's bind address");
  app.add_option("--decode-bind", o.decode_bind, "the decoder engine's bind address");
  app.add_option("--json", o.json);
  CLI11_PARSE(app, argc, argv);
  // On netbed hosts the engines bind their NIC (nic0); otherwise loopback only.
  const char* iface = o.prefill_netns.empty() ? "lo" : "nic0";
  ::setenv("FI_TCP_IFACE", iface, 1);
  ::setenv("FI_SOCKETS_IFACE", iface, 1);
  if (o.registration_only) {
    enter_netns(o.prefill_netns);
    auto engine = engine_of(o, o.prefill_bind);
    const RegistrationFigures f = measure_registration(*engine, o.provider, o.reg_tensors, kTensorBytes);
    nlohmann::json out;
    out["provider"] = o.provider;
    put_registration(out, f);
    std::ofstream(o.json) << out.dump(2) << "\n";
    print_registration(f);
    return 0;
  }

  // Before this process has any engine thread (fabric_proc/child_process.hpp).
  proc::ChildProcess child = proc::spawn_child([&o](proc::Channel& ch) { return decoder(o, ch); },
                                               kDecoderLifetime);
  proc::Channel& ch = child.channel();
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "fabric-kv-bench: %s: %s\n", what.c_str(), ch.last_error().c_str());
    (void)child.kill();
    return 1;
  };

  enter_netns(o.prefill_netns);
  auto engine = engine_of(o, o.prefill_bind);
  KvLayout l = layout_of(o);
  auto mem = alloc(l);
  SenderConfig cfg;
  cfg.layout = l;
  std::vector<MemoryRange> ranges;
  for (auto& m : mem) ranges.push_back({m.data(), m.size()});
  auto regs = engine->reg_mrs(ranges);
  if (!regs.ok()) {
    std::fprintf(stderr, "fabric-kv-bench: registering: %s\n", regs.status().to_string().c_str());
    return 1;
  }
  for (auto& r : *regs) cfg.regions.push_back(r.handle);
  auto tx = Sender::create(*engine, cfg);
  if (!tx.ok()) {
    std::fprintf(stderr, "fabric-kv-bench: sender: %s\n", tx.status().to_string().c_str());
    return 1;
  }
  auto peer = ch.recv_addr(kStep);
  if (!peer) return fail("the decoder's address");
  if (!ch.send_addr(engine->main_address(), kStep)) return fail("sending our address");
  auto connect_ns = ch.recv_pod<std::int64_t>(kStep);
  if (!connect_ns) return fail("the decoder's connect time");

  const std::uint64_t page_bytes = l.page_stride;
  const std::uint64_t pages_per_request = std::uint64_t{l.num_pages} * l.parts() * l.num_layers;
  const std::uint64_t bytes = pages_per_request * page_bytes;
  std::vector<std::uint32_t> pages(l.num_pages);
  std::iota(pages.begin(), pages.end(), 0u);
  std::vector<Measurement> runs;
  std::uint32_t index = 0;
  for (const std::string mode : {"layerwise", "bulk"}) {
    for (std::uint32_t rep = 0; rep < o.repeat; ++rep, ++index) {
      const std::string id = "r" + std::to_string(index);
      if (!ch.send_pod<std::uint32_t>(1, kStep)) return fail("starting a request");
      if (!(*tx)->prepare(id, pages, o.tokens).ok()) return 1;
      Measurement r;
      r.mode = mode;
      const auto t0 = Clock::now();
      auto t = t0;
      for (std::uint32_t layer = 0; layer < l.num_layers; ++layer) {
        t += std::chrono::microseconds(o.compute_us);
        std::this_thread::sleep_until(t);
        r.compute_done_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (mode == "layerwise") (void)(*tx)->layer_done(id, layer);
      }
      const auto last = Clock::now();
      if (mode == "bulk") {
        for (std::uint32_t layer = 0; layer < l.num_layers; ++layer) (void)(*tx)->layer_done(id, layer);
      }
      const auto ok = ch.recv_pod<std::int64_t>(kStep);
      const auto ready_ns = ok ? ch.recv_pod<std::int64_t>(kStep) : std::nullopt;
      if (!ready_ns) return fail("the decoder's result of " + id);
      const std::int64_t ready = *ready_ns;
      if (*ok != 1) {
        std::fprintf(stderr, "request %s failed\n", id.c_str());
        return 1;
      }
      r.last_compute_ms = std::chrono::duration<double, std::milli>(last - t0).count();
      r.ready_ms = static_cast<double>(ready - ns(t0)) / 1e6;
      runs.push_back(r);
      for (int i = 0; i < 1000 && (*tx)->active_requests() > 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the sender's drain, bounded
      }
      (void)(*tx)->release(id);
    }
  }
  if (!ch.send_pod<std::uint32_t>(0, kStep)) return fail("stopping the decoder");
  if (const proc::ChildExit exit = child.wait_exit(kStep); !exit.ok()) {
    std::fprintf(stderr, "fabric-kv-bench: the decoder %s\n", exit.to_string().c_str());
    return 1;
  }

  const RegistrationFigures reg = measure_registration(*engine, o.provider, o.reg_tensors, kTensorBytes);

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  nlohmann::json out;
  out["provider"] = o.provider;
  out["layers"] = o.layers;
  out["tokens"] = o.tokens;
  out["page_bytes"] = page_bytes;
  out["pages_per_request"] = pages_per_request;
  out["bytes_per_request"] = bytes;
  out["compute_us_per_layer"] = o.compute_us;
  std::vector<double> exposed_l, exposed_b, bulk_xfer;
  for (const Measurement& r : runs) {
    const double exposed = r.ready_ms - r.last_compute_ms;
    (r.mode == "layerwise" ? exposed_l : exposed_b).push_back(exposed);
    nlohmann::json j;
    j["mode"] = r.mode;
    j["last_compute_ms"] = r.last_compute_ms;
    j["ready_ms"] = r.ready_ms;
    j["last_layer_to_ready_ms"] = exposed;
    out["runs"].push_back(j);
  }
  const double bulk_ms = median(exposed_b);  // the whole transfer, nothing overlapped
  const double link_ms = bulk_ms / o.layers;
  const double layer_ms = median(exposed_l);
  out["bulk_transfer_ms"] = bulk_ms;
  out["link_ms_per_layer"] = link_ms;
  out["compute_ms_per_layer"] = o.compute_us / 1000.0;
  out["layerwise_last_layer_to_ready_ms"] = layer_ms;
  out["fraction_hidden"] = bulk_ms > 0 ? 1.0 - layer_ms / bulk_ms : 0.0;
  out["pages_per_s"] = bulk_ms > 0 ? pages_per_request / (bulk_ms / 1e3) : 0.0;
  out["gbit_per_s"] = bulk_ms > 0 ? bytes * 8.0 / (bulk_ms / 1e3) / 1e9 : 0.0;
  out["target_last_layer_to_ready_ms"] = link_ms + 1.0;
  put_registration(out, reg);
  out["receiver_connect_ms"] = static_cast<double>(*connect_ns) / 1e6;
  out["prefill_netns"] = o.prefill_netns;
  out["decode_netns"] = o.decode_netns;
  std::ofstream(o.json) << out.dump(2) << "\n";
  std::printf("%s: %u layers x %llu pages of %llu B (%.1f MiB/request), compute %.2f ms/layer\n",
              o.provider.c_str(), o.layers, static_cast<unsigned long long>(pages_per_request / o.layers),
              static_cast<unsigned long long>(page_bytes), bytes / 1048576.0, o.compute_us / 1000.0);
  std::printf("bulk transfer %.2f ms (%.3f ms/layer link, %.0f pages/s, %.2f Gbit/s)\n", bulk_ms,
              link_ms, out["pages_per_s"].get<double>(), out["gbit_per_s"].get<double>());
  std::printf("layerwise: last layer -> ready %.3f ms (target <= %.3f), %.1f %% of the transfer hidden\n",
              layer_ms, link_ms + 1.0, 100.0 * out["fraction_hidden"].get<double>());
  print_registration(reg);
  return 0;
}
