#pragma once
// The fi_getinfo hints behind every libfabric Domain, in one place: the
// engine asks with them, fabric-info shows what they match, and
// fabric-bench's raw loop opens its endpoint with them, so none can drift.

#include <string_view>

#include "libfabric/fi_handles.hpp"

namespace fabric::ofi {

// An RDM endpoint with MSG + RMA, per-operation contexts, every mr_mode bit
// the engine honours and no ordering. `prov`: a libfabric provider string
// ("tcp;ofi_rxm"), empty for any; `hmem` adds FI_HMEM (GPU registration); `reads` adds FI_READ
// and FI_REMOTE_READ (RDMA READ both ways; the engine asks, and opens without where refused).
InfoPtr engine_hints(std::string_view prov, bool delivery_complete, bool hmem,
                     bool reads = false);

}  // namespace fabric::ofi
