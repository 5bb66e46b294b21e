#!/usr/bin/env bash
# All the tests: the Rust workspace, then the Python package built from this
# checkout and its pytest suite (hypothesis properties against numpy and
# torch, and gatherscatter.torch's autograd functions against torch's own).
# Installs what it needs with pip: maturin, pytest, hypothesis, numpy, ml_dtypes,
# dask with distributed (the gatherscatter.dask tests start a local cluster)
# and torch (about 3 GB with its CUDA libraries, under a minute here; the
# torch tests are skipped with GS_TEST_TORCH=0, and only then).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace

python3 -m pip install --quiet --disable-pip-version-check \
  "maturin>=1.9,<2" "pytest>=7" "hypothesis>=6" "numpy>=1.21" "ml_dtypes>=0.2" \
  "dask[array]>=2024.1" "distributed>=2024.1"
if [ "${GS_TEST_TORCH:-1}" = 1 ]; then
  python3 -m pip install --quiet --disable-pip-version-check torch
fi
# Build the wheel in the workspace's target/, with the `pytest` profile
# (unoptimised, with a test build's checks: see Cargo.toml), then install it
# as a user would.
echo "== test_all: the wheel, at $SECONDS s" >&2
rm -rf target/wheels
maturin build --profile pytest --quiet -m crates/gatherscatter-py/Cargo.toml --out target/wheels
python3 -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps target/wheels/gatherscatter-*.whl
# From outside the source tree, so the installed package is the one imported.
echo "== test_all: pytest, at $SECONDS s" >&2
(cd crates/gatherscatter-py/tests && python3 -m pytest -q -p no:cacheprovider .)
