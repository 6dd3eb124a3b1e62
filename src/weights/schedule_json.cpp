// Schedule <-> JSON. Writes, chunks and arena entries are arrays of numbers
// (a Kimi-K2 schedule has ~10^5 of them); the field order is in docs/weights.md.

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "fabric/imm_counts.hpp"
#include "fabric/requests.hpp"
#include "fabric/weights/schedule.hpp"

namespace fabric::weights {

using nlohmann::json;

std::uint64_t write_imm_count(std::uint64_t length, std::uint32_t num_domains) {
  // The engine's own rule (a write over every Domain); it cannot fail for one Domain or more.
  return single_write_imm_count(length, std::max<std::uint32_t>(1, num_domains)).value();
}

std::uint32_t data_imm(std::uint64_t version) noexcept {
  return 0xD0000000u | static_cast<std::uint32_t>(version & 0x0FFFFFFFu);
}

std::uint32_t barrier_imm(std::uint64_t version, std::uint32_t group) noexcept {
  return 0xB0000000u | (static_cast<std::uint32_t>(version & 0xFFFFFFu) << 4) | (group & 0xFu);
}

namespace {

json box_json(const Box& b) { return json::array({b.lo, b.hi}); }
Box json_box(const json& j) { return Box{j.at(0).get<Shape>(), j.at(1).get<Shape>()}; }

}  // namespace

std::string Schedule::to_json() const {
  json j;
  j["format"] = kFormatVersion;
  j["trainer_ranks"] = trainer_ranks;
  j["inference_ranks"] = inference_ranks;
  j["num_domains"] = num_domains;
  j["groups"] = group_names;
  json ts = json::array();
  for (const auto& t : targets) {
    ts.push_back({{"name", t.name},
                  {"shape", t.shape},
                  {"dtype", dtype_name(t.dtype)},
                  {"quant", quant_name(t.quant)},
                  {"fuse_dim", t.fuse_dim},
                  {"transpose", t.transpose},
                  {"sources", t.sources},
                  {"part_shapes", t.part_shapes},
                  {"group", t.mesh_group}});
  }
  j["targets"] = std::move(ts);
  json is = json::array();
  for (const auto& im : images) {
    json boxes = json::array();
    for (const auto& b : im.part_boxes) boxes.push_back(box_json(b));
    is.push_back({{"target", im.target}, {"boxes", boxes}, {"bytes", im.bytes}, {"scale_bytes", im.scale_bytes}});
  }
  j["images"] = std::move(is);
  json cs = json::array();
  for (const auto& c : chunks) {
    cs.push_back({c.image, c.part, c.row_lo, c.row_hi, c.offset, c.bytes, c.scale_offset, c.scale_bytes});
  }
  j["chunks"] = std::move(cs);
  json ws = json::array();
  for (const auto& w : writes) {
    ws.push_back({w.group, w.trainer, w.inference, w.chunk, w.scale ? 1 : 0, w.dst_offset, w.length});
  }
  j["writes"] = std::move(ws);
  json as = json::array();
  for (const auto& arena : arenas) {
    json a = json::array();
    for (const auto& e : arena) a.push_back({e.target, e.image, e.offset, e.bytes, e.scale_offset, e.scale_bytes});
    as.push_back(std::move(a));
  }
  j["arenas"] = std::move(as);
  j["arena_bytes"] = arena_bytes;
  j["expected_imms"] = expected_imms;
  j["prediction"] = {{"nic_bytes_per_s", prediction.nic_bytes_per_s},
                     {"max_nic_in_bytes", prediction.max_nic_in_bytes},
                     {"max_nic_out_bytes", prediction.max_nic_out_bytes},
                     {"bound_s", prediction.bound_s},
                     {"group_bound_s", prediction.group_bound_s},
                     {"predicted_s", prediction.predicted_s}};
  return j.dump();
}

Result<Schedule> Schedule::from_json(std::string_view text) {
  try {
    json j = json::parse(text);
    if (j.at("format").get<int>() != kFormatVersion) {
      return Status(Errc::malformed, fmt::format("schedule format {} (this build reads {})",
                                                 j.at("format").get<int>(), kFormatVersion));
    }
    Schedule s;
    s.trainer_ranks = j.at("trainer_ranks");
    s.inference_ranks = j.at("inference_ranks");
    s.num_domains = j.at("num_domains");
    s.group_names = j.at("groups").get<std::vector<std::string>>();
    for (const auto& t : j.at("targets")) {
      PlannedTarget pt;
      pt.name = t.at("name");
      pt.shape = t.at("shape").get<Shape>();
      auto dt = parse_dtype(t.at("dtype").get<std::string>());
      auto q = parse_quant(t.at("quant").get<std::string>());
      if (!dt.ok()) return Status(Errc::malformed, dt.status().message());
      if (!q.ok()) return Status(Errc::malformed, q.status().message());
      pt.dtype = *dt;
      pt.quant = *q;
      pt.fuse_dim = t.at("fuse_dim");
      pt.transpose = t.at("transpose");
      pt.sources = t.at("sources").get<std::vector<std::string>>();
      pt.part_shapes = t.at("part_shapes").get<std::vector<Shape>>();
      pt.mesh_group = t.at("group");
      s.targets.push_back(std::move(pt));
    }
    for (const auto& im : j.at("images")) {
      Image i;
      i.target = im.at("target");
      for (const auto& b : im.at("boxes")) i.part_boxes.push_back(json_box(b));
      i.bytes = im.at("bytes");
      i.scale_bytes = im.at("scale_bytes");
      if (i.target >= s.targets.size()) return Status(Errc::malformed, "schedule image names an unknown target");
      s.images.push_back(std::move(i));
    }
    for (const auto& c : j.at("chunks")) {
      Chunk k{c.at(0), c.at(1), c.at(2), c.at(3), c.at(4), c.at(5), c.at(6), c.at(7)};
      if (k.image >= s.images.size()) return Status(Errc::malformed, "schedule chunk names an unknown image");
      s.chunks.push_back(k);
    }
    for (const auto& w : j.at("writes")) {
      WriteOp op{w.at(0), w.at(1), w.at(2), w.at(3), w.at(4).get<int>() != 0, w.at(5), w.at(6)};
      if (op.trainer >= s.trainer_ranks || op.inference >= s.inference_ranks || op.chunk >= s.chunks.size() ||
          op.group >= std::max<std::size_t>(1, s.group_names.size())) {
        return Status(Errc::malformed, "schedule write names an unknown rank, chunk or group");
      }
      s.writes.push_back(op);
    }
    for (const auto& a : j.at("arenas")) {
      std::vector<ArenaEntry> arena;
      for (const auto& e : a) arena.push_back({e.at(0), e.at(1), e.at(2), e.at(3), e.at(4), e.at(5)});
      s.arenas.push_back(std::move(arena));
    }
    s.arena_bytes = j.at("arena_bytes").get<std::vector<std::uint64_t>>();
    s.expected_imms = j.at("expected_imms").get<std::vector<std::uint64_t>>();
    if (s.arenas.size() != s.inference_ranks || s.arena_bytes.size() != s.inference_ranks ||
        s.expected_imms.size() != s.inference_ranks) {
      return Status(Errc::malformed, "schedule arenas or counts do not match the inference ranks");
    }
    const auto& p = j.at("prediction");
    s.prediction.nic_bytes_per_s = p.at("nic_bytes_per_s");
    s.prediction.max_nic_in_bytes = p.at("max_nic_in_bytes");
    s.prediction.max_nic_out_bytes = p.at("max_nic_out_bytes");
    s.prediction.bound_s = p.at("bound_s");
    s.prediction.group_bound_s = p.at("group_bound_s");
    s.prediction.predicted_s = p.at("predicted_s");
    return s;
  } catch (const json::exception& e) {
    return Status(Errc::malformed, fmt::format("schedule JSON: {}", e.what()));
  }
}

}  // namespace fabric::weights
