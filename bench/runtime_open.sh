#!/usr/bin/env bash
# The cost of an agent: time of `Runtime::open` and resident memory per idle
# agent (10,000 new sessions kept open; then 1,000 that answered a message),
# against the scripted model running in its own process.
# Usage: bench/runtime_open.sh [AGENTS]   (optimised `fast` profile build)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --profile fast -p ferroclaw-testkit --bin scripted-llm
cargo build --quiet --profile fast -p ferroclaw-runtime --example open_bench
target="${CARGO_TARGET_DIR:-target}/fast"
dir=$(mktemp -d)
echo '[{"kind": "reply", "text": "ok"}]' > "$dir/script.json"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$target/scripted-llm" --script "$dir/script.json" --repeat --port "$port" &
server=$!
trap 'kill $server; rm -rf "$dir"' EXIT
sleep 0.5
# Each open agent holds its session file open.
ulimit -n "$(ulimit -Hn)"
echo "== session files on $(df --output=fstype "${TMPDIR:-/tmp}" | tail -1) (${TMPDIR:-/tmp})"
SCRIPTED_LLM_URL="http://127.0.0.1:$port" "$target/examples/open_bench" "${1:-10000}"
if [ -d /dev/shm ]; then
  # The same with session files in memory: what an open costs besides the
  # fsync that makes a new session file durable.
  echo "== session files on tmpfs (/dev/shm)"
  TMPDIR=/dev/shm SCRIPTED_LLM_URL="http://127.0.0.1:$port" "$target/examples/open_bench" "${1:-10000}"
fi
