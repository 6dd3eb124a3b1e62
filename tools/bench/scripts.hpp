#pragma once
// Where fabric-bench's Python helpers are: beside an installed binary
// (<prefix>/share/fabric-lib/bench/, tools/bench/CMakeLists.txt installs them there), else in
// the source tree the binary was built from, so that a build tree and an installed prefix both
// work without a flag.

#include <string>

namespace bench {

// plot.py: the PNG of --plot.
std::string plot_script();
// peers/peer_bench.py: the harness of --peer.
std::string peer_script();

}  // namespace bench
