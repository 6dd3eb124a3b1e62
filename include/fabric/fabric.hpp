#pragma once
// Umbrella header for fabric-lib.

#include "fabric/backends.hpp"
#include "fabric/completion.hpp"
#include "fabric/device.hpp"
#include "fabric/engine.hpp"
#include "fabric/gpu_flag.hpp"
#include "fabric/imm_counter.hpp"
#include "fabric/memory.hpp"
#include "fabric/net_addr.hpp"
#include "fabric/nic_plan.hpp"
#include "fabric/post_timing.hpp"
#include "fabric/requests.hpp"
#include "fabric/status.hpp"
#include "fabric/timeout.hpp"
#include "fabric/topology.hpp"
#include "fabric/verbs_config.hpp"
#include "fabric/version.hpp"
