#!/usr/bin/env bash
# Agent teams at rest: memory per idle teammate and model calls made by idle
# teammates. A one-shot lead spawns N teammates (each answers once, then is
# idle) and sleeps; the script reads the process's RSS once all N are idle,
# and counts the model requests each teammate made over the idle period
# (poll 5 s, the default). A run with N=0 is the baseline.
#
# Usage: bench/team_idle.sh [N] [IDLE_SECONDS]   (defaults 8 and 60)
# Needs target/debug/ferroclaw and target/debug/scripted-llm
# (cargo build -p ferroclaw-cli -p ferroclaw-testkit), or BIN_DIR=...
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-8}
IDLE=${2:-60}
BIN_DIR=${BIN_DIR:-$ROOT/target/debug}
WORK=$(mktemp -d /tmp/team-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

# rss_kib N: runs a lead with N teammates; prints "RSS_KIB TEAMMATE_REQUESTS".
measure() {
    local n=$1 dir="$WORK/run$1"
    mkdir -p "$dir/home" "$dir/ws"
    printf '[team]\nmax_teammates = %s\npoll_secs = 5\nidle_timeout_secs = %s\n' "$((n + 1))" "$((IDLE + 30))" \
        >"$dir/home/config.toml"
    python3 - "$n" "$IDLE" "$dir" <<'PY'
import json, sys
n, idle, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
calls = [{"name": "spawn_teammate", "arguments": {"name": f"t{i}", "role": "idle", "prompt": "Wait."}} for i in range(n)]
lead = []
if calls:
    lead.append({"kind": "reply", "tool_calls": calls})
lead += [{"kind": "reply", "tool_calls": [{"name": "bash", "arguments": {"command": f"sleep {idle + 5}", "timeout": (idle + 60) * 1000}}]},
         {"kind": "reply", "text": "done"}]
json.dump(lead, open(f"{d}/lead.json", "w"))
json.dump([{"kind": "reply", "text": "nothing to do yet"}], open(f"{d}/mate.json", "w"))
PY
    local routes=()
    for i in $(seq 0 $((n - 1))); do routes+=(--route "teammate \"t$i\"=$dir/mate.json"); done
    "$BIN_DIR/scripted-llm" --script "$dir/lead.json" --record "$dir/requests.jsonl" "${routes[@]}" >"$dir/server.out" &
    local server=$!
    until grep -q listening "$dir/server.out" 2>/dev/null; do sleep 0.05; done
    local url
    url=$(sed -n 's/listening on //p' "$dir/server.out")
    (cd "$dir/ws" && env -i PATH="$PATH" HOME="$dir/home" FERROCLAW_HOME="$dir/home" \
        ANTHROPIC_API_KEY=k ANTHROPIC_BASE_URL="$url" FERROCLAW_MODEL=anthropic/claude-test \
        "$BIN_DIR/ferroclaw" -p "go" --yes >/dev/null 2>&1) &
    local lead=$!
    sleep 1
    local pid
    pid=$(pgrep -P "$lead" -x ferroclaw || echo "$lead")
    while [ "$n" -gt 0 ] && [ "$(grep -o '"idle"' "$dir/ws/.agent/team/config.json" 2>/dev/null | wc -l)" -lt "$n" ]; do sleep 0.1; done
    sleep 2
    local rss
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    local before
    before=$(grep -c 'teammate \\"t' "$dir/requests.jsonl" 2>/dev/null || true)
    sleep "$IDLE"
    local after
    after=$(grep -c 'teammate \\"t' "$dir/requests.jsonl" 2>/dev/null || true)
    echo "$rss $((after - before))"
    kill "$lead" 2>/dev/null || true
    kill "$server" 2>/dev/null || true
    wait 2>/dev/null || true
}

read -r base _ < <(measure 0)
read -r with idle_calls < <(measure "$N")
echo "baseline (lead only): ${base} KiB RSS"
echo "with $N idle teammates: ${with} KiB RSS"
echo "memory per idle teammate: $(( (with - base) / N )) KiB"
echo "model requests by $N idle teammates in ${IDLE} s: ${idle_calls}"
