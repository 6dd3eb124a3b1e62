// fabric_lib._weights (a submodule of fabric_lib._native, module.cpp): the planner, simulator and trainer executor of
// fabric_weights (docs/weights.md). Metadata and schedules cross as JSON text;
// the executor runs against a fabric_lib.Engine.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "engine.hpp"
#include "errors.hpp"
#include "fabric/weights/executor.hpp"
#include "fabric/weights/imms.hpp"
#include "fabric/weights/planner.hpp"
#include "fabric/weights/simulator.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

using namespace fabric::weights;

std::string plan_json(const std::string& input, const std::string& config) {
  auto in = take(parse_plan_input(input));
  auto cfg = take(parse_planner_config(config));
  std::optional<Result<Schedule>> planned;
  {
    py::gil_scoped_release release;
    planned.emplace(plan(in, cfg));
  }
  return take(std::move(*planned)).to_json();
}

py::dict simulate_json(const std::string& schedule, double nic_bytes_per_s, std::uint64_t window_bytes) {
  auto s = take(Schedule::from_json(schedule));
  SimConfig c;
  c.nic_bytes_per_s = nic_bytes_per_s;
  c.window_bytes = window_bytes;
  SimResult r;
  {
    py::gil_scoped_release release;
    r = simulate(s, c);
  }
  py::dict d;
  d["time_s"] = r.time_s;
  d["group_time_s"] = r.group_time_s;
  d["bound_s"] = r.bound_s;
  d["group_bound_s"] = r.group_bound_s;
  d["ratio"] = r.ratio();
  return d;
}

py::dict baseline_json(const std::string& input, const std::string& schedule, double nic_bytes_per_s) {
  auto in = take(parse_plan_input(input));
  auto s = take(Schedule::from_json(schedule));
  auto b = baseline_estimate(in, s, nic_bytes_per_s);
  py::dict d;
  d["gather_bytes"] = b.gather_bytes;
  d["broadcast_bytes"] = b.broadcast_bytes;
  d["scatter_bytes"] = b.scatter_bytes;
  d["time_s"] = b.time_s;
  return d;
}

std::vector<SourceView> views_of(const py::list& views, std::vector<py::buffer_info>& keep) {
  std::vector<SourceView> vs;
  keep.reserve(py::len(views));
  for (const auto& item : views) {
    auto t = item.cast<py::tuple>();
    py::buffer buf = t[1].cast<py::buffer>();
    keep.push_back(buf.request());
    const auto& info = keep.back();
    SourceView v;
    v.name = t[0].cast<std::string>();
    v.data = static_cast<const std::byte*>(info.ptr);
    v.dtype = take(parse_dtype(t[2].cast<std::string>()));
    v.region = Box{t[3].cast<Shape>(), t[4].cast<Shape>()};
    const auto need = static_cast<py::ssize_t>(v.region.numel() * dtype_size(v.dtype));
    if (info.size * info.itemsize < need) {
      raise_error(Errc::invalid_argument, ("view of '" + v.name + "' is smaller than its region").c_str());
    }
    vs.push_back(std::move(v));
  }
  return vs;
}

// Every image of the schedule (data then scales), from whole-tensor views: the rank-0 baseline.
std::vector<py::bytes> prepare_images_json(const std::string& schedule, const py::list& views) {
  auto s = take(Schedule::from_json(schedule));
  std::vector<py::buffer_info> keep;
  auto vs = views_of(views, keep);
  std::vector<py::bytes> out;
  for (std::uint32_t i = 0; i < s.images.size(); ++i) {
    const auto& t = s.targets[s.images[i].target];
    std::vector<const SourceView*> parts;
    for (const auto& src : t.sources) {
      const SourceView* found = nullptr;
      for (const auto& v : vs) {
        if (v.name == src) found = &v;
      }
      parts.push_back(found);
    }
    std::vector<std::byte> buf(s.images[i].bytes + s.images[i].scale_bytes);
    Status st;
    {
      py::gil_scoped_release release;
      st = prepare_image(s, i, parts, std::span(buf).first(s.images[i].bytes),
                         std::span(buf).subspan(s.images[i].bytes));
    }
    check(st);
    out.emplace_back(reinterpret_cast<const char*>(buf.data()), buf.size());
  }
  return out;
}

// An immediate block as Python passes it: (first, count) of a reservation (ImmReservation).
using BlockArg = std::pair<std::uint32_t, std::uint32_t>;

std::vector<ImmBlock> blocks(const std::vector<BlockArg>& args) {
  std::vector<ImmBlock> out;
  for (auto [first, count] : args) out.push_back({first, count});
  return out;
}

// The executor and the Engine it posts through; every call goes through the
// engine's call_released, so none reaches an engine that stopped.
class PyExecutor {
 public:
  PyExecutor(py::object engine, const std::string& schedule, std::uint32_t rank,
             std::vector<MrDesc> inference_arenas, std::vector<MrDesc> trainer_barriers,
             std::uint64_t watermark_bytes, double timeout_s, const std::vector<BlockArg>& inference_imms,
             const std::vector<BlockArg>& trainer_imms)
      : engine_obj_(std::move(engine)), engine_(engine_obj_.cast<PyEngine&>()) {
    auto s = take(Schedule::from_json(schedule));
    ExecutorConfig cfg;
    cfg.rank = rank;
    cfg.watermark_bytes = watermark_bytes;
    cfg.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
    ExecutorPeers peers{std::move(inference_arenas), std::move(trainer_barriers), blocks(inference_imms),
                        blocks(trainer_imms)};
    ex_ = engine_.call_released([&](TransferEngine& e) {
      return take_released(Executor::create(e, std::move(s), cfg, std::move(peers)));
    });
  }
  ~PyExecutor() {
    if (engine_.stopped()) ex_->abandon();
    py::gil_scoped_release release;
    ex_.reset();
  }

  bool sends(std::uint32_t target) const { return ex_->sends(target); }
  void begin(std::uint64_t version) { run([&] { return ex_->begin(version); }); }
  void finish_group(std::uint32_t group) { run([&] { return ex_->finish_group(group); }); }
  void commit() { run([&] { return ex_->commit(); }); }

  // views: (name, buffer, dtype, lo, hi) per part: the rank's values of region [lo, hi).
  void send_target(std::uint32_t target, const py::list& views) {
    std::vector<py::buffer_info> keep;
    auto vs = views_of(views, keep);
    run([&] { return ex_->send_target(target, vs); });
  }

  py::dict stats() const {
    auto s = ex_->stats();
    py::dict d;
    d["writes"] = s.writes;
    d["bytes"] = s.bytes;
    d["post_s"] = s.post_s;
    d["prepare_s"] = s.prepare_s;
    d["staging_wait_s"] = s.staging_wait_s;
    d["drain_wait_s"] = s.drain_wait_s;
    d["barrier_wait_s"] = s.barrier_wait_s;
    d["peak_staging_bytes"] = s.peak_staging_bytes;
    return d;
  }

 private:
  template <typename T>
  static T take_released(Result<T>&& r) {
    if (!r.ok()) {
      py::gil_scoped_acquire gil;
      raise_status(r.status());
    }
    return std::move(r).value();
  }
  template <typename F>
  void run(F&& f) {
    Status st = engine_.call_released([&](TransferEngine&) { return f(); });
    check(st);
  }

  py::object engine_obj_;
  PyEngine& engine_;
  std::unique_ptr<Executor> ex_;
};

}  // namespace

void bind_weights(py::module_& m) {
  m.doc() = "RL weight transfer: planner, simulator, executor (docs/weights.md).";
  m.def("plan", &plan_json, py::arg("input_json"), py::arg("config_json") = "",
        "Plans a schedule from metadata JSON; returns the schedule JSON. Raises InvalidArgumentError "
        "naming the parameter for bad metadata.");
  m.def("simulate", &simulate_json, py::arg("schedule_json"), py::arg("nic_bytes_per_s"),
        py::arg("window_bytes") = 256ull << 20, "Runs the schedule through the fluid NIC model.");
  m.def("baseline_estimate", &baseline_json, py::arg("input_json"), py::arg("schedule_json"),
        py::arg("nic_bytes_per_s"), "The rank-0 gather/broadcast/scatter baseline on the same NIC model.");
  m.def("prepare_images", &prepare_images_json, py::arg("schedule_json"), py::arg("views"),
        "Every image of the schedule (data then scales) from whole-tensor views (the rank-0 baseline).");
  // The fixed values (weights/schedule.hpp), and those of a reserved block (weights/imms.hpp).
  m.def("data_imm", [](std::uint64_t v) { return data_imm(v); }, py::arg("version"));
  m.def("barrier_imm", [](std::uint64_t v, std::uint32_t g) { return barrier_imm(v, g); }, py::arg("version"),
        py::arg("group"));
  m.def(
      "block_data_imm",
      [](const BlockArg& b, std::uint64_t v) { return data_imm(ImmBlock{b.first, b.second}, v); },
      py::arg("block"), py::arg("version"));
  m.def(
      "block_barrier_imm",
      [](const BlockArg& b, std::uint64_t v, std::uint32_t g) {
        return barrier_imm(ImmBlock{b.first, b.second}, v, g);
      },
      py::arg("block"), py::arg("version"), py::arg("group"));
  m.attr("UPDATE_IMMS") = kUpdateImms;
  m.def(
      "reserve_update_imms",
      [](PyEngine& engine) {
        return std::make_unique<ImmReservation>(take(engine.call_released(
            [](TransferEngine& e) { return reserve_update_imms(e); })));
      },
      py::arg("engine"),
      "UPDATE_IMMS immediate values on `engine` for one rank's updates (owner \"weights#<n>\"); "
      "OutOfRangeError naming weights when none are free.");
  py::class_<PyExecutor>(m, "Executor", "The trainer side of updates (docs/weights.md).")
      .def(py::init<py::object, const std::string&, std::uint32_t, std::vector<MrDesc>, std::vector<MrDesc>,
                    std::uint64_t, double, std::vector<BlockArg>, std::vector<BlockArg>>(),
           py::arg("engine"), py::arg("schedule_json"), py::arg("rank"), py::arg("inference_arenas"),
           py::arg("trainer_barriers"), py::arg("watermark_bytes") = 256ull << 20, py::arg("timeout_s") = 30.0,
           py::arg("inference_imms") = std::vector<BlockArg>{}, py::arg("trainer_imms") = std::vector<BlockArg>{})
      .def("sends", &PyExecutor::sends, py::arg("target"))
      .def("begin", &PyExecutor::begin, py::arg("version"))
      .def("send_target", &PyExecutor::send_target, py::arg("target"), py::arg("views"))
      .def("finish_group", &PyExecutor::finish_group, py::arg("group"))
      .def("commit", &PyExecutor::commit)
      .def("stats", &PyExecutor::stats);
}

}  // namespace fabric::python
