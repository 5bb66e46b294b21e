#!/usr/bin/env bash
# Run the peer benchmark (../shared/bench/peers.py: numpy, onnxruntime, torch)
# with gatherscatter's columns in the same run, then summarise it.
#
#   scripts/bench_peers.sh [OUT_DIR] [extra peers.py args, e.g. --quick --workloads W1,W4]
#
# Columns: gs(Tt) returns a fresh output per call, gs-into(Tt) writes into one
# caller-owned buffer. A second run with --prealloc puts gs-into beside the
# peers' own preallocated-output variants (ORT IOBinding, torch out=).
# Needs python3 with numpy, onnxruntime and torch (peers it cannot import are
# skipped) and matplotlib (for the plot), and about 2.3 GB in OUT_DIR/inputs
# for the workload files.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bench="${BENCH_DIR:-$here/../shared/bench}"
out="${1:-$here/target/bench}"
shift || true
mkdir -p "$out"
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
