#include "cluster.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>

#include "fabric/engine.hpp"
#include "fabric/kv/receiver.hpp"
#include "fabric/kv/sender.hpp"
#include "fabric_test/data.hpp"
#include "fabric_test/env.hpp"
#include "fabric_test/victim.hpp"

namespace fabric::kv::test {

using fabric::test::Channel;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kTailBytes = 32;
constexpr std::byte kSentinel{0xA5};
constexpr auto kStep = 60s;

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

std::uint64_t id_hash(const std::string& id) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : id) h = (h ^ static_cast<std::uint8_t>(c)) * 1099511628211ull;
  return h;
}

void entry_pattern(std::span<std::byte> out, const std::string& id, std::uint32_t layer,
                   std::uint32_t part, std::uint32_t head, std::uint32_t token) {
  std::uint64_t seed = mix(mix(mix(mix(id_hash(id), layer), part), head), token);
  fabric::test::fill_random(out, seed);
}

std::vector<HeadRange> heads_of(const Scenario& s, const Group& g) {
  std::vector<HeadRange> out;
  for (std::uint32_t r = 0; r < g.tp; ++r) {
    if (g.kind == Kind::mla) {
      out.push_back({0, 1});
      continue;
    }
    auto sh = shard_heads(s.kv_heads, g.tp, r).value();
    out.push_back({sh.begin, sh.begin + sh.count});
  }
  return out;
}

std::uint32_t pages_needed(const Scenario& s, std::uint32_t g) {
  std::uint32_t n = 4;
  for (const Job& j : s.jobs) {
    if (j.prefill == g || j.decode == g) {
      n += (j.tokens + s.groups[g].tokens_per_page - 1) / s.groups[g].tokens_per_page;
    }
  }
  return n;
}

KvLayout layout_of(const Scenario& s, std::uint32_t g, std::uint32_t rank) {
  const Group& grp = s.groups[g];
  const std::uint32_t pages = pages_needed(s, g);
  if (grp.kind == Kind::mla) {
    return mla_layout(s.layers, pages, grp.tokens_per_page, s.head_size, s.elem_bytes);
  }
  CacheShape shape{s.layers, pages, grp.tokens_per_page, s.kv_heads,
                   shard_heads(s.kv_heads, grp.tp, rank).value(), s.head_size, s.elem_bytes};
  switch (grp.kind) {
    case Kind::nhd: return vllm_nhd(shape);
    case Kind::hnd: return vllm_hnd(shape);
    case Kind::cpu: return vllm_cpu(shape);
    case Kind::fused: return fused_hnd(shape);
    case Kind::heads_first: return heads_first(shape);
    case Kind::mla: break;
  }
  return vllm_nhd(shape);
}

// One rank's engine, KV memory and page pool.
struct RankState {
  // Stopped before the members below go: its threads call back into them and write into memory.
  ~RankState() {
    if (engine) engine->stop();
  }
  std::unique_ptr<TransferEngine> engine;
  KvLayout layout;
  std::vector<std::vector<std::byte>> memory;  // per region
  std::vector<std::uint32_t> free_pages;
  std::size_t pool_size = 0;
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t changes = 0;

  std::vector<std::uint32_t> take(std::uint32_t n) {
    std::vector<std::uint32_t> out;
    for (std::uint32_t i = 0; i < n && !free_pages.empty(); ++i) {
      out.push_back(free_pages.back());
      free_pages.pop_back();
    }
    return out;
  }
  void give(const std::vector<std::uint32_t>& pages) {
    free_pages.insert(free_pages.end(), pages.begin(), pages.end());
  }
  void on_change() {
    {
      std::lock_guard lock(mutex);
      ++changes;
    }
    cv.notify_all();
  }
  std::span<std::byte> entry(std::uint32_t layer, std::uint32_t part, std::uint32_t page,
                             std::uint32_t head, std::uint32_t token) {
    const PartBase& b = layout.base(layer, part);
    return std::span(memory[b.region]).subspan(layout.offset(layer, part, page, head, token),
                                               layout.entry_bytes());
  }
};

Result<std::unique_ptr<TransferEngine>> make_engine(const Scenario& s, bool stalls = false) {
  EngineConfig c;
  c.provider = s.provider;
  if (s.provider == "verbs") c.backend = Backend::verbs;  // inside the rxe VM
  c.bind_address = "127.0.0.1";
  c.request_timeout = s.request_timeout;
  // The rank that gets SIGSTOPped polls rarely while idle (fabric_test/victim.hpp).
  return TransferEngine::create(stalls ? fabric::test::victim_config(c) : c);
}

Status alloc_memory(RankState& st, std::size_t extra_region_bytes) {
  std::vector<std::uint64_t> sizes(st.layout.num_regions, 0);
  const std::uint64_t span = st.layout.span_bytes();
  for (const PartBase& b : st.layout.bases) {
    sizes[b.region] = std::max(sizes[b.region], b.offset + span);
  }
  for (auto n : sizes) st.memory.emplace_back(n, std::byte{0});
  st.memory.emplace_back(std::max<std::size_t>(extra_region_bytes, 8), std::byte{0});
  st.free_pages.resize(st.layout.num_pages);
  std::iota(st.free_pages.rbegin(), st.free_pages.rend(), 0u);
  st.pool_size = st.free_pages.size();
  return Status::success();
}

std::string encode_result(const RankResult& r) {
  std::ostringstream o;
  o << r.done << ' ' << r.failed << ' ' << r.cancelled << ' ' << (r.pages_returned ? 1 : 0) << ' '
    << r.first_error;
  return o.str();
}

// Waits (bounded) until pred() holds, re-checking on every state change.
template <typename Pred>
bool wait_for(RankState& st, std::chrono::milliseconds timeout, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(st.mutex);
  while (true) {
    lock.unlock();
    if (pred()) return true;
    lock.lock();
    if (std::chrono::steady_clock::now() >= deadline) return false;
    const auto seen = st.changes;
    st.cv.wait_for(lock, 50ms, [&] { return st.changes != seen; });
  }
}

void tally(RankResult& r, const std::string& id, const RequestStatus& s) {
  if (s.state == State::done) ++r.done;
  if (s.state == State::cancelled) ++r.cancelled;
  if (s.state == State::failed) {
    ++r.failed;
    if (r.first_error.empty()) r.first_error = id + ": " + s.error.to_string();
  }
}

int prefill_rank(Channel& ch, const Scenario& s, std::uint32_t g, std::uint32_t rank,
                 int global_index) {
  RankState st;
  auto engine = make_engine(s, global_index == s.stall_rank);
  CHILD_REQUIRE_OK(engine.status());
  st.engine = std::move(*engine);
  st.layout = layout_of(s, g, rank);
  std::vector<const Job*> jobs;
  for (const Job& j : s.jobs) {
    if (j.prefill == g) jobs.push_back(&j);
  }
  CHILD_REQUIRE_OK(alloc_memory(st, jobs.size() * kTailBytes));
  std::vector<MrHandle> regions;
  for (std::uint32_t i = 0; i < st.layout.num_regions; ++i) {
    auto reg = st.engine->reg_mr(st.memory[i].data(), st.memory[i].size());
    CHILD_REQUIRE_OK(reg.status());
    regions.push_back(reg->handle);
  }
  auto tail_reg = st.engine->reg_mr(st.memory.back().data(), st.memory.back().size());
  CHILD_REQUIRE_OK(tail_reg.status());

  SenderConfig cfg;
  cfg.layout = st.layout;
  cfg.regions = regions;
  cfg.liveness.heartbeat_interval = s.heartbeat;
  cfg.receiver_timeout = s.receiver_timeout;
  cfg.on_state = [&st](const std::string&, const RequestStatus&) { st.on_change(); };
  auto sender = Sender::create(*st.engine, cfg);
  CHILD_REQUIRE_OK(sender.status());
  CHILD_REQUIRE(ch.send_addr(st.engine->main_address()), ch.last_error());
  CHILD_REQUIRE(ch.expect("go", kStep), ch.last_error());

  // Prepare every job: pages filled with the pattern of this rank's heads.
  std::map<std::string, std::vector<std::uint32_t>> pages_of;
  std::vector<const Job*> served;
  const auto my_heads = HeadRange{st.layout.head_begin, st.layout.head_begin + st.layout.num_heads};
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    const Job& j = *jobs[k];
    auto pages = st.take((j.tokens + st.layout.tokens_per_page - 1) / st.layout.tokens_per_page);
    CHILD_REQUIRE(pages.size() * st.layout.tokens_per_page >= j.tokens, "page pool exhausted");
    for (std::uint32_t l = 0; l < st.layout.num_layers; ++l) {
      for (std::uint32_t c = 0; c < st.layout.parts(); ++c) {
        for (std::uint32_t t = 0; t < j.tokens; ++t) {
          for (std::uint32_t h = my_heads.begin; h < my_heads.end; ++h) {
            entry_pattern(st.entry(l, c, pages[t / st.layout.tokens_per_page], h,
                                   t % st.layout.tokens_per_page),
                          j.id, l, c, h, t);
          }
        }
      }
    }
    auto tail = std::span(st.memory.back()).subspan(k * kTailBytes, kTailBytes);
    entry_pattern(tail, j.id, 9999, 0, 0, 0);
    auto counts = receivers_per_source(heads_of(s, s.groups[g]), heads_of(s, s.groups[j.decode]));
    CHILD_REQUIRE_OK(counts.status());
    if ((*counts)[rank] == 0) {  // the decoders take this job's heads from other replicas
      st.give(pages);
      continue;
    }
    CHILD_REQUIRE_OK((*sender)->prepare(j.id, pages, j.tokens, (*counts)[rank],
                                        LocalSlice{tail_reg->handle, k * kTailBytes}));
    pages_of[j.id] = std::move(pages);
    served.push_back(&j);
  }
  jobs = served;
  // Layer by layer over all jobs, as a batched prefill computes them.
  for (std::uint32_t l = 0; l < st.layout.num_layers; ++l) {
    if (global_index == s.stall_rank && l == s.stall_after_layers) {
      if (s.provider == "shm") {
        // libfabric 1.17's shm guards each endpoint's region with a process-shared spinlock:
        // a process stopped or killed inside a WRITE into the decoder's region keeps the
        // decoder's lock, and the decoder's progress spins until it resumes (for good once it
        // is killed; docs/reliability.md#shm-locks). So the stall begins with nothing posted.
        const bool idle = wait_for(st, kStep, [&] { return st.engine->outstanding_requests() == 0; });
        CHILD_REQUIRE(idle, "the stalled prefiller's writes did not complete");
      }
      CHILD_REQUIRE(ch.send_string("stalled"), ch.last_error());
      CHILD_REQUIRE(ch.expect("resume", 300s), ch.last_error());
    }
    for (const Job* j : jobs) {
      if (j->prefill_cancel_after != 0 && j->prefill_cancel_after == l) {
        CHILD_REQUIRE_OK((*sender)->cancel(j->id));
      }
      if (s.chunk_tokens == 0) {
        CHILD_REQUIRE_OK((*sender)->layer_done(j->id, l));
        continue;
      }
      for (std::uint32_t b = 0; b < j->tokens; b += s.chunk_tokens) {
        CHILD_REQUIRE_OK(
            (*sender)->layer_done(j->id, l, {b, std::min(j->tokens, b + s.chunk_tokens)}));
      }
    }
  }
  RankResult result;
  const bool settled = wait_for(st, kStep, [&] { return (*sender)->active_requests() == 0; });
  CHILD_REQUIRE(settled, std::to_string((*sender)->active_requests()) + " requests still open");
  for (const Job* j : jobs) {
    auto ps = (*sender)->poll(j->id);
    CHILD_REQUIRE_OK(ps.status());
    tally(result, j->id, *ps);
    CHILD_REQUIRE_OK((*sender)->release(j->id));
    st.give(pages_of[j->id]);
  }
  result.pages_returned = st.free_pages.size() == st.pool_size;
  CHILD_REQUIRE(ch.send_string(encode_result(result)), ch.last_error());
  CHILD_REQUIRE(ch.expect("bye", 300s), ch.last_error());
  sender->reset();
  return fabric::test::kChildOk;
}

int decode_rank(Channel& ch, const Scenario& s, std::uint32_t g, std::uint32_t rank,
                std::uint32_t epoch) {
  RankState st;
  auto engine = make_engine(s);
  CHILD_REQUIRE_OK(engine.status());
  st.engine = std::move(*engine);
  st.layout = layout_of(s, g, rank);
  std::vector<const Job*> jobs;
  for (const Job& j : s.jobs) {
    if (j.decode == g && j.epoch == epoch) jobs.push_back(&j);
  }
  CHILD_REQUIRE_OK(alloc_memory(st, jobs.size() * kTailBytes));
  ReceiverConfig cfg;
  cfg.layout = st.layout;
  for (auto& m : st.memory) cfg.regions.push_back({m.data(), m.size(), Device::host()});
  cfg.spread = rank;
  cfg.liveness.heartbeat_interval = s.heartbeat;
  cfg.quarantine = s.quarantine;
  cfg.on_state = [&st](const std::string&, const RequestStatus&) { st.on_change(); };
  auto receiver = Receiver::create(*st.engine, cfg);
  CHILD_REQUIRE_OK(receiver.status());
  CHILD_REQUIRE(ch.send_addr(st.engine->main_address()), ch.last_error());

  auto n = ch.recv_pod<std::uint32_t>(kStep);
  CHILD_REQUIRE(n.has_value(), ch.last_error());
  std::vector<std::uint32_t> source_index;
  for (std::uint32_t i = 0; i < *n; ++i) {
    auto addr = ch.recv_addr(kStep);
    CHILD_REQUIRE(addr.has_value(), ch.last_error());
    auto idx = (*receiver)->connect(*addr, kStep);
    CHILD_REQUIRE_OK(idx.status());
    source_index.push_back(*idx);
  }
  // Global prefill rank list -> the indices of each prefill group's ranks.
  std::vector<std::vector<std::uint32_t>> group_sources(s.groups.size());
  {
    std::size_t k = 0;
    for (std::uint32_t pg = 0; pg < s.groups.size(); ++pg) {
      if (!s.groups[pg].prefill) continue;
      for (std::uint32_t r = 0; r < s.groups[pg].tp; ++r) group_sources[pg].push_back(source_index[k++]);
    }
  }
  CHILD_REQUIRE(ch.send_string("connected"), ch.last_error());
  CHILD_REQUIRE(ch.expect("go", kStep), ch.last_error());

  std::map<std::string, std::vector<std::uint32_t>> pages_of;
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    const Job& j = *jobs[k];
    auto pages = st.take((j.tokens + st.layout.tokens_per_page - 1) / st.layout.tokens_per_page);
    CHILD_REQUIRE(pages.size() * st.layout.tokens_per_page >= j.tokens, "page pool exhausted");
    auto expected = (*receiver)->request(j.id, pages, j.tokens, group_sources[j.prefill],
                                         Tail{st.layout.num_regions, k * kTailBytes, kTailBytes});
    CHILD_REQUIRE_OK(expected.status());
    pages_of[j.id] = std::move(pages);
    if (j.decode_cancel == 1) CHILD_REQUIRE_OK((*receiver)->cancel(j.id));
  }
  std::vector<bool> cancelled(jobs.size(), false);
  const bool settled = wait_for(st, 3 * kStep, [&] {
    for (std::size_t k = 0; k < jobs.size(); ++k) {
      if (jobs[k]->decode_cancel != 2 || cancelled[k]) continue;
      auto ps = (*receiver)->poll(jobs[k]->id);
      if (ps.ok() && ps->state == State::transferring) {
        (void)(*receiver)->cancel(jobs[k]->id);
        cancelled[k] = true;
      }
    }
    return (*receiver)->active_requests() == 0;
  });
  CHILD_REQUIRE(settled, std::to_string((*receiver)->active_requests()) + " requests still open");

  RankResult result;
  const HeadRange mine{st.layout.head_begin, st.layout.head_begin + st.layout.num_heads};
  std::vector<std::byte> want(st.layout.entry_bytes());
  std::vector<std::vector<std::uint32_t>> reclaimed;
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    const Job& j = *jobs[k];
    auto ps = (*receiver)->poll(j.id);
    CHILD_REQUIRE_OK(ps.status());
    tally(result, j.id, *ps);
    const auto& pages = pages_of[j.id];
    if (ps->state == State::done) {
      for (std::uint32_t l = 0; l < st.layout.num_layers; ++l) {
        for (std::uint32_t c = 0; c < st.layout.parts(); ++c) {
          for (std::uint32_t t = 0; t < j.tokens; ++t) {
            for (std::uint32_t h = mine.begin; h < mine.end; ++h) {
              entry_pattern(want, j.id, l, c, h, t);
              auto got = st.entry(l, c, pages[t / st.layout.tokens_per_page], h,
                                  t % st.layout.tokens_per_page);
              CHILD_REQUIRE(std::memcmp(got.data(), want.data(), want.size()) == 0,
                            j.id + " layer " + std::to_string(l) + " part " + std::to_string(c) +
                                " head " + std::to_string(h) + " token " + std::to_string(t));
            }
          }
        }
      }
      std::vector<std::byte> tail(kTailBytes);
      entry_pattern(tail, j.id, 9999, 0, 0, 0);
      CHILD_REQUIRE(std::memcmp(st.memory.back().data() + k * kTailBytes, tail.data(),
                                kTailBytes) == 0,
                    j.id + " tail");
    }
    if (s.sentinel_check && ps->state != State::done) {
      for (std::uint32_t l = 0; l < st.layout.num_layers; ++l) {
        for (std::uint32_t c = 0; c < st.layout.parts(); ++c) {
          for (std::uint32_t p : pages) {
            for (std::uint32_t h = mine.begin; h < mine.end; ++h) {
              for (std::uint32_t t = 0; t < st.layout.tokens_per_page; ++t) {
                auto e = st.entry(l, c, p, h, t);
                std::fill(e.begin(), e.end(), kSentinel);
              }
            }
          }
        }
      }
      reclaimed.push_back(pages);
    }
    CHILD_REQUIRE_OK((*receiver)->release(j.id));
    st.give(pages);
  }
  result.pages_returned = st.free_pages.size() == st.pool_size;
  CHILD_REQUIRE(ch.send_string(encode_result(result)), ch.last_error());
  if (s.sentinel_check) {
    CHILD_REQUIRE(ch.expect("check", 300s), ch.last_error());
    std::size_t landed = 0;
    for (const auto& pages : reclaimed) {
      for (std::uint32_t l = 0; l < st.layout.num_layers; ++l) {
        for (std::uint32_t c = 0; c < st.layout.parts(); ++c) {
          for (std::uint32_t p : pages) {
            for (std::uint32_t h = mine.begin; h < mine.end; ++h) {
              for (std::uint32_t t = 0; t < st.layout.tokens_per_page; ++t) {
                for (std::byte b : st.entry(l, c, p, h, t)) landed += b != kSentinel ? 1 : 0;
              }
            }
          }
        }
      }
    }
    CHILD_REQUIRE(ch.send_string(std::to_string(landed)), ch.last_error());
  }
  CHILD_REQUIRE(ch.expect("bye", 300s), ch.last_error());
  receiver->reset();
  return fabric::test::kChildOk;
}

}  // namespace

std::vector<Job> random_jobs(const Scenario& s, std::uint32_t n, std::uint32_t max_tokens,
                             std::uint64_t seed, bool abort_storm) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> prefill, decode;
  for (std::uint32_t g = 0; g < s.groups.size(); ++g) (s.groups[g].prefill ? prefill : decode).push_back(g);
  std::vector<Job> jobs;
  for (std::uint32_t i = 0; i < n; ++i) {
    Job j;
    j.id = "req-" + std::to_string(i);
    j.tokens = 1 + static_cast<std::uint32_t>(rng() % max_tokens);
    j.prefill = prefill[rng() % prefill.size()];
    j.decode = decode[rng() % decode.size()];
    if (abort_storm) {
      const auto r = rng() % 6;
      if (r == 0) j.decode_cancel = 1;
      if (r == 1) j.decode_cancel = 2;
      if (r == 2) j.prefill_cancel_after = 1 + static_cast<std::uint32_t>(rng() % (s.layers - 1));
    }
    jobs.push_back(j);
  }
  return jobs;
}

Cluster::Cluster(Scenario s) : s_(std::move(s)) {}

Cluster::~Cluster() = default;

bool Cluster::is_prefill(std::size_t rank) const { return s_.groups[rank_of_.at(rank).first].prefill; }

::testing::AssertionResult Cluster::start() {
  fabric::test::use_loopback_environment();
  int prefill_index = 0;
  for (std::uint32_t g = 0; g < s_.groups.size(); ++g) {
    for (std::uint32_t r = 0; r < s_.groups[g].tp; ++r) {
      const Scenario s = s_;
      if (s_.groups[g].prefill) {
        const int idx = prefill_index++;
        children_.push_back(fabric::test::spawn_child(
            [s, g, r, idx](Channel& ch) { return prefill_rank(ch, s, g, r, idx); }, 600s));
      } else {
        children_.push_back(fabric::test::spawn_child(
            [s, g, r](Channel& ch) { return decode_rank(ch, s, g, r, 0); }, 600s));
      }
      rank_of_.emplace_back(g, r);
    }
  }
  std::vector<NetAddr> addrs;
  for (auto& c : children_) {
    auto a = c.channel().recv_addr(kStep);
    if (!a) return ::testing::AssertionFailure() << "no address: " << c.channel().last_error();
    addrs.push_back(*a);
  }
  for (std::size_t i = 0; i < children_.size(); ++i) {
    if (is_prefill(i)) prefill_addrs_.push_back(addrs[i]);
  }
  for (std::size_t i = 0; i < children_.size(); ++i) {
    if (is_prefill(i)) continue;
    auto& ch = children_[i].channel();
    if (!ch.send_pod(static_cast<std::uint32_t>(prefill_addrs_.size()))) {
      return ::testing::AssertionFailure() << ch.last_error();
    }
    for (const auto& a : prefill_addrs_) ch.send_addr(a);
  }
  for (std::size_t i = 0; i < children_.size(); ++i) {
    if (!is_prefill(i) && !children_[i].channel().expect("connected", kStep)) {
      return ::testing::AssertionFailure()
             << "decode rank " << i << " did not connect: " << children_[i].channel().last_error();
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Cluster::go() {
  for (auto& c : children_) {
    if (!c.channel().send_string("go")) return ::testing::AssertionFailure() << c.channel().last_error();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Cluster::result(std::size_t rank, RankResult& out,
                                           std::chrono::milliseconds timeout) {
  auto& c = children_.at(rank);
  auto text = c.channel().recv_string(timeout);
  if (!text) {
    auto exit = c.wait_exit(1s);
    return ::testing::AssertionFailure() << "rank " << rank << " sent no result ("
                                         << c.channel().last_error() << "), " << exit.to_string();
  }
  std::istringstream in(*text);
  int pages = 0;
  in >> out.done >> out.failed >> out.cancelled >> pages;
  out.pages_returned = pages == 1;
  std::getline(in, out.first_error);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Cluster::finish(const std::vector<std::size_t>& skip) {
  ::testing::AssertionResult ok = ::testing::AssertionSuccess();
  for (std::size_t i = 0; i < children_.size(); ++i) {
    if (std::find(skip.begin(), skip.end(), i) != skip.end()) continue;
    children_[i].channel().send_string("bye");
  }
  for (std::size_t i = 0; i < children_.size(); ++i) {
    if (std::find(skip.begin(), skip.end(), i) != skip.end()) continue;
    auto exit = children_[i].wait_exit(kStep);
    if (!exit.ok()) ok = ::testing::AssertionFailure() << "rank " << i << ": " << exit.to_string();
  }
  return ok;
}

::testing::AssertionResult Cluster::restart_decoder(std::size_t rank) {
  const auto [g, r] = rank_of_.at(rank);
  const Scenario s = s_;
  children_[rank] = fabric::test::spawn_child(
      [s, g = g, r = r](Channel& ch) { return decode_rank(ch, s, g, r, 1); }, 600s);
  auto& ch = children_[rank].channel();
  if (!ch.recv_addr(kStep)) return ::testing::AssertionFailure() << ch.last_error();
  ch.send_pod(static_cast<std::uint32_t>(prefill_addrs_.size()));
  for (const auto& a : prefill_addrs_) ch.send_addr(a);
  if (!ch.expect("connected", kStep)) return ::testing::AssertionFailure() << ch.last_error();
  if (!ch.send_string("go")) return ::testing::AssertionFailure() << ch.last_error();
  return ::testing::AssertionSuccess();
}

}  // namespace fabric::kv::test
