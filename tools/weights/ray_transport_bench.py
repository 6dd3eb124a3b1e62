"""Moving a CPU tensor between two Ray actors: fabric_lib.ray_transport's one-sided "FABRIC"
transport against Ray's object store (the same ray.put without a tensor transport), with a local
copy of the same bytes in the consumer as the physical counterpart, all in one run
(docs/weights.md, "Ray tensor transport").

  PYTHONPATH=build/default/python ~/.cache/fabric-lib/vllm-venv/bin/python \
      tools/weights/ray_transport_bench.py --json docs/weights/ray-transport-tcp.json
  python3 tools/weights/ray_transport_plot.py docs/weights/ray-transport-tcp.json docs/weights/ray-transport-tcp.png

Per size and rep, both paths alternate (which goes first swaps every rep). Two times per path:
`get_s`, the consumer's ray.get alone (the producer's ray.put has returned: FABRIC registered the tensor
there, the object store holds its copy), and `total_s`, the driver's clock from asking the
producer for the object to the consumer holding it (what a user's step pays), less the
consumer's byte check. The consumer
checks every byte it got against the producer's checksum; a mismatch ends the run with exit 1.
Ray and fabric traffic stay on 127.0.0.1 (FI_TCP_IFACE=lo, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

SIZES_MIB = [1, 16, 64, 256]

ENV = {
    "FI_TCP_IFACE": "lo",
    "FI_SOCKETS_IFACE": "lo",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # keeps Ray's node address on loopback
    "OMP_NUM_THREADS": "1",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-mib", type=int, nargs="+", default=SIZES_MIB)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--provider", default="tcp", help="the engines' provider (FABRIC_RAY_PROVIDER)")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    os.environ.update(ENV, FABRIC_RAY_PROVIDER=args.provider)

    import ray
    import torch

    import fabric_lib.ray_transport as frt

    frt.register()

    @ray.remote(enable_tensor_transport=True, num_cpus=0)
    class Producer:
        def __init__(self) -> None:
            self.t = torch.empty(0)

        def make(self, nbytes: int) -> int:
            self.t = torch.randint(0, 255, (nbytes,), dtype=torch.uint8)
            return int(self.t.sum(dtype=torch.int64))

        # Refs from ray.put, handed out nested: Ray 2.60 lets a third actor borrow an RDT object
        # only when it was put (an actor method's RDT result can only be passed as an argument,
        # which would hide the get inside Ray's argument resolution).
        def put(self, path: str) -> tuple[list, float]:
            t0 = time.perf_counter()
            ref = ray.put([self.t], _tensor_transport="FABRIC" if path == "fabric" else None)
            return [ref], time.perf_counter() - t0

    @ray.remote(enable_tensor_transport=True, num_cpus=0)
    class Consumer:
        def fetch(self, refs: list, checksum: int) -> tuple[float, float]:
            t0 = time.perf_counter()
            (t,) = ray.get(refs[0], timeout=300)
            t1 = time.perf_counter()
            if int(t.sum(dtype=torch.int64)) != checksum:
                raise RuntimeError("the tensor arrived with other bytes")
            return t1 - t0, time.perf_counter() - t1

        def local_copy(self, nbytes: int) -> float:
            src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8)
            dst = torch.empty_like(src)
            t0 = time.perf_counter()
            dst.copy_(src)
            return time.perf_counter() - t0

    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             object_store_memory=2 << 30, log_to_driver=False,
             runtime_env={"env_vars": {**ENV, "FABRIC_RAY_PROVIDER": args.provider,
                                       "PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
    rows = []
    try:
        producer, consumer = Producer.remote(), Consumer.remote()
        for mib in args.sizes_mib:
            n = mib << 20
            checksum = ray.get(producer.make.remote(n))
            times: dict[str, dict[str, list[float]]] = {
                p: {"put_s": [], "get_s": [], "total_s": []} for p in ("fabric", "object_store")}
            local = []
            for rep in range(args.reps + 1):  # rep 0 warms both paths (registration caches, plasma pages)
                order = ("fabric", "object_store") if rep % 2 else ("object_store", "fabric")
                for path in order:
                    t0 = time.perf_counter()
                    ref, put_s = ray.get(producer.put.remote(path), timeout=300)
                    get_s, check_s = ray.get(consumer.fetch.remote(ref, checksum), timeout=300)
                    total_s = time.perf_counter() - t0 - check_s
                    del ref
                    if rep:
                        times[path]["put_s"].append(put_s)
                        times[path]["get_s"].append(get_s)
                        times[path]["total_s"].append(total_s)
                if rep:
                    local.append(ray.get(consumer.local_copy.remote(n)))
            row = {"bytes": n, "local_copy_s": local}
            for path, t in times.items():
                row[path] = {**t, **{f"{k}_best": min(v) for k, v in t.items()},
                             **{f"{k}_median": statistics.median(v) for k, v in t.items()}}
            row["local_copy_gbps_best"] = n / min(local) / 1e9
            for k in ("put_s", "get_s", "total_s"):
                row[f"fabric_over_object_store_{k}_median"] = row["fabric"][f"{k}_median"] / row["object_store"][f"{k}_median"]
            rows.append(row)
            print(f"{mib:5d} MiB  put  fabric {row['fabric']['put_s_median'] * 1e3:7.1f} ms  object store "
                  f"{row['object_store']['put_s_median'] * 1e3:7.1f} ms  |  get  fabric {n / row['fabric']['get_s_median'] / 1e9:6.2f} GB/s  "
                  f"object store {n / row['object_store']['get_s_median'] / 1e9:6.2f} GB/s  |  "
                  f"total fabric {row['fabric']['total_s_median'] * 1e3:8.1f} ms  object store "
                  f"{row['object_store']['total_s_median'] * 1e3:8.1f} ms  |  local copy "
                  f"{row['local_copy_gbps_best']:6.2f} GB/s", flush=True)
    finally:
        ray.shutdown()
    doc = {"provider": args.provider, "reps": args.reps, "machine": {"cpus": os.cpu_count(), "host": platform.machine()},
           "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "results": rows}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
