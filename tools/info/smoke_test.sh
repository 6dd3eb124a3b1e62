#!/bin/sh
# ctest fabric_info_smoke: the live probe as JSON, then the p5.48xlarge-like
# fixture as text, which must show its 8 GPUs, 32 EFA NICs and 8 groups.
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
