#!/usr/bin/env bash
# Many chats on one local model: one chat alone, then N at once (default 4),
# greedy, TOKENS tokens each (default 128); prints each chat's tokens/s and
# first-token time, the aggregate, and the speed-up (target: 2x or more for
# 4 chats, and no chat far behind the others).
#   bench/local_parallel.sh MODEL.gguf [CHATS] [TOKENS]
# FERROCLAW_LOCAL_THREADS sets the threads (default: half the CPUs).
# PROFILE=dev measures a debug build (llama.cpp is optimised in every
# profile, the scheduling loop is not); the default is release.
set -euo pipefail
model="${1:?usage: bench/local_parallel.sh MODEL.gguf [CHATS] [TOKENS]}"
chats="${2:-4}"
tokens="${3:-128}"
root="$(cd "$(dirname "$0")/.." && pwd)"
profile="${PROFILE:-release}"
cargo build --profile "$profile" --quiet --manifest-path "$root/Cargo.toml" -p ferroclaw-local --example parallel
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$root/target/$dir/examples/parallel" "$model" "$chats" "$tokens" 2>/dev/null
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
