#pragma once
// shm region files that outlive their engine. libfabric's shm provider keeps each endpoint's
// region in /dev/shm/<name> and unlinks it when the endpoint closes, so a process killed before
// that leaves its regions behind (about 394 MB after one test session). Every shm Domain holds a
// shared flock on its own region file for its life; the first shm Domain of a process removes
// the files of engines whose process is gone and whose lock nobody holds (docs/reliability.md,
// "Leftover shm files").

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/unique_fd.hpp"
#include "fabric/status.hpp"

namespace fabric::ofi {

// The region file of the endpoint whose fi_getname() is `address` ("fi_shm://fl-<pid>-...:..."),
// opened and share-locked; the lock goes with the returned fd. not_found for a name that is not
// one of ours (a region we did not name) or a file that is not there.
Result<UniqueFd> hold_own_region(std::span<const std::byte> address,
                                 const std::string& dir = "/dev/shm");

struct SweepResult {
  std::size_t removed = 0;
  std::uint64_t bytes = 0;
};

// Removes from `dir` every file named "fl-<pid>-..." that this user owns, whose process is not
// running and that no process holds a lock on: both, so that neither a pid reused by a live
// process nor a live engine in another pid namespace loses its region.
SweepResult sweep_dead_regions(const std::string& dir = "/dev/shm");

}  // namespace fabric::ofi
