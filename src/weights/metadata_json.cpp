// The planner's input as JSON, the form Python hands it over in:
//   {"trainer": {"mesh": [["pp", 2], ...], "groups": [{"name": "dense", "unshard": ["fsdp"]}],
//                "params": [{"name", "shape", "dtype", "placements": ["O(0)", "S(0)", "R"], "group"}]},
//    "inference": {"mesh": [...], "params": [{"name", "shape", "dtype", "quant", "placements"}]},
//    "rules": [{"target", "sources": [...], "fuse_dim": 0, "transpose": false}]}

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "fabric/weights/planner.hpp"

namespace fabric::weights {

using nlohmann::json;

namespace {

Result<Placement> parse_placement(const std::string& s) {
  if (s == "R") return Placement::replicate();
  if (s.size() >= 4 && (s[0] == 'S' || s[0] == 'O') && s[1] == '(' && s.back() == ')') {
    std::int32_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + 2, s.data() + s.size() - 1, v);
    if (ec == std::errc() && p == s.data() + s.size() - 1) {
      return s[0] == 'S' ? Placement::shard(v) : Placement::only(v);
    }
  }
  return Status(Errc::invalid_argument, fmt::format("placement '{}' (R, S(dim) or O(coord))", s));
}

Result<Mesh> parse_mesh(const json& j) {
  Mesh m;
  for (const auto& d : j) m.dims.push_back({d.at(0).get<std::string>(), d.at(1).get<std::uint32_t>()});
  return m;
}

Result<std::vector<Placement>> parse_placements(const json& j) {
  std::vector<Placement> out;
  for (const auto& p : j) {
    auto pl = parse_placement(p.get<std::string>());
    if (!pl.ok()) return pl.status();
    out.push_back(*pl);
  }
  return out;
}

}  // namespace

Result<PlanInput> parse_plan_input(std::string_view text) {
  try {
    json j = json::parse(text);
    PlanInput in;
    const auto& tr = j.at("trainer");
    in.trainer.mesh = *parse_mesh(tr.at("mesh"));
    std::vector<std::string> group_names;
    for (const auto& g : tr.at("groups")) {
      MeshGroup mg;
      mg.name = g.at("name");
      mg.unshard.assign(in.trainer.mesh.dims.size(), false);
      for (const auto& dn : g.at("unshard")) {
        bool found = false;
        for (std::size_t d = 0; d < in.trainer.mesh.dims.size(); ++d) {
          if (in.trainer.mesh.dims[d].name == dn.get<std::string>()) mg.unshard[d] = found = true;
        }
        if (!found) {
          return Status(Errc::invalid_argument, fmt::format("mesh group '{}' unshards '{}', which is no mesh dim",
                                                            mg.name, dn.get<std::string>()));
        }
      }
      group_names.push_back(mg.name);
      in.trainer.groups.push_back(std::move(mg));
    }
    for (const auto& p : tr.at("params")) {
      SourceParam sp;
      sp.name = p.at("name");
      sp.shape = p.at("shape").get<Shape>();
      auto dt = parse_dtype(p.at("dtype").get<std::string>());
      if (!dt.ok()) return Status(Errc::invalid_argument, fmt::format("trainer parameter '{}': {}", sp.name, dt.status().message()));
      sp.dtype = *dt;
      auto pl = parse_placements(p.at("placements"));
      if (!pl.ok()) return Status(Errc::invalid_argument, fmt::format("trainer parameter '{}': {}", sp.name, pl.status().message()));
      sp.placements = *pl;
      const std::string g = p.value("group", group_names.empty() ? std::string() : group_names[0]);
      auto it = std::find(group_names.begin(), group_names.end(), g);
      if (it == group_names.end()) {
        return Status(Errc::invalid_argument, fmt::format("trainer parameter '{}': unknown mesh group '{}'", sp.name, g));
      }
      sp.mesh_group = static_cast<std::uint32_t>(it - group_names.begin());
      in.trainer.params.push_back(std::move(sp));
    }
    const auto& inf = j.at("inference");
    in.inference.mesh = *parse_mesh(inf.at("mesh"));
    for (const auto& p : inf.at("params")) {
      TargetParam tp;
      tp.name = p.at("name");
      tp.shape = p.at("shape").get<Shape>();
      auto dt = parse_dtype(p.at("dtype").get<std::string>());
      auto q = parse_quant(p.value("quant", std::string("none")));
      if (!dt.ok()) return Status(Errc::invalid_argument, fmt::format("inference parameter '{}': {}", tp.name, dt.status().message()));
      if (!q.ok()) return Status(Errc::invalid_argument, fmt::format("inference parameter '{}': {}", tp.name, q.status().message()));
      tp.dtype = *dt;
      tp.quant = *q;
      auto pl = parse_placements(p.at("placements"));
      if (!pl.ok()) return Status(Errc::invalid_argument, fmt::format("inference parameter '{}': {}", tp.name, pl.status().message()));
      tp.placements = *pl;
      in.inference.params.push_back(std::move(tp));
    }
    for (const auto& r : j.at("rules")) {
      NameRule nr;
      nr.target = r.at("target");
      nr.sources = r.at("sources").get<std::vector<std::string>>();
      nr.fuse_dim = r.value("fuse_dim", 0);
      nr.transpose = r.value("transpose", false);
      in.rules.push_back(std::move(nr));
    }
    return in;
  } catch (const json::exception& e) {
    return Status(Errc::invalid_argument, fmt::format("plan input JSON: {}", e.what()));
  }
}

Result<PlannerConfig> parse_planner_config(std::string_view text) {
  try {
    PlannerConfig c;
    if (text.empty()) return c;
    json j = json::parse(text);
    c.max_chunk_bytes = j.value("max_chunk_bytes", c.max_chunk_bytes);
    c.num_domains = j.value("num_domains", c.num_domains);
    c.nic_bytes_per_s = j.value("nic_bytes_per_s", c.nic_bytes_per_s);
    c.arena_alignment = j.value("arena_alignment", c.arena_alignment);
    return c;
  } catch (const json::exception& e) {
    return Status(Errc::invalid_argument, fmt::format("planner config JSON: {}", e.what()));
  }
}

}  // namespace fabric::weights
