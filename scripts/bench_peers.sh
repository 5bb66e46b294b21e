#!/usr/bin/env bash
# Run the peer benchmark (the harness's peers.py: numpy, onnxruntime, torch)
# with gatherscatter's columns in the same run, then summarise it. The
# harness is not part of this repository: name its folder.
#
#   scripts/bench_peers.sh BENCH_DIR OUT_DIR [extra peers.py args, e.g. --quick --workloads W1,W4]
#
# Columns: gs(Tt) returns a fresh output per call, gs-into(Tt) writes into one
# caller-owned buffer. A second run with --prealloc puts gs-into beside the
# peers' own preallocated-output variants (ORT IOBinding, torch out=).
# Needs python3 with numpy, onnxruntime and torch (peers it cannot import are
# skipped) and matplotlib (for the plot), and about 2.3 GB in OUT_DIR/inputs
# for the workload files.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -lt 2 ]; then
  echo "usage: scripts/bench_peers.sh BENCH_DIR OUT_DIR [peers.py args]" >&2
  exit 2
fi
bench="$(cd "$1" && pwd)"
out="$2"
shift 2
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# The CPU of this run: vendor, family, model, name and vector extensions.
python3 - <<'PY'
info = {}
for line in open("/proc/cpuinfo"):
    key, _, value = line.partition(":")
    info.setdefault(key.strip(), value.strip())
flags = set(info.get("flags", "").split())
vector = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl") if f in flags]
print(f"CPU: {info.get('vendor_id')} family {info.get('cpu family')} model {info.get('model')} "
      f"({info.get('model name')}), {' '.join(vector) or 'no AVX'}")
PY
cargo build --release -p gsx --bin gsx-bench --manifest-path "$here/Cargo.toml"
exe="$here/target/release/gsx-bench"
cd "$bench"
python3 peers.py --inputs-dir "$out/inputs" \
  --external "gs=$exe" --external "gs-into=$exe --into" \
  --json "$out/fresh.json" --markdown "$out/fresh.md" "$@"
python3 peers.py --prealloc --inputs-dir "$out/inputs" \
  --external "gs-into=$exe --into" \
  --json "$out/prealloc.json" --markdown "$out/prealloc.md" "$@"
python3 "$here/scripts/bench_report.py" "$out/fresh.json" "$out/prealloc.json" \
  --png "$out/bench.png" | tee "$out/summary.md"
