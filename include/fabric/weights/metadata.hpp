#pragma once
// What trainer and inference ranks say about their parameters: name, global
// shape, dtype and placement over a device mesh (DTensor-style), plus the name
// map that says which trainer parameters make which inference parameter.
// Contract in docs/weights.md.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/status.hpp"

namespace fabric::weights {

enum class DType : std::uint8_t { bf16, f32, fp8_e4m3 };
// FP8 targets carry float32 scales: one per 128x128 block of the last two
// dims, or one per output channel (every index but the last).
enum class Quant : std::uint8_t { none, fp8_block128, fp8_per_channel };

[[nodiscard]] std::size_t dtype_size(DType dtype) noexcept;
[[nodiscard]] std::string_view dtype_name(DType dtype) noexcept;
[[nodiscard]] Result<DType> parse_dtype(std::string_view name);
[[nodiscard]] std::string_view quant_name(Quant quant) noexcept;
[[nodiscard]] Result<Quant> parse_quant(std::string_view name);

// How a tensor lies along one mesh dimension.
struct Placement {
  enum class Kind : std::uint8_t { replicate, shard, only };
  Kind kind = Kind::replicate;
  // shard: the tensor dim split over this mesh dim (torch.chunk sizes);
  // only: the one mesh coordinate that holds the tensor (a pipeline stage).
  std::int32_t value = 0;

  static constexpr Placement replicate() noexcept { return {Kind::replicate, 0}; }
  static constexpr Placement shard(std::int32_t dim) noexcept { return {Kind::shard, dim}; }
  static constexpr Placement only(std::int32_t coord) noexcept { return {Kind::only, coord}; }
  friend bool operator==(const Placement&, const Placement&) = default;
};

struct MeshDim {
  std::string name;
  std::uint32_t size = 1;
};

// Ranks are numbered row-major over the dims (the last dim varies fastest).
struct Mesh {
  std::vector<MeshDim> dims;
  [[nodiscard]] std::uint32_t num_ranks() const noexcept;
  [[nodiscard]] std::vector<std::uint32_t> coords(std::uint32_t rank) const;
};

using Shape = std::vector<std::int64_t>;

// A half-open index box [lo, hi) in a tensor's global index space.
struct Box {
  Shape lo;
  Shape hi;
  [[nodiscard]] std::int64_t numel() const noexcept;
  [[nodiscard]] bool contains(const Box& other) const noexcept;
  [[nodiscard]] std::string to_string() const;
  friend auto operator<=>(const Box&, const Box&) = default;
};

[[nodiscard]] std::string shape_string(const Shape& shape);

// The part of `shape` that a rank at `coords` holds, or an empty optional-like
// Box (numel 0, lo empty) when an `only` placement excludes it. `skip[d]` true
// leaves mesh dim d out (trainer dims that prepare unshards).
struct LocalBox {
  bool held = false;
  Box box;
};
[[nodiscard]] LocalBox local_box(const Shape& shape, const std::vector<Placement>& placements,
                                 const std::vector<std::uint32_t>& mesh_sizes,
                                 const std::vector<std::uint32_t>& coords,
                                 const std::vector<bool>& skip = {});

// A set of trainer parameters sent together; groups run one after another.
// unshard[d]: prepare reconstructs the tensor along mesh dim d (FSDP), so any
// rank of that dim can send any part of it; false keeps the rank's own part (EP, PP).
struct MeshGroup {
  std::string name;
  std::vector<bool> unshard;
};

struct SourceParam {
  std::string name;
  Shape shape;
  DType dtype = DType::bf16;
  std::vector<Placement> placements;  // one per trainer mesh dim
  std::uint32_t mesh_group = 0;
};

struct TargetParam {
  std::string name;
  Shape shape;
  DType dtype = DType::bf16;
  Quant quant = Quant::none;
  std::vector<Placement> placements;  // one per inference mesh dim; replicate or shard
};

// A target made of sources: each (optionally transposed: last two dims swapped)
// and, when there are several, concatenated along fuse_dim (0 or 1). A sharded
// target shards each part on its own (vLLM's fused qkv and gate_up layout).
struct NameRule {
  std::string target;
  std::vector<std::string> sources;
  std::int32_t fuse_dim = 0;
  bool transpose = false;
};

struct TrainerLayout {
  Mesh mesh;
  std::vector<MeshGroup> groups;
  std::vector<SourceParam> params;
};

struct InferenceLayout {
  Mesh mesh;
  std::vector<TargetParam> params;
};

}  // namespace fabric::weights
