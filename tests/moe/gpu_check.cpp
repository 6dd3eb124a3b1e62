// The prepared GPU check of the MoE kernels (tools/gpu-check.sh runs it on a
// lent GPU): two processes share one GPU, their arenas are pinned host memory
// mapped for the kernels and moved by the shm provider. Every iteration runs
// the kernels in place of the host device around the same proxy steps, checks
// the count kernel's routes against the host plan byte for byte, the dispatch
// output and the combine result against the dense reference bit for bit, and
// times each kernel. Prints one JSON object per rank; exit 0 when all held,
// 77 (skip) without a GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/moe/group.hpp"
#include "fabric_test/env.hpp"
#include "moe_kernels.hpp"
#include "ranks.hpp"
#include "workload.hpp"

namespace k = fabric::kernels::moe;
using namespace fabric;
using namespace fabric::moe;
using namespace fabric::moe::test;

namespace {

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { (void)k::device_malloc(&ptr, std::max<std::size_t>(bytes, 16)); }
  ~DeviceBuffer() { if (ptr) (void)k::device_free(ptr); }
  template <typename T> T* as() const { return static_cast<T*>(ptr); }
};

#define GPU_OK(expr)                                                                  \
  do {                                                                                \
    const int gpu_ok_err_ = (expr);                                                   \
    if (gpu_ok_err_ != 0) throw std::runtime_error(std::string(#expr) + ": " + k::error_text(gpu_ok_err_)); \
  } while (0)

struct Timer {
  void* start = nullptr;
  void* end = nullptr;
  std::map<std::string, std::vector<float>> samples;
  Timer() { (void)k::event_create(&start); (void)k::event_create(&end); }
  ~Timer() { (void)k::event_destroy(start); (void)k::event_destroy(end); }
  template <typename Launch>
  void run(const std::string& name, void* stream, Launch launch) {
    GPU_OK(k::event_record(start, stream));
    GPU_OK(launch());
    GPU_OK(k::event_record(end, stream));
    GPU_OK(k::stream_synchronize(stream));
    float ms = 0;
    GPU_OK(k::event_elapsed_ms(start, end, &ms));
    samples[name].push_back(ms * 1000.0f);
  }
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0f : v[v.size() / 2];
}

MoeConfig check_config() {
  MoeConfig c;
  c.world_size = 2;
  c.num_experts = 16;
  c.hidden = 7168;
  c.top_k = 8;
  c.max_tokens_per_rank = 128;
  c.max_private_tokens = 16;
  c.dispatch_element_bytes = 2;
  c.combine_input = ElementType::bf16;
  c.combine_output = ElementType::f32;
  c.timeout = std::chrono::milliseconds(20000);
  return c;
}

int rank_body(std::uint32_t rank, fabric::test::Channel& channel, std::uint32_t iterations) {
  MoeConfig c = check_config();
  c.rank = rank;
  std::string failure;
  std::ostringstream json;
  int gpus = 0;
  if (k::device_count(&gpus) != 0 || gpus == 0) {
    report(channel, "{\"rank\":" + std::to_string(rank) + ",\"skipped\":\"no CUDA device\"}");
    return 77;
  }
  try {
    auto engine = TransferEngine::create(EngineConfig{});
    if (!engine.ok()) throw std::runtime_error(engine.status().to_string());
    auto created = MoeGroup::create(**engine, c, relay_all_gather(channel));
    if (!created.ok()) throw std::runtime_error(created.status().to_string());
    MoeGroup& group = **created;
    const auto& layout = group.layout(rank);
    const Placement placement(c);
    void* dev_arena_ptr = nullptr;
    GPU_OK(k::host_register(group.arena(rank), layout.total_bytes, &dev_arena_ptr));
    auto* dev_arena = static_cast<std::byte*>(dev_arena_ptr);
    void* stream = nullptr;
    GPU_OK(k::stream_create(&stream));

    const std::size_t tb = token_bytes(c);
    const std::size_t rb = std::size_t{c.hidden} * element_bytes(c.combine_input);
    const std::size_t ob = std::size_t{c.hidden} * element_bytes(c.combine_output);
    const std::uint32_t n = c.world_size, r = c.top_k, t_max = c.max_tokens_per_rank;
    k::Shape shape;
    shape.world_size = n;
    shape.num_experts = c.num_experts;
    shape.top_k = r;
    shape.hidden = c.hidden;
    shape.token_bytes = static_cast<std::uint32_t>(tb);
    shape.num_scales = c.num_scales;
    shape.combine_input_bf16 = c.combine_input == ElementType::bf16;
    shape.combine_output_bf16 = c.combine_output == ElementType::bf16;
    shape.slot_bytes = layout.slot_bytes;
    shape.row_bytes = layout.row_bytes;
    shape.list_capacity = layout.list_capacity;
    shape.header_bytes = layout.header_bytes;
    shape.send_offset = layout.send_offset;

    DeviceBuffer x(t_max * tb), scales(4), topk(std::size_t{t_max} * r * 4), weights(std::size_t{t_max} * r * 4);
    DeviceBuffer recv_x(layout.recv_rows * tb), recv_scales(4), expert_out(layout.recv_rows * rb), out(t_max * ob);
    DeviceBuffer count(4 * n), first(4 * n), header(8 * n), rows_from(4 * n), rows_base(8 * n);
    DeviceBuffer slot_token(4ull * layout.source_tokens * std::min(r, n)), combine_row(4ull * t_max * r);
    DeviceBuffer routes_copy(layout.send_bytes);  // the count kernel's own send region
    DeviceBuffer row_slot(4ull * layout.recv_rows), slot_address(8ull * n * layout.source_tokens);
    DeviceBuffer gather_row(4ull * layout.recv_rows + 4);
    k::Routes routes{count.as<std::uint32_t>(), first.as<std::uint32_t>(), header.as<std::uint64_t>(),
                     rows_from.as<std::uint32_t>(), rows_base.as<std::uint64_t>(),
                     slot_token.as<std::uint32_t>(), combine_row.as<std::int32_t>()};
    auto* routes_arena = routes_copy.as<std::byte>() - layout.send_offset;
    Timer timer;
    std::vector<std::byte> host_routes(layout.send_bytes), host_x(layout.recv_rows * tb),
        host_expert(layout.recv_rows * rb), host_out(t_max * ob);
    std::vector<std::int32_t> host_combine_row(std::size_t{t_max} * r);

    for (std::uint32_t it = 0; it < iterations && failure.empty(); ++it) {
      const auto in = make_input(c, Routing::uniform, 77, it, placement.dp_group(rank));
      GPU_OK(k::copy_async(x.ptr, in.x.data(), in.x.size(), stream));
      GPU_OK(k::copy_async(topk.ptr, in.topk.data(), in.topk.size() * 4, stream));
      GPU_OK(k::copy_async(weights.ptr, in.weights.data(), in.weights.size() * 4, stream));
      GPU_OK(k::stream_synchronize(stream));
      // The host plan (the proxy's), and the count kernel's, which must agree.
      auto plan = group.begin_dispatch(in.topk, in.tokens);
      if (!plan.ok()) throw std::runtime_error(plan.status().to_string());
      const SendPlan& sp = **plan;
      timer.run("dispatch_count", stream, [&] {
        return k::launch_dispatch_count(shape, topk.as<std::int32_t>(), in.tokens, sp.chunk.begin,
                                        sp.chunk.end, group.epoch(), routes_arena, routes, stream);
      });
      GPU_OK(k::copy_async(host_routes.data(), routes_copy.ptr, layout.send_bytes, stream));
      GPU_OK(k::copy_async(host_combine_row.data(), combine_row.ptr, in.topk.size() * 4, stream));
      GPU_OK(k::stream_synchronize(stream));
      for (std::uint32_t d = 0; d < n; ++d) {
        const std::uint64_t from = sp.header[d] - sp.list_bytes[d];
        const std::uint64_t len = sp.list_bytes[d] + layout.header_bytes;
        if (std::memcmp(host_routes.data() + (from - layout.send_offset), group.arena(rank) + from, len) != 0)
          failure = "count kernel: routes for rank " + std::to_string(d) + " differ from the host plan";
      }
      if (!std::equal(sp.combine_row.begin(), sp.combine_row.end(), host_combine_row.begin()))
        failure = "count kernel: combine rows differ from the host plan";
      const auto total_slots = static_cast<std::uint32_t>(sp.token.size());
      timer.run("dispatch_stage_private", stream, [&] {
        return k::launch_dispatch_stage(shape, x.as<std::byte>(), scales.as<float>(), dev_arena, routes,
                                        total_slots, 0, layout.private_tokens, stream);
      });
      if (auto st = group.post_private(); !st.ok()) throw std::runtime_error(st.to_string());
      timer.run("dispatch_stage_rest", stream, [&] {
        return k::launch_dispatch_stage(shape, x.as<std::byte>(), scales.as<float>(), dev_arena, routes,
                                        total_slots, layout.private_tokens, 0xffffffffu, stream);
      });
      if (auto st = group.mark_staged(); !st.ok()) throw std::runtime_error(st.to_string());
      auto received = group.complete_dispatch();
      if (!received.ok()) throw std::runtime_error(received.status().to_string());
      const ReceivePlan& rp = **received;
      std::vector<std::uint64_t> addresses;
      for (const auto& ref : rp.slots)
        addresses.push_back(reinterpret_cast<std::uint64_t>(dev_arena + ref.offset));  // node_size 1: own arena
      GPU_OK(k::copy_async(row_slot.ptr, rp.row_slot.data(), rp.row_slot.size() * 4, stream));
      GPU_OK(k::copy_async(slot_address.ptr, addresses.data(), addresses.size() * 8, stream));
      const auto rows = static_cast<std::uint32_t>(rp.row_slot.size());
      timer.run("dispatch_reorder", stream, [&] {
        return k::launch_dispatch_reorder(shape, row_slot.as<std::uint32_t>(), rows,
                                          slot_address.as<std::uint64_t>(), recv_x.as<std::byte>(),
                                          recv_scales.as<float>(), stream);
      });
      GPU_OK(k::copy_async(host_x.data(), recv_x.ptr, rows * tb, stream));
      GPU_OK(k::stream_synchronize(stream));
      const auto want = expected_dispatch(c, Routing::uniform, 77, it, rank);
      const std::uint32_t local = placement.local_experts(rank);
      for (std::uint32_t e = 0; e < local && failure.empty(); ++e)
        if (rp.expert_count[e] != want.count[e] ||
            std::memcmp(host_x.data() + std::size_t{rp.expert_begin[e]} * tb,
                        want.rows.data() + std::size_t{want.first[e]} * tb, want.count[e] * tb) != 0)
          failure = "dispatch reorder: expert " + std::to_string(e) + " differs from the reference";
      for (std::uint32_t e = 0; e < local; ++e)
        for (std::uint32_t row = rp.expert_begin[e]; row < rp.expert_begin[e] + rp.expert_count[e]; ++row)
          expert_forward(c, placement.first_expert(rank) + e, host_x.data() + row * tb, nullptr,
                         host_expert.data() + row * rb);
      GPU_OK(k::copy_async(expert_out.ptr, host_expert.data(), rows * rb, stream));
      GPU_OK(k::copy_async(gather_row.ptr, rp.gather_row.data(), rp.gather_row.size() * 4, stream));
      const auto gathered = static_cast<std::uint32_t>(rp.gather_row.size());
      timer.run("combine_gather", stream, [&] {
        return k::launch_combine_gather(shape, expert_out.as<std::byte>(), gather_row.as<std::uint32_t>(),
                                        gathered, layout.exchange_offset, dev_arena, stream);
      });
      // Host signalled (post_combine) before any direct copy.
      if (auto st = group.post_combine(); !st.ok()) throw std::runtime_error(st.to_string());
      if (auto st = group.push_combine_direct(); !st.ok()) throw std::runtime_error(st.to_string());
      if (auto st = group.mark_combine_pushed(); !st.ok()) throw std::runtime_error(st.to_string());
      if (auto st = group.await_combine(); !st.ok()) throw std::runtime_error(st.to_string());
      timer.run("combine_reduce", stream, [&] {
        return k::launch_combine_reduce(shape, dev_arena, layout.combine_offset, combine_row.as<std::int32_t>(),
                                        weights.as<float>(), in.tokens, out.as<std::byte>(), stream);
      });
      GPU_OK(k::copy_async(host_out.data(), out.ptr, in.tokens * ob, stream));
      GPU_OK(k::stream_synchronize(stream));
      const auto want_out = expected_combine(c, in);
      if (failure.empty() && std::memcmp(host_out.data(), want_out.data(), want_out.size()) != 0)
        failure = "combine reduce differs from the reference (iteration " + std::to_string(it) + ")";
      if (it + 1 == iterations) {
        // The receive halves inside a CUDA graph (fixed buffers, no host calls).
        GPU_OK(k::capture_begin(stream));
        GPU_OK(k::launch_dispatch_reorder(shape, row_slot.as<std::uint32_t>(), rows,
                                          slot_address.as<std::uint64_t>(), recv_x.as<std::byte>(),
                                          recv_scales.as<float>(), stream));
        GPU_OK(k::launch_combine_reduce(shape, dev_arena, layout.combine_offset,
                                        combine_row.as<std::int32_t>(), weights.as<float>(), in.tokens,
                                        out.as<std::byte>(), stream));
        GPU_OK(k::capture_end_and_replay(stream));
        GPU_OK(k::copy_async(host_out.data(), out.ptr, in.tokens * ob, stream));
        GPU_OK(k::stream_synchronize(stream));
        if (failure.empty() && std::memcmp(host_out.data(), want_out.data(), want_out.size()) != 0)
          failure = "combine reduce replayed in a CUDA graph differs";
      }
      if (auto st = group.finish_combine(); !st.ok()) throw std::runtime_error(st.to_string());
    }
    if (auto st = group.quiesce(); !st.ok()) throw std::runtime_error(st.to_string());
    json << "{\"rank\":" << rank << ",\"iterations\":" << iterations << ",\"hidden\":" << c.hidden
         << ",\"top_k\":" << r << ",\"tokens\":" << t_max << ",\"ok\":" << (failure.empty() ? "true" : "false")
         << ",\"median_us\":{";
    bool comma = false;
    for (const auto& [name, v] : timer.samples) {
      json << (comma ? "," : "") << "\"" << name << "\":" << median(v);
      comma = true;
    }
    json << "}" << (failure.empty() ? "" : ",\"failure\":\"" + failure + "\"") << "}";
    (void)k::stream_destroy(stream);
    (void)k::host_unregister(group.arena(rank));
  } catch (const std::exception& e) {
    failure = e.what();
    json.str("{\"rank\":" + std::to_string(rank) + ",\"ok\":false,\"failure\":\"" + failure + "\"}");
  }
  report(channel, json.str());
  return failure.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint32_t iterations = argc > 1 ? static_cast<std::uint32_t>(std::stoul(argv[1])) : 20;
  // The parent must not initialise CUDA before forking (children of an
  // initialised process cannot use it), so it only looks for the device node.
  if (!std::filesystem::exists("/dev/nvidiactl")) {
    std::printf("moe_gpu_check: skipped, no NVIDIA device on this host\n");
    return 77;
  }
  fabric::test::use_loopback_environment();
  const auto outcomes = run_ranks(
      2, [&](std::uint32_t rank, fabric::test::Channel& ch) { return rank_body(rank, ch, iterations); },
      std::chrono::seconds(300));
  int rc = 0;
  int skipped = 0;
  for (const auto& o : outcomes) {
    std::printf("%s\n", o.report.c_str());
    if (o.exit.kind == fabric::test::ChildExit::Kind::exited && o.exit.code == 77) ++skipped;
    else if (!o.exit.ok()) rc = 1;
  }
  return skipped == static_cast<int>(outcomes.size()) ? 77 : rc;
}
