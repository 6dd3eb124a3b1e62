// Links against an installed fabric-lib: opens an engine on shm, registers
// memory and round-trips its descriptor, so libfabric, hwloc and the logging
// libraries all resolve at link and at run time.

#include <cstdio>
#include <vector>

#include <fabric/fabric.hpp>

int main() {
  auto engine = fabric::TransferEngine::create({});
  if (!engine) {
    std::fprintf(stderr, "consumer: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  std::vector<std::byte> buffer(1 << 16);
  auto registered = (*engine)->reg_mr(buffer.data(), buffer.size());
  if (!registered) {
    std::fprintf(stderr, "consumer: %s\n", registered.status().to_string().c_str());
    return 1;
  }
  const std::string text = registered->desc.to_string();
  auto parsed = fabric::MrDesc::parse(text);
  if (!parsed || parsed->to_string() != text) {
    std::fprintf(stderr, "consumer: descriptor did not round-trip\n");
    return 1;
  }
  std::printf("consumer: fabric %d.%d.%d, engine on shm, descriptor round-trips\n",
              fabric::kVersionMajor, fabric::kVersionMinor, fabric::kVersionPatch);
  return 0;
}
