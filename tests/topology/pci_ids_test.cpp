#include "topology/pci_ids.hpp"

#include <gtest/gtest.h>

namespace fabric::topo {
namespace {

TEST(PciIds, NvidiaDisplayAnd3dControllersAreGpus) {
  EXPECT_TRUE(is_gpu_pci(0x10de, 0x0302));  // H100 SXM
  EXPECT_TRUE(is_gpu_pci(0x10de, 0x0300));
  EXPECT_FALSE(is_gpu_pci(0x10de, 0x0680));  // NVSwitch
  EXPECT_FALSE(is_gpu_pci(0x10de, 0x0403));  // the GPU's HDMI audio function
  EXPECT_FALSE(is_gpu_pci(0x1234, 0x0300));  // an emulated VGA
}

TEST(PciIds, CudaAndNvmlOsDevicesNameGpusDisplayNodesDoNot) {
  EXPECT_TRUE(is_gpu_osdev_name("cuda0"));
  EXPECT_TRUE(is_gpu_osdev_name("nvml12"));
  EXPECT_FALSE(is_gpu_osdev_name("card0"));
  EXPECT_FALSE(is_gpu_osdev_name("renderD128"));
  EXPECT_FALSE(is_gpu_osdev_name("cuda"));
  EXPECT_FALSE(is_gpu_osdev_name("cudax"));
}

TEST(PciIds, EfaAndMellanoxAreRdmaNicsEnaAndVirtioAreNot) {
  EXPECT_EQ(rdma_pci_kind(0x1d0f, 0xefa1, 0x0200), NicKind::efa);
  EXPECT_EQ(rdma_pci_kind(0x1d0f, 0xefa0, 0x0200), NicKind::efa);
  EXPECT_EQ(rdma_pci_kind(0x15b3, 0x1021, 0x0207), NicKind::connectx);
  EXPECT_EQ(rdma_pci_kind(0x15b3, 0x1021, 0x0200), NicKind::connectx);
  EXPECT_FALSE(rdma_pci_kind(0x1d0f, 0xec20, 0x0200));  // ENA
  EXPECT_FALSE(rdma_pci_kind(0x1d0f, 0xcd01, 0x0108));  // Amazon NVMe
  EXPECT_FALSE(rdma_pci_kind(0x1af4, 0x1041, 0x0200));  // virtio-net
  EXPECT_FALSE(rdma_pci_kind(0x15b3, 0xa2dc, 0x0604));  // a BlueField bridge
}

TEST(PciIds, VerbsDeviceKindFromVendorThenName) {
  EXPECT_EQ(nic_kind(0x1d0f, "rdmap79s0"), NicKind::efa);
  EXPECT_EQ(nic_kind(0, "efa_0"), NicKind::efa);
  EXPECT_EQ(nic_kind(0, "mlx5_3"), NicKind::connectx);
  EXPECT_EQ(nic_kind(0, "rxe0"), NicKind::other);
  EXPECT_EQ(nic_kind(0x8086, "irdma0"), NicKind::other);
  EXPECT_EQ(to_string(NicKind::connectx), "connectx");
}

}  // namespace
}  // namespace fabric::topo
