// The planner. Steps: validate the metadata (every message names the
// parameter), build each target's local images per inference rank, cut images
// into chunks that some trainer rank can produce after its prepare step,
// assign every (chunk, inference rank) to the least-loaded capable trainer
// (largest first), then order each trainer's writes so that trainers start on
// different receivers.

#include "fabric/weights/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>

#include "fabric/weights/simulator.hpp"
#include "weights/geometry.hpp"

namespace fabric::weights {
namespace {

Status bad(std::string message) { return {Errc::invalid_argument, std::move(message)}; }

Status check_placements(const std::string& what, const std::string& name, std::size_t ndim,
                        const std::vector<Placement>& placements, const Mesh& mesh,
                        bool allow_only) {
  if (placements.size() != mesh.dims.size()) {
    return bad(fmt::format("{} '{}': {} placements for a {}-dim mesh", what, name,
                           placements.size(), mesh.dims.size()));
  }
  for (std::size_t d = 0; d < placements.size(); ++d) {
    const auto& p = placements[d];
    if (p.kind == Placement::Kind::shard &&
        (p.value < 0 || static_cast<std::size_t>(p.value) >= ndim)) {
      return bad(fmt::format("{} '{}': Shard({}) on mesh dim '{}' but the tensor has {} dims", what,
                             name, p.value, mesh.dims[d].name, ndim));
    }
    if (p.kind == Placement::Kind::only) {
      if (!allow_only) {
        return bad(fmt::format("{} '{}': inference placements are Replicate or Shard", what, name));
      }
      if (p.value < 0 || static_cast<std::uint32_t>(p.value) >= mesh.dims[d].size) {
        return bad(fmt::format("{} '{}': Only({}) outside mesh dim '{}' of size {}", what, name,
                               p.value, mesh.dims[d].name, mesh.dims[d].size));
      }
    }
  }
  return {};
}

Status check_mesh(const char* side, const Mesh& mesh) {
  if (mesh.dims.empty()) return bad(fmt::format("{} mesh has no dims", side));
  for (const auto& d : mesh.dims) {
    if (d.size == 0) return bad(fmt::format("{} mesh dim '{}' has size 0", side, d.name));
  }
  return {};
}

std::vector<std::uint32_t> sizes_of(const Mesh& mesh) {
  std::vector<std::uint32_t> s;
  for (const auto& d : mesh.dims) s.push_back(d.size);
  return s;
}

struct Work {
  const PlanInput& in;
  const PlannerConfig& cfg;
  Schedule s;
  std::unordered_map<std::string, std::uint32_t> source_index;
  // Per source: distinct post-prepare boxes and the trainer ranks holding each.
  std::vector<std::vector<std::pair<Box, std::vector<std::uint32_t>>>> holders;
  // image of (target, inference rank)
  std::vector<std::vector<std::uint32_t>> image_of;
};

Status validate_and_build_targets(Work& w) {
  const auto& tr = w.in.trainer;
  const auto& inf = w.in.inference;
  if (auto st = check_mesh("trainer", tr.mesh); !st.ok()) return st;
  if (auto st = check_mesh("inference", inf.mesh); !st.ok()) return st;
  if (tr.groups.empty()) return bad("trainer layout has no mesh groups");
  for (const auto& g : tr.groups) {
    if (g.unshard.size() != tr.mesh.dims.size()) {
      return bad(fmt::format("mesh group '{}': unshard flags for {} dims, the mesh has {}", g.name,
                             g.unshard.size(), tr.mesh.dims.size()));
    }
  }
  for (std::uint32_t i = 0; i < tr.params.size(); ++i) {
    const auto& p = tr.params[i];
    if (!w.source_index.emplace(p.name, i).second) {
      return bad(fmt::format("trainer parameter '{}' appears twice", p.name));
    }
    if (p.shape.empty()) return bad(fmt::format("trainer parameter '{}' has no shape", p.name));
    for (auto e : p.shape) {
      if (e <= 0) return bad(fmt::format("trainer parameter '{}' has shape {}", p.name, shape_string(p.shape)));
    }
    if (p.dtype == DType::fp8_e4m3) {
      return bad(fmt::format("trainer parameter '{}': sources are bfloat16 or float32", p.name));
    }
    if (p.mesh_group >= tr.groups.size()) {
      return bad(fmt::format("trainer parameter '{}': mesh group {} of {}", p.name, p.mesh_group, tr.groups.size()));
    }
    if (auto st = check_placements("trainer parameter", p.name, p.shape.size(), p.placements, tr.mesh, true);
        !st.ok()) {
      return st;
    }
  }

  std::unordered_map<std::string, const NameRule*> rule_of;
  for (const auto& r : w.in.rules) {
    if (!rule_of.emplace(r.target, &r).second) {
      return bad(fmt::format("target '{}' has two rules in the name map", r.target));
    }
  }
  std::set<std::string> target_names;
  std::set<std::string> used;
  for (const auto& t : inf.params) {
    if (!target_names.insert(t.name).second) {
      return bad(fmt::format("inference parameter '{}' appears twice", t.name));
    }
  }
  for (const auto& r : w.in.rules) {
    if (!target_names.count(r.target)) {
      return bad(fmt::format("name map rule for '{}', which no inference rank has", r.target));
    }
  }
  for (const auto& t : inf.params) {
    auto it = rule_of.find(t.name);
    if (it == rule_of.end()) {
      return bad(fmt::format("inference parameter '{}' has no source in the name map", t.name));
    }
    const NameRule& rule = *it->second;
    if (rule.sources.empty()) return bad(fmt::format("target '{}': rule names no sources", t.name));
    if (auto st = check_placements("inference parameter", t.name, t.shape.size(), t.placements, inf.mesh, false);
        !st.ok()) {
      return st;
    }
    PlannedTarget pt;
    pt.name = t.name;
    pt.shape = t.shape;
    pt.dtype = t.dtype;
    pt.quant = t.quant;
    pt.fuse_dim = rule.fuse_dim;
    pt.transpose = rule.transpose;
    pt.sources = rule.sources;
    std::optional<std::uint32_t> group;
    for (const auto& src : rule.sources) {
      auto si = w.source_index.find(src);
      if (si == w.source_index.end()) {
        return bad(fmt::format("target '{}': source '{}' is not a trainer parameter", t.name, src));
      }
      used.insert(src);
      const auto& sp = tr.params[si->second];
      Shape ps = sp.shape;
      if (rule.transpose) {
        if (ps.size() < 2) return bad(fmt::format("target '{}': cannot transpose 1-dim '{}'", t.name, src));
        std::swap(ps[ps.size() - 1], ps[ps.size() - 2]);
      }
      if (group && *group != sp.mesh_group) {
        return bad(fmt::format("target '{}': sources in different mesh groups", t.name));
      }
      group = sp.mesh_group;
      pt.part_shapes.push_back(std::move(ps));
    }
    pt.mesh_group = *group;
    // The fused shape of the parts must be the target's shape.
    const std::size_t n = pt.part_shapes[0].size();
    if (pt.sources.size() > 1 && pt.fuse_dim != 0 && pt.fuse_dim != 1) {
      return bad(fmt::format("target '{}': fuse_dim {} (0 or 1 supported)", t.name, pt.fuse_dim));
    }
    if (static_cast<std::size_t>(pt.fuse_dim) >= n) {
      return bad(fmt::format("target '{}': fuse_dim {} on {}-dim parts", t.name, pt.fuse_dim, n));
    }
    Shape fused = pt.part_shapes[0];
    for (std::size_t p = 1; p < pt.part_shapes.size(); ++p) {
      const auto& ps = pt.part_shapes[p];
      bool ok = ps.size() == n;
      for (std::size_t d = 0; ok && d < n; ++d) {
        if (d != static_cast<std::size_t>(pt.fuse_dim) && ps[d] != fused[d]) ok = false;
      }
      if (!ok) {
        return bad(fmt::format("target '{}': part '{}' has shape {}, which does not fuse with {} along dim {}",
                               t.name, pt.sources[p], shape_string(ps), shape_string(pt.part_shapes[0]), pt.fuse_dim));
      }
      fused[pt.fuse_dim] += ps[pt.fuse_dim];
    }
    if (fused != t.shape) {
      return bad(fmt::format("target '{}' has shape {} but its sources make {}", t.name,
                             shape_string(t.shape), shape_string(fused)));
    }
    if ((t.quant == Quant::none) != (t.dtype != DType::fp8_e4m3)) {
      return bad(fmt::format("target '{}': float8_e4m3fn needs a quantization (block128 or per_channel) and only it has one",
                             t.name));
    }
    if (t.quant != Quant::none && n < 2) {
      return bad(fmt::format("target '{}': FP8 quantization needs at least 2 dims", t.name));
    }
    if (t.quant == Quant::fp8_per_channel && pt.sources.size() > 1 &&
        static_cast<std::size_t>(pt.fuse_dim) == n - 1) {
      return bad(fmt::format("target '{}': per-channel scales across parts fused along the last dim", t.name));
    }
    w.s.targets.push_back(std::move(pt));
  }
  for (const auto& p : tr.params) {
    if (!used.count(p.name)) {
      return bad(fmt::format("trainer parameter '{}' has no target in the name map", p.name));
    }
  }
  // Mesh groups run one after another, so targets are ordered by group (stable).
  std::stable_sort(w.s.targets.begin(), w.s.targets.end(),
                   [](const PlannedTarget& a, const PlannedTarget& b) { return a.mesh_group < b.mesh_group; });
  for (const auto& g : tr.groups) w.s.group_names.push_back(g.name);
  return {};
}

Status build_images(Work& w) {
  const auto& inf = w.in.inference;
  const auto sizes = sizes_of(inf.mesh);
  const std::uint32_t R = inf.mesh.num_ranks();
  w.image_of.assign(w.s.targets.size(), std::vector<std::uint32_t>(R, 0));
  std::unordered_map<std::string, const TargetParam*> meta;
  for (const auto& t : inf.params) meta[t.name] = &t;
  for (std::uint32_t ti = 0; ti < w.s.targets.size(); ++ti) {
    const auto& t = w.s.targets[ti];
    const auto& placements = meta.at(t.name)->placements;
    std::map<std::vector<Box>, std::uint32_t> seen;
    for (std::uint32_t r = 0; r < R; ++r) {
      auto coords = inf.mesh.coords(r);
      std::vector<Box> boxes;
      for (const auto& ps : t.part_shapes) boxes.push_back(local_box(ps, placements, sizes, coords).box);
      if (t.quant == Quant::fp8_block128) {
        const std::size_t n = t.shape.size();
        for (std::size_t p = 0; p < boxes.size(); ++p) {
          for (std::size_t d = n - 2; d < n; ++d) {
            if (boxes[p].lo[d] % 128 != 0) {
              return bad(fmt::format("target '{}': inference rank {} starts dim {} of '{}' at {}, not on a 128-block",
                                     t.name, r, d, t.sources[p], boxes[p].lo[d]));
            }
            bool last_part = p + 1 == boxes.size();
            if (t.sources.size() > 1 && static_cast<std::size_t>(t.fuse_dim) == d && !last_part &&
                t.part_shapes[p][d] % 128 != 0) {
              return bad(fmt::format("target '{}': part '{}' is {} long on fused dim {}, not whole 128-blocks",
                                     t.name, t.sources[p], t.part_shapes[p][d], d));
            }
          }
        }
      }
      auto [it, inserted] = seen.emplace(boxes, static_cast<std::uint32_t>(w.s.images.size()));
      if (inserted) {
        Image img;
        img.target = ti;
        img.part_boxes = boxes;
        for (const auto& b : boxes) {
          img.bytes += static_cast<std::uint64_t>(b.numel()) * dtype_size(t.dtype);
          if (t.quant != Quant::none) img.scale_bytes += static_cast<std::uint64_t>(scale_box(t.quant, b).numel()) * 4;
        }
        w.s.images.push_back(std::move(img));
      }
      w.image_of[ti][r] = it->second;
    }
  }
  // Arenas: every rank's targets in schedule order, data then scales, aligned.
  w.s.arenas.assign(R, {});
  w.s.arena_bytes.assign(R, 0);
  const std::uint64_t a = std::max<std::uint64_t>(1, w.cfg.arena_alignment);
  auto align = [a](std::uint64_t x) { return (x + a - 1) / a * a; };
  for (std::uint32_t r = 0; r < R; ++r) {
    std::uint64_t off = 0;
    for (std::uint32_t ti = 0; ti < w.s.targets.size(); ++ti) {
      const auto& img = w.s.images[w.image_of[ti][r]];
      ArenaEntry e;
      e.target = ti;
      e.image = w.image_of[ti][r];
      e.offset = align(off);
      e.bytes = img.bytes;
      off = e.offset + img.bytes;
      if (img.scale_bytes) {
        e.scale_offset = align(off);
        e.scale_bytes = img.scale_bytes;
        off = e.scale_offset + img.scale_bytes;
      }
      w.s.arenas[r].push_back(e);
    }
    w.s.arena_bytes[r] = align(off);
  }
  return {};
}

void build_holders(Work& w) {
  const auto& tr = w.in.trainer;
  const auto sizes = sizes_of(tr.mesh);
  const std::uint32_t T = tr.mesh.num_ranks();
  w.holders.assign(tr.params.size(), {});
  for (std::uint32_t si = 0; si < tr.params.size(); ++si) {
    const auto& p = tr.params[si];
    const auto& skip = tr.groups[p.mesh_group].unshard;
    std::map<Box, std::size_t, bool (*)(const Box&, const Box&)> index(
        [](const Box& a, const Box& b) { return std::tie(a.lo, a.hi) < std::tie(b.lo, b.hi); });
    for (std::uint32_t t = 0; t < T; ++t) {
      auto lb = local_box(p.shape, p.placements, sizes, tr.mesh.coords(t), skip);
      if (!lb.held) continue;
      auto [it, inserted] = index.emplace(lb.box, w.holders[si].size());
      if (inserted) w.holders[si].push_back({lb.box, {}});
      w.holders[si][it->second].second.push_back(t);
    }
  }
}

// Trainer ranks that hold, after prepare, everything chunk rows [lo, hi) need.
std::vector<std::uint32_t> candidates(const Work& w, const PlannedTarget& t, const Image& img,
                                      std::int32_t part, std::int64_t lo, std::int64_t hi) {
  std::vector<std::uint32_t> result;
  bool first = true;
  for (std::size_t p = 0; p < img.part_boxes.size(); ++p) {
    if (part >= 0 && static_cast<std::size_t>(part) != p) continue;
    Box need = needed_source_box(t, p, img.part_boxes[p], lo, hi);
    std::vector<std::uint32_t> here;
    for (const auto& [box, ranks] : w.holders[w.source_index.at(t.sources[p])]) {
      if (box.contains(need)) here.insert(here.end(), ranks.begin(), ranks.end());
    }
    std::sort(here.begin(), here.end());
    if (first) {
      result = std::move(here);
      first = false;
    } else {
      std::vector<std::uint32_t> both;
      std::set_intersection(result.begin(), result.end(), here.begin(), here.end(), std::back_inserter(both));
      result = std::move(both);
    }
  }
  return result;
}

struct Unit {
  std::uint32_t chunk;
  std::uint32_t inference;
  std::uint64_t bytes;
};

Status build_chunks(Work& w, std::vector<std::vector<std::uint32_t>>& chunk_candidates) {
  for (std::uint32_t ii = 0; ii < w.s.images.size(); ++ii) {
    const Image& img = w.s.images[ii];
    const PlannedTarget& t = w.s.targets[img.target];
    for (const RowSpan& span : row_spans(t, img)) {
      if (span.rows == 0) continue;
      const std::int64_t q = row_quantum(t);
      std::int64_t per = static_cast<std::int64_t>(w.cfg.max_chunk_bytes / std::max<std::uint64_t>(1, span.row_bytes));
      per = std::max<std::int64_t>(q, per / q * q);
      // Cut at `per` rows, then split further wherever no trainer can produce a piece.
      std::vector<std::pair<std::int64_t, std::int64_t>> todo;
      for (std::int64_t lo = 0; lo < span.rows; lo += per) todo.emplace_back(lo, std::min(span.rows, lo + per));
      std::reverse(todo.begin(), todo.end());
      while (!todo.empty()) {
        auto [lo, hi] = todo.back();
        todo.pop_back();
        auto cand = candidates(w, t, img, span.part, lo, hi);
        if (cand.empty()) {
          if (hi - lo <= q) {
            return bad(fmt::format("target '{}': no trainer rank holds rows [{}, {}) of the image {} after prepare",
                                   t.name, lo, hi, img.part_boxes[std::max(0, span.part)].to_string()));
          }
          std::int64_t mid = lo + ((hi - lo) / 2 + q - 1) / q * q;
          if (mid >= hi) mid = hi - q;
          todo.emplace_back(mid, hi);
          todo.emplace_back(lo, mid);
          continue;
        }
        Chunk c = make_chunk(t, ii, span, lo, hi);
        w.s.chunks.push_back(c);
        chunk_candidates.push_back(std::move(cand));
      }
    }
  }
  return {};
}

void assign_and_order(Work& w, const std::vector<std::vector<std::uint32_t>>& chunk_candidates) {
  const std::uint32_t T = w.in.trainer.mesh.num_ranks();
  const std::uint32_t R = w.in.inference.mesh.num_ranks();
  // Ranks sharing an image, per image.
  std::vector<std::vector<std::uint32_t>> ranks_of(w.s.images.size());
  for (std::uint32_t ti = 0; ti < w.s.targets.size(); ++ti) {
    for (std::uint32_t r = 0; r < R; ++r) ranks_of[w.image_of[ti][r]].push_back(r);
  }
  const auto G = static_cast<std::uint32_t>(w.s.group_names.size());
  std::vector<std::vector<Unit>> units(G);
  for (std::uint32_t ci = 0; ci < w.s.chunks.size(); ++ci) {
    const Chunk& c = w.s.chunks[ci];
    const auto g = w.s.targets[w.s.images[c.image].target].mesh_group;
    for (auto r : ranks_of[c.image]) units[g].push_back({ci, r, c.bytes + c.scale_bytes});
  }
  struct Assigned {
    std::uint32_t chunk, inference, trainer;
  };
  for (std::uint32_t g = 0; g < G; ++g) {
    auto& us = units[g];
    std::stable_sort(us.begin(), us.end(), [](const Unit& a, const Unit& b) { return a.bytes > b.bytes; });
    std::vector<std::uint64_t> load(T, 0);
    std::vector<std::vector<Assigned>> per_trainer(T);
    for (const Unit& u : us) {
      const auto& cand = chunk_candidates[u.chunk];
      // Least loaded; among equals the one nearest the receiver's "own" trainer,
      // which spreads the receivers of equal work over the trainers.
      const std::uint64_t pref = static_cast<std::uint64_t>(u.inference) * T / R;
      std::uint32_t best = cand[0];
      for (auto t : cand) {
        if (load[t] < load[best] ||
            (load[t] == load[best] && (t + T - pref) % T < (best + T - pref) % T)) {
          best = t;
        }
      }
      load[best] += u.bytes;
      per_trainer[best].push_back({u.chunk, u.inference, best});
    }
    for (std::uint32_t t = 0; t < T; ++t) {
      auto& list = per_trainer[t];
      const std::uint64_t start = static_cast<std::uint64_t>(t) * R / T;
      // Target order first (prepare goes target by target), then receivers
      // starting from this trainer's own offset, then rows.
      std::stable_sort(list.begin(), list.end(), [&](const Assigned& a, const Assigned& b) {
        const auto ta = w.s.images[w.s.chunks[a.chunk].image].target;
        const auto tb = w.s.images[w.s.chunks[b.chunk].image].target;
        if (ta != tb) return ta < tb;
        const auto ra = (a.inference + R - start) % R;
        const auto rb = (b.inference + R - start) % R;
        if (ra != rb) return ra < rb;
        return a.chunk < b.chunk;
      });
      for (const auto& a : list) {
        const Chunk& c = w.s.chunks[a.chunk];
        const auto ti = w.s.images[c.image].target;
        const ArenaEntry& e = w.s.arenas[a.inference][ti];
        w.s.writes.push_back({g, t, a.inference, a.chunk, false, e.offset + c.offset, c.bytes});
        if (c.scale_bytes) {
          w.s.writes.push_back({g, t, a.inference, a.chunk, true, e.scale_offset + c.scale_offset, c.scale_bytes});
        }
      }
    }
  }
  w.s.expected_imms.assign(R, T);  // one commit per trainer
  for (const auto& op : w.s.writes) w.s.expected_imms[op.inference] += write_imm_count(op.length, w.s.num_domains);
}

}  // namespace

Result<Schedule> plan(const PlanInput& input, const PlannerConfig& config) {
  if (config.num_domains == 0 || config.max_chunk_bytes == 0 || config.nic_bytes_per_s <= 0) {
    return bad("planner config: num_domains, max_chunk_bytes and nic_bytes_per_s must be positive");
  }
  Work w{input, config, {}, {}, {}, {}};
  w.s.trainer_ranks = input.trainer.mesh.num_ranks();
  w.s.inference_ranks = input.inference.mesh.num_ranks();
  w.s.num_domains = config.num_domains;
  if (auto st = validate_and_build_targets(w); !st.ok()) return st;
  if (auto st = build_images(w); !st.ok()) return st;
  build_holders(w);
  std::vector<std::vector<std::uint32_t>> chunk_candidates;
  if (auto st = build_chunks(w, chunk_candidates); !st.ok()) return st;
  assign_and_order(w, chunk_candidates);
  compute_bound(w.s, config.nic_bytes_per_s);
  return std::move(w.s);
}

void compute_bound(Schedule& s, double nic_bytes_per_s) {
  const auto G = std::max<std::size_t>(1, s.group_names.size());
  std::vector<std::vector<std::uint64_t>> in(G, std::vector<std::uint64_t>(s.inference_ranks, 0));
  std::vector<std::vector<std::uint64_t>> out(G, std::vector<std::uint64_t>(s.trainer_ranks, 0));
  for (const auto& op : s.writes) {
    in[op.group][op.inference] += op.length;
    out[op.group][op.trainer] += op.length;
  }
  std::vector<std::uint64_t> in_total(s.inference_ranks, 0), out_total(s.trainer_ranks, 0);
  double group_bound = 0;
  for (std::size_t g = 0; g < G; ++g) {
    std::uint64_t m = 0;
    for (std::uint32_t r = 0; r < s.inference_ranks; ++r) {
      m = std::max(m, in[g][r]);
      in_total[r] += in[g][r];
    }
    for (std::uint32_t t = 0; t < s.trainer_ranks; ++t) {
      m = std::max(m, out[g][t]);
      out_total[t] += out[g][t];
    }
    group_bound += static_cast<double>(m) / nic_bytes_per_s;
  }
  auto& p = s.prediction;
  p.nic_bytes_per_s = nic_bytes_per_s;
  p.max_nic_in_bytes = in_total.empty() ? 0 : *std::max_element(in_total.begin(), in_total.end());
  p.max_nic_out_bytes = out_total.empty() ? 0 : *std::max_element(out_total.begin(), out_total.end());
  p.bound_s = static_cast<double>(std::max(p.max_nic_in_bytes, p.max_nic_out_bytes)) / nic_bytes_per_s;
  p.group_bound_s = group_bound;
}

}  // namespace fabric::weights
