#!/bin/sh
# ctest fabric_info_smoke: the live probe as JSON, then the p5.48xlarge-like
# fixture as text, which must show its 8 GPUs, 32 EFA NICs and 8 groups, and
# the four EFAs of GPU 0's switch as its Domains; then the ConnectX-7 fixture,
# one mlx5 device per GPU.
# Usage: smoke_test.sh FABRIC_INFO P5_XML   (outputs land in the current directory)
set -eu
info=$1
fixture=$2
"$info" --json > fabric-info-smoke.json
grep -q '"groups"' fabric-info-smoke.json
"$info" --xml "$fixture" > fabric-info-p5.txt
grep -q '^GPUs       8$' fabric-info-p5.txt
grep -q '^RDMA NICs  32$' fabric-info-p5.txt
grep -q '^Groups     8 ' fabric-info-p5.txt
grep -q '^  group 0  GPU0   NUMA 0  cpus 0-47,96-143 .*Domains: rdmap4s0-rdm, rdmap5s0-rdm, rdmap6s0-rdm, rdmap7s0-rdm (topology plan)$' fabric-info-p5.txt
"$info" --xml "$(dirname "$fixture")/h100_cx7.xml" > fabric-info-cx7.txt
grep -q '^Domains    verbs backend, 1 per group' fabric-info-cx7.txt
grep -q '^  group 7  GPU7   NUMA 1  cpus 56-111,168-223 .*Domains: mlx5_7 (topology plan)$' fabric-info-cx7.txt
