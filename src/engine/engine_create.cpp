// Bringing an engine up: the config checks, every group's worker started and its Domains
// opened at once, the checks of what they opened, the engine's address; and what it reports.

#include <fmt/format.h>

#include <random>

#include "backends/nic_choice.hpp"
#include "backends/open_domains.hpp"
#include "common/log.hpp"
#include "common/random.hpp"
#include "engine/abandoned.hpp"
#include "engine/engine_impl.hpp"

namespace fabric {

namespace {
// Opening may wait on a provider (a verbs device in a loaded VM): bounded, but generously.
std::chrono::milliseconds open_bound(const EngineConfig& config) {
  return config.control_timeout + config.stuck_worker_grace;
}
}  // namespace

TransferEngine::TransferEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TransferEngine::~TransferEngine() { stop(); }

Result<std::unique_ptr<TransferEngine>> TransferEngine::create(const EngineConfig& config) {
  if (config.max_message_size == 0) {
    return Status(Errc::invalid_argument, "max_message_size must be > 0");
  }
  if (config.max_outstanding_requests == 0 || config.send_slots == 0) {
    return Status(Errc::invalid_argument,
                  "max_outstanding_requests and send_slots must be > 0");
  }
  if (config.domains_per_group == 0 || config.domains_per_group > NetAddr::kMaxDomains) {
    return Status(Errc::invalid_argument,
                  fmt::format("domains_per_group {} not in 1..{}", config.domains_per_group,
                              NetAddr::kMaxDomains));
  }
  if (config.metrics_peer_labels > kMaxPeerLabels) {
    return Status(Errc::invalid_argument,
                  fmt::format("metrics_peer_labels {} is more than {}", config.metrics_peer_labels,
                              kMaxPeerLabels));
  }
  auto planned = engine::plan_groups(config);
  if (!planned) return planned.status();
  if (config.host_group >= planned->size()) {
    return Status(Errc::invalid_argument,
                  fmt::format("host_group {} does not exist (the engine has {} groups)",
                              config.host_group, planned->size()));
  }

  auto thread_cpus = engine_thread_cpus(config.thread_cpus);
  if (!thread_cpus) return thread_cpus.status();
  auto impl = std::make_unique<Impl>(config, std::move(thread_cpus).value());
  engine::EngineShared& shared = *impl->shared;
  for (std::size_t g = 0; g < planned->size(); ++g) {
    impl->workers.push_back(std::make_unique<engine::Worker>(
        static_cast<std::uint32_t>(g), config, shared.callbacks, shared.imms, shared.admission,
        shared.peers));
  }
  // Every group opens its Domains on its own worker at once; then they are checked in order.
  for (std::size_t g = 0; g < planned->size(); ++g) {
    const engine::PlannedGroup& plan = (*planned)[g];
    impl->workers[g]->start(engine::worker_thread_cpus(plan.cpus, impl->threads.cpus),
                            [open = plan.open, index = plan.plan_index] {
                              return domain::open_domains(open, index);
                            });
  }
  std::vector<std::vector<std::byte>> addresses;
  Status failed;
  for (std::size_t g = 0; g < planned->size() && failed.ok(); ++g) {
    auto opened = impl->workers[g]->wait_started(open_bound(config));
    if (!opened) {
      failed = planned->size() == 1
                   ? opened.status()
                   : Status(opened.status().code(),
                            fmt::format("group {}: {}", g, opened.status().message()));
      break;
    }
    if (g == 0) {
      impl->identity = {impl.get(), opened->backend, opened->provider, opened->addresses.size(),
                        opened->reads};
    } else if (opened->provider != impl->identity.provider) {
      failed = Status(Errc::invalid_argument,
                      fmt::format("group {} opened provider {} but group 0 opened {}: every "
                                  "group must use one provider",
                                  g, opened->provider, impl->identity.provider));
      break;
    }
    impl->identity.reads = impl->identity.reads && opened->reads;
    for (auto& a : opened->addresses) addresses.push_back(std::move(a));
    impl->group_info.push_back(
        GroupInfo{(*planned)[g].gpu,
                  engine::worker_thread_cpus((*planned)[g].cpus, impl->threads.cpus),
                  std::move(opened->nics)});
  }
  const std::uint64_t instance = random_u64();
  if (failed.ok()) {
    auto address =
        NetAddr::make(impl->identity.backend, impl->identity.provider, instance,
                      config.max_message_size, std::move(addresses), planned->size());
    if (address) {
      impl->address = std::move(address).value();
    } else {
      failed = address.status();
    }
  }
  if (!failed.ok()) {
    if (!impl->stop_workers()) {
      engine::abandon(std::move(impl->workers), std::move(impl->shared));
      return failed;
    }
    impl->shared->callbacks.stop();
    return failed;
  }
  log::info("engine up: {}", impl->address.describe());
  log::info("engine threads: fabric-cb, fabric-watch on CPUs {} ({})",
            impl->threads.cpus.to_string(), impl->threads.source);
  for (std::size_t g = 0; g < impl->group_info.size(); ++g) {
    const GroupInfo& info = impl->group_info[g];
    for (std::size_t i = 0; i < info.nics.size(); ++i) {
      log::info("group {} (gpu {}, fabric-wk{} on CPUs {}) Domain {} ({}): {}", g, info.gpu, g,
                info.cpus.to_string(), i, impl->identity.provider,
                info.nics[i].to_string());
    }
  }
  return std::unique_ptr<TransferEngine>(new TransferEngine(std::move(impl)));
}

const NetAddr& TransferEngine::main_address() const noexcept { return impl_->address; }
const EngineConfig& TransferEngine::config() const noexcept { return impl_->config; }
const ThreadCpus& TransferEngine::thread_cpus() const noexcept { return impl_->threads; }
std::size_t TransferEngine::num_domains() const noexcept { return impl_->address.num_domains(); }
std::size_t TransferEngine::num_groups() const noexcept { return impl_->group_info.size(); }
const std::vector<DomainNic>& TransferEngine::domain_nics() const noexcept {
  return impl_->group_info.front().nics;
}
const std::vector<GroupInfo>& TransferEngine::groups() const noexcept {
  return impl_->group_info;
}

Result<std::vector<DomainNic>> resolve_domain_nics(const EngineConfig& config) {
  return domain::resolve_nics(config);
}

}  // namespace fabric
