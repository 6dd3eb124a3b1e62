#include "libfabric/fi_hints.hpp"

#include <cstdlib>
#include <cstring>

namespace fabric::ofi {

namespace {
// fi_freeinfo frees prov_name, so it must come from malloc.
char* dup(std::string_view s) {
  auto* p = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}
}  // namespace

InfoPtr engine_hints(std::string_view prov, bool delivery_complete, bool hmem, bool reads) {
  InfoPtr hints(fi_allocinfo());
  hints->caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
  if (reads) hints->caps |= FI_READ | FI_REMOTE_READ;
  if (hmem) hints->caps |= FI_HMEM;
  // The engine gives every operation its own context, so providers that need
  // FI_CONTEXT/FI_CONTEXT2 are welcome.
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  // Device buffers are always registered and passed with their descriptor.
  if (hmem) hints->domain_attr->mr_mode |= FI_MR_HMEM;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  // Nothing here relies on ordering; unordered providers (EFA SRD) stay eligible.
  hints->tx_attr->msg_order = 0;
  hints->rx_attr->msg_order = 0;
  if (delivery_complete) hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  if (!prov.empty()) hints->fabric_attr->prov_name = dup(prov);
  return hints;
}

}  // namespace fabric::ofi
