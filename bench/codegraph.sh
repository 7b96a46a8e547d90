#!/usr/bin/env bash
# Code graph benchmark: indexes a pinned copy of tokio's source from the cargo
# registry cache and reports full build time, database size, update time after
# one edit, and query latency (median, p99) of callers, callees and impact.
#
# Usage: bench/codegraph.sh [SOURCE_DIR] [QUERIES]
#   SOURCE_DIR defaults to ~/.cargo/registry/src/*/tokio-1.54.1 (pinned).
# Builds `crates/codegraph/examples/index_bench.rs` with `--profile fast`
# and without the tools feature (only the index and SQLite are compiled).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PINNED=tokio-1.54.1
SRC=${1:-$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"$PINNED" 2>/dev/null | head -1)}
QUERIES=${2:-200}
if [ -z "$SRC" ] || [ ! -d "$SRC" ]; then
    echo "no $PINNED in the cargo registry cache; run \`cargo fetch\` in a project using it, or pass SOURCE_DIR" >&2
    exit 2
fi

cd "$ROOT"
cargo build --quiet -p ferroclaw-codegraph --no-default-features --example index_bench --profile fast
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/fast/examples/index_bench"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r "$SRC" "$WORK/project"
echo "project: $SRC ($(find "$WORK/project" -name '*.rs' | wc -l) .rs files)"
"$BIN" "$WORK/project" "$QUERIES"
