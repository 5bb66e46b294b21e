#!/usr/bin/env bash
# Run every fuzz target for SECONDS each (default 30) from the committed
# corpus; fail on the first crash. Needs the nightly toolchain and cargo-fuzz.
#   fuzz/run_all.sh 600         # a long run; then `cargo fuzz cmin TARGET`
#   FUZZ_BUILD=--dev fuzz/run_all.sh 12   # unoptimised: a quick smoke run
# FUZZ_BUILD picks the build: -O (the default: the release profile,
# optimised) or --dev (the dev profile: unoptimised, built in a fraction
# of the time, for fewer executions a second). CI does not fuzz: its test
# suite replays the committed corpus (crates/gsx/tests/fuzz_corpus.rs).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-30}"
build="${FUZZ_BUILD:--O}"
mapfile -t targets < <(cargo +nightly fuzz list)
cargo +nightly fuzz build "$build"
total=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  log="$(mktemp)"
  # A scratch copy keeps the committed corpus unchanged by these runs.
  scratch="$(mktemp -d)"
  cp -r "corpus/$t/." "$scratch/"
  if ! cargo +nightly fuzz run "$t" "$build" "$scratch" -- -max_total_time="$seconds" -max_len=1024 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz target $t failed" >&2
    exit 1
  fi
  runs=$(grep -Eo '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1)
  echo "fuzz $t: ${runs:-0} executions, $cov, no crash"
  total=$((total + ${runs:-0}))
  rm -rf "$scratch" "$log"
done
echo "fuzz total: $total executions"
