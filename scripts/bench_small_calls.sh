#!/usr/bin/env bash
# Small calls (issue #34, item 4): each op's tiny call from
# `tests/common/tiny_inputs.rs`, run by `examples/tiny_call_loop.rs`.
#
#   scripts/bench_small_calls.sh [ROUNDS]
#
# Prints the CPU, then for each op its instructions a call (callgrind,
# when valgrind is installed: the figure that does not move with the
# machine) and its time a call over ROUNDS rounds (default 15), each round
# every op once in turn, so the machine's drift falls on all of them
# alike: least, median, most, and the rounds at 0.2 us or less.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-15}
ops="copy Gather GatherElements ScatterElements ScatterElements_add ScatterReduce_mean
     GatherND ScatterND TensorScatter SegmentCsr SegmentCoo EmbeddingBag"

cargo build --release --quiet --example tiny_call_loop -p gatherscatter
bin=target/release/examples/tiny_call_loop
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The CPU, as every benchmark here prints it.
python3 - <<'EOF'
import re
info = open("/proc/cpuinfo").read()
field = lambda name: (re.search(rf"^{name}\s*:\s*(.*)$", info, re.M) or [None, "?"])[1]
flags = field("flags").split()
wanted = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl"]
print(f"CPU: {field('vendor_id')} family {field('cpu family')} model {field('model')}"
      f" ({field('model name')}); vector: {' '.join(f for f in wanted if f in flags) or 'none'}")
EOF
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with local changes)')"

if command -v valgrind >/dev/null; then
    for op in $ops; do
        valgrind --tool=callgrind --callgrind-out-file="$out/cg.$op" "$bin" "$op" 20000 \
            >/dev/null 2>&1
        callgrind_annotate "$out/cg.$op" |
            awk -v op="$op" '/PROGRAM TOTALS/ {gsub(",", "", $1); printf "%s %.0f\n", op, $1 / 20000}' \
                >>"$out/instructions"
    done
else
    echo "(valgrind not installed: no instruction counts)"
fi

for _ in $(seq "$rounds"); do
    for op in $ops; do
        "$bin" "$op" 1000000 | awk '{sub(":", "", $1); print $1, $2}' >>"$out/times"
    done
done

python3 - "$out" <<'EOF'
import statistics, sys
out = sys.argv[1]
instructions = {}
try:
    for line in open(f"{out}/instructions"):
        op, n = line.split()
        instructions[op] = int(n)
except FileNotFoundError:
    pass
times = {}
for line in open(f"{out}/times"):
    op, ns = line.split()
    times.setdefault(op, []).append(float(ns))
print(f"{'op':22} {'instr':>6} {'least':>7} {'median':>7} {'most':>7}  <=0.2us")
for op, ns in times.items():
    print(f"{op:22} {instructions.get(op, '-'):>6} {min(ns):7.1f} {statistics.median(ns):7.1f}"
          f" {max(ns):7.1f}  {sum(t <= 200 for t in ns)}/{len(ns)}")
EOF
