#include "libfabric/fi_provider.hpp"

#include "libfabric/fi_hints.hpp"
#include "libfabric/shm_leftovers.hpp"

#include "common/log.hpp"
#include "common/random.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <atomic>
#include <array>
#include <string_view>
#include <dlfcn.h>

#include <csignal>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include <unistd.h>

namespace fabric::ofi {

namespace {

constexpr auto kApiVersion = FI_VERSION(1, 17);

// Debian's libfabric links the psm provider, whose libinfinipath installs
// SIGINT/SIGTERM/SIGSEGV/... handlers at load time that exit(1): crashes and
// Ctrl-C would vanish into an ordinary exit code. Handlers that live in that
// library go back to the default; any the application set stay.
void drop_foreign_signal_handlers() {
  static constexpr std::array<int, 7> kSignals = {SIGINT, SIGTERM, SIGSEGV, SIGBUS,
                                                  SIGILL, SIGABRT, SIGFPE};
  for (int sig : kSignals) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0) continue;
    const bool siginfo = (current.sa_flags & SA_SIGINFO) != 0;
    void* fn = siginfo ? reinterpret_cast<void*>(current.sa_sigaction)
                       : reinterpret_cast<void*>(current.sa_handler);
    if (fn == reinterpret_cast<void*>(SIG_DFL) || fn == reinterpret_cast<void*>(SIG_IGN)) continue;
    Dl_info where{};
    if (dladdr(fn, &where) == 0 || where.dli_fname == nullptr) continue;
    if (std::string_view(where.dli_fname).find("infinipath") == std::string_view::npos) continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    log::debug("reset signal {} handler installed by {}", sig, where.dli_fname);
  }
}

// Before the first fi_getinfo, so that providers chaining to the previous
// handler (shm cleans up its files on SIGSEGV/SIGBUS) chain to the default.
void check_signals_once() {
  static std::once_flag signals_checked;
  std::call_once(signals_checked, drop_foreign_signal_handlers);
}

// The entry named `domain_name`, or the first one when that is empty.
Result<const fi_info*> pick_domain(const fi_info* list, const std::string& domain_name) {
  if (domain_name.empty()) return list;
  std::string seen;
  for (const fi_info* p = list; p != nullptr; p = p->next) {
    const char* name = p->domain_attr->name;
    if (name != nullptr && domain_name == name) return p;
    if (name != nullptr && seen.find(name) == std::string::npos) {
      seen += fmt::format("{}\"{}\"", seen.empty() ? "" : ", ", name);
    }
  }
  return Status(Errc::not_found,
                fmt::format("provider {} has no domain named \"{}\" (EngineConfig::nics); its "
                            "domains here: {}",
                            list->fabric_attr->prov_name, domain_name, seen));
}

Result<InfoPtr> getinfo(const std::string& prov, const char* node, bool delivery_complete,
                        bool hmem = false, const std::string& domain_name = {}) {
  fi_info* found = nullptr;
  const std::uint64_t flags = node != nullptr ? FI_SOURCE : 0;
  check_signals_once();
  // With RDMA READ where the provider has it; a provider without still serves everything else
  // (its Domains report Limits::reads false and submit_*_read says unsupported).
  InfoPtr hints = engine_hints(prov, delivery_complete, hmem, true);
  int rc = fi_getinfo(kApiVersion, node, nullptr, flags, hints.get(), &found);
  if (rc == -FI_ENODATA) {
    hints = engine_hints(prov, delivery_complete, hmem, false);
    rc = fi_getinfo(kApiVersion, node, nullptr, flags, hints.get(), &found);
  }
  if (rc != 0) {
    return Status(rc == -FI_ENODATA ? Errc::not_found : Errc::provider,
                  fmt::format("fi_getinfo(provider=\"{}\"{}{}) found no RDM endpoint with "
                              "MSG+RMA: {}",
                              prov.empty() ? "any" : prov, node ? ", node=" : "",
                              node ? node : "", fi_strerror(-rc)));
  }
  InfoPtr all(found);
  auto picked = pick_domain(found, domain_name);
  if (!picked) return picked.status();
  // Keep one entry only; the others are freed with the list.
  InfoPtr first(fi_dupinfo(picked.value()));
  if (first->domain_attr->cq_data_size < 4) {
    return Status(Errc::unsupported,
                  fmt::format("provider {} carries {} bytes of remote CQ data; the engine "
                              "needs 4 for immediates",
                              first->fabric_attr->prov_name, first->domain_attr->cq_data_size));
  }
  return first;
}

// The distinct providers on this host that offer what the engine needs, in
// libfabric's order ("shm, tcp;ofi_rxm, ..."), for error messages.
std::string usable_providers() {
  InfoPtr hints = engine_hints("", false, false);
  fi_info* found = nullptr;
  if (fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints.get(), &found) != 0) return "none";
  InfoPtr all(found);
  std::vector<std::string> names;
  for (const fi_info* i = found; i != nullptr; i = i->next) {
    if (i->domain_attr->cq_data_size < 4) continue;
    std::string name = i->fabric_attr->prov_name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

// Says why a named provider found nothing: missing hardware, an address no
// interface has, or a provider this host lacks.
Status explain_not_found(const std::string& prov, const char* node, const Status& failure) {
  if (failure.code() != Errc::not_found) return failure;
  if (is_ip_provider(prov) && node != nullptr && getinfo(prov, nullptr, false).ok()) {
    return cannot_bind(prov, node);
  }
  const std::string available = usable_providers();
  if (prov == "efa") {
    return Status(Errc::not_found,
                  fmt::format("no EFA device on this host (libfabric's efa provider found none); "
                              "usable providers here: {}; run fabric-info for details",
                              available));
  }
  return Status(Errc::not_found,
                fmt::format("no usable libfabric provider '{}' on this host; usable providers "
                            "here: {}; run fabric-info for details",
                            prov, available));
}

}  // namespace

std::string provider_string(std::string_view name) {
  if (name == "tcp") return "tcp;ofi_rxm";
  if (name == "udp") return "udp;ofi_rxd";
  if (name == "verbs") return "verbs;ofi_rxm";
  return std::string(name);
}

bool prov_defaults_to_delivery_complete(std::string_view prov) {
  // ofi_rxm reports a target-side failure (a revoked key) to the writer only
  // when the write waits for delivery; shm 1.17 never completes zero-length
  // writes in that mode, so it keeps the provider's default.
  return prov.starts_with("tcp") || prov.starts_with("verbs");
}

Status cannot_bind(std::string_view prov, const std::string& bind_address) {
  return Status(Errc::not_found,
                fmt::format("provider {} cannot bind to '{}': no local interface has that "
                            "address (EngineConfig::bind_address, --bind)",
                            prov, bind_address));
}

bool is_ip_provider(std::string_view prov) {
  static constexpr std::array<std::string_view, 5> kIp = {"tcp", "udp", "sockets", "verbs",
                                                          "net"};
  for (auto p : kIp) {
    if (prov.starts_with(p)) return true;
  }
  return false;
}

ProviderDomains list_domains(const std::string& provider) {
  ProviderDomains out;
  out.provider = provider == "auto" ? std::string() : provider_string(provider);
  InfoPtr hints = engine_hints(out.provider, false, false);
  fi_info* found = nullptr;
  check_signals_once();
  if (fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints.get(), &found) != 0) return out;
  InfoPtr all(found);
  if (out.provider.empty()) out.provider = found->fabric_attr->prov_name;
  for (const fi_info* i = found; i != nullptr; i = i->next) {
    if (i->domain_attr->name == nullptr || out.provider != i->fabric_attr->prov_name) continue;
    const std::string name = i->domain_attr->name;
    if (std::find(out.names.begin(), out.names.end(), name) == out.names.end()) {
      out.names.push_back(name);
    }
  }
  return out;
}

Result<InfoPtr> find_provider(const ProviderQuery& query) {
  std::string prov = query.provider == "auto" ? "" : provider_string(query.provider);
  if (prov.empty()) {
    // Take the first provider libfabric ranks best, then ask again by name so
    // that IP providers are pinned to the bind address like any other.
    auto any = getinfo("", nullptr, false);
    if (!any) return any;
    prov = any.value()->fabric_attr->prov_name;
  }
  // shm names its region after the pid unless told otherwise; a region left
  // in /dev/shm by a killed process whose pid is reused makes fi_enable fail
  // with EBUSY, so every shm endpoint gets a random name of its own. The
  // pid in it lets peers tell when this process is gone (shm_liveness.hpp).
  std::string shm_name;
  if (prov == "shm") {
    // Once per process, before its first region: the regions of engines killed earlier. By
    // pid, not a once-flag, so that a forked child (a new process) sweeps too.
    static std::atomic<pid_t> swept_by{0};
    if (swept_by.exchange(::getpid()) != ::getpid()) {
      const SweepResult r = sweep_dead_regions();
      if (r.removed > 0) {
        log::info("removed {} shm region file(s) ({} MiB) left by engines that died",
                  r.removed, r.bytes >> 20);
      }
    }
    shm_name = fmt::format("fl-{}-{:016x}", ::getpid(), random_u64());
  }
  const char* node = is_ip_provider(prov)   ? query.bind_address.c_str()
                     : !shm_name.empty()    ? shm_name.c_str()
                                            : nullptr;
  const bool delivery_complete =
      query.delivery_complete.value_or(prov_defaults_to_delivery_complete(prov));
  if (query.want_hmem) {
    // GPU memory needs FI_HMEM; a provider without it still serves host memory.
    auto with_hmem = getinfo(prov, node, delivery_complete, true, query.domain_name);
    if (with_hmem) return with_hmem;
    log::info("provider {} offers no FI_HMEM: GPU memory cannot be registered ({})", prov,
              with_hmem.status().message());
  }
  auto found = getinfo(prov, node, delivery_complete, false, query.domain_name);
  if (found) return found;
  // The provider is there but lacks the named domain: its own error lists the
  // domains it has, which says more than the list of providers.
  if (!query.domain_name.empty() && getinfo(prov, node, delivery_complete).ok()) {
    return found.status();
  }
  return explain_not_found(prov, shm_name.empty() ? node : nullptr, found.status());
}

}  // namespace fabric::ofi
