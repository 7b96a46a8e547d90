#!/usr/bin/env bash
# The cost of an agent: time of `Runtime::open` and resident memory per idle
# opened agent (10,000 new sessions kept open), against the scripted model.
# Usage: bench/runtime_open.sh [AGENTS]   (optimised `fast` profile build)
set -euo pipefail
cd "$(dirname "$0")/.."
# Each open agent holds its session file open.
ulimit -n "$(ulimit -Hn)"
exec cargo run --quiet --profile fast -p ferroclaw-runtime --example open_bench -- "${1:-10000}"
