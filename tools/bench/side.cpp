#include "side.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace bench {

namespace {

template <typename T>
T must(fabric::Result<T> r, const char* what) {
  if (!r) throw std::runtime_error(fmt::format("{}: {}", what, r.status().to_string()));
  return std::move(r).value();
}

std::string hex(const std::vector<std::uint8_t>& v) {
  std::string s;
  for (auto b : v) s += fmt::format("{:02x}", b);
  return s;
}

std::vector<std::uint8_t> unhex(const std::string& s) {
  std::vector<std::uint8_t> v;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2) {
    v.push_back(static_cast<std::uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  }
  return v;
}

fabric::EngineConfig engine_config(const SideConfig& cfg) {
  fabric::EngineConfig c;
  c.provider = cfg.provider;
  c.bind_address = cfg.bind_address;
  c.busy_poll = cfg.busy_poll;
  c.post_on_submit = cfg.post_on_submit;
  c.metrics = cfg.metrics;
  if (cfg.verbs) c.backend = fabric::Backend::verbs;
  c.record_post_timings = cfg.record_post_timings;
  if (!cfg.nics.empty()) {
    c.nics = cfg.nics;
    c.domains_per_group = static_cast<std::uint32_t>(cfg.nics.size());
    // A window of large writes queues for seconds behind a rate-limited NIC,
    // and a request's timer restarts only with its own completions.
    c.request_timeout = std::chrono::seconds(60);
  }
  if (cfg.groups > 1) {
    if (cfg.nics.size() % cfg.groups != 0) {
      throw std::runtime_error(fmt::format("--groups {}: the {} --nics do not split evenly",
                                           cfg.groups, cfg.nics.size()));
    }
    const std::size_t k = cfg.nics.empty() ? 1 : cfg.nics.size() / cfg.groups;
    c.domains_per_group = static_cast<std::uint32_t>(k);
    c.groups.assign(cfg.groups, fabric::GroupConfig{});
    for (std::size_t g = 0; g < cfg.groups && !cfg.nics.empty(); ++g) {
      c.groups[g].nics.assign(cfg.nics.begin() + g * k, cfg.nics.begin() + (g + 1) * k);
    }
    c.nics.clear();
  }
  if (cfg.request_timeout_ms != 0) c.request_timeout = std::chrono::milliseconds(cfg.request_timeout_ms);
  if (cfg.verbs_ack_timeout != 0) {
    c.verbs.ack_timeout = static_cast<std::uint8_t>(cfg.verbs_ack_timeout);
  }
  if (cfg.verbs_max_inline) c.verbs.max_inline_data = *cfg.verbs_max_inline;
  return c;
}

// `buf` registered on groups 1 .. groups-1 of `engine` (SideConfig::groups; group 0 is the
// caller's own registration).
std::vector<fabric::Registered> on_groups(fabric::TransferEngine& engine, const PageBuffer& buf,
                                          std::uint32_t groups) {
  std::vector<fabric::Registered> out;
  for (std::uint32_t g = 1; g < groups; ++g) {
    out.push_back(must(engine.reg_mr(buf.data, buf.size, fabric::Device::host(),
                                     fabric::Access::remote_write, g),
                       "engine reg_mr(buffer) on a group"));
  }
  return out;
}

}  // namespace

std::string libfabric_provider(const std::string& name) {
  if (name == "tcp") return "tcp;ofi_rxm";
  if (name == "udp") return "udp;ofi_rxd";
  return name;
}

bool engine_uses_delivery_complete(const std::string& name) {
  const std::string p = libfabric_provider(name);
  return p.starts_with("tcp") || p.starts_with("verbs");
}

fabric::Status spin_consume(fabric::ImmCounter& c, std::uint64_t n,
                            std::chrono::nanoseconds timeout, fabric::TransferEngine* progress) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (std::uint32_t i = 0;; ++i) {
    if (c.try_consume(n)) return fabric::Status::success();
    if (i % 1024 == 1023 && std::chrono::steady_clock::now() > deadline) {
      return {fabric::Errc::timeout, fmt::format("{} immediates did not arrive in time", n)};
    }
    if (progress != nullptr) {
      (void)progress->progress();
    } else if (i > 64) {
      std::this_thread::yield();
    }
  }
}

PageBuffer::PageBuffer(std::size_t len) : size(len) {
  data = static_cast<std::byte*>(std::aligned_alloc(4096, (len + 4095) / 4096 * 4096));
  if (data == nullptr) throw std::runtime_error("out of memory");
  // Fault every page in now, not inside a timed round.
  std::memset(data, 0, len);
}

PageBuffer::~PageBuffer() { std::free(data); }

Side::Side(const SideConfig& cfg)
    : buf(cfg.buffer_bytes),
      imm_buf(4096),
      engine(must(fabric::TransferEngine::create(engine_config(cfg)), "creating the engine")) {
  if (!cfg.verbs && cfg.nics.empty()) {
    raw.emplace(libfabric_provider(cfg.provider), engine_uses_delivery_complete(cfg.provider),
                cfg.bind_address);
  }
  // Readable by the peer too: the READ rows read the target's buffer.
  eng_buf = must(engine->reg_mr(buf.data, buf.size, fabric::Device::host(),
                                fabric::Access::remote_write | fabric::Access::remote_read),
                 "engine reg_mr(buffer)");
  eng_imm = must(engine->reg_mr(imm_buf.data, imm_buf.size), "engine reg_mr(imm)");
  group_bufs = on_groups(*engine, buf, cfg.groups);
  data_counter = must(engine->imm_counter(kDataImm), "imm_counter");
  ping_counter = must(engine->imm_counter(kPing), "imm_counter");
  pong_counter = must(engine->imm_counter(kPong), "imm_counter");
  if (cfg.metrics_ab || cfg.metrics_aa) {
    fabric::EngineConfig off = engine_config(cfg);
    off.metrics = cfg.metrics_aa;
    Unmetered& u = unmetered.emplace();
    u.engine = must(fabric::TransferEngine::create(off), "creating the metrics-off engine");
    u.buf = must(u.engine->reg_mr(buf.data, buf.size), "metrics-off engine reg_mr(buffer)");
    u.group_bufs = on_groups(*u.engine, buf, cfg.groups);
  }
  if (raw) {
    raw_buf = raw->register_region(buf.data, buf.size);
    raw_imm = raw->register_region(imm_buf.data, imm_buf.size);
  }
  if (cfg.pin_cpu >= 0) {
    const fabric::Status st = fabric::pin_current_thread(fabric::CpuSet::from({cfg.pin_cpu}));
    if (!st.ok()) throw std::runtime_error("pinning the bench thread: " + st.to_string());
  }
}

Side::~Side() {
  // The engine goes first so that its worker no longer touches memory that
  // the raw side or the buffers are about to release.
  if (unmetered) unmetered->engine->stop();
  if (engine) engine->stop();
}

std::string Side::hello() const {
  std::string line = fmt::format("hello {} {} {} {} {} {} {}", eng_buf.desc.to_string(),
                                 eng_imm.desc.to_string(), raw ? hex(raw->name()) : "-",
                                 raw_buf.remote.addr, raw_buf.remote.key, raw_imm.remote.addr,
                                 raw_imm.remote.key);
  for (const auto& g : group_bufs) line += " " + g.desc.to_string();
  return line;
}

Peer Peer::parse(const std::string& line) {
  std::istringstream in(line);
  std::string word, buf_desc, imm_desc, name;
  Peer p;
  in >> word >> buf_desc >> imm_desc >> name >> p.raw_buf.addr >> p.raw_buf.key >>
      p.raw_imm.addr >> p.raw_imm.key;
  if (!in || word != "hello") throw std::runtime_error("malformed hello: " + line);
  p.eng_buf = must(fabric::MrDesc::parse(buf_desc), "parsing the peer's MrDesc");
  p.eng_imm = must(fabric::MrDesc::parse(imm_desc), "parsing the peer's MrDesc");
  if (name != "-") p.raw_name = unhex(name);
  for (std::string group_desc; in >> group_desc;) {
    p.group_bufs.push_back(must(fabric::MrDesc::parse(group_desc), "parsing the peer's MrDesc"));
  }
  return p;
}

}  // namespace bench
