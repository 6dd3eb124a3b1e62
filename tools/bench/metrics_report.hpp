#pragma once
// --metrics: the initiator engine's TransferEngine::metrics() after the sweep, as a few lines
// of text after the table and as the JSON report's "metrics" object (docs/observability.md
// names every field). The counts cover the whole run, warm-up rounds included.

#include <fabric/metrics.hpp>
#include <nlohmann/json.hpp>

namespace bench {

void print_metrics(const fabric::EngineMetrics& m);
[[nodiscard]] nlohmann::json metrics_json(const fabric::EngineMetrics& m);

}  // namespace bench
