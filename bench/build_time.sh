#!/usr/bin/env bash
# How long `scripts/run`'s build takes from scratch: `cargo build --profile
# fast -p ferroclaw-cli` (llama.cpp included) in an empty target directory,
# with JOBS jobs (default 2, a fresh 2-core machine), nothing else changed.
# Prints the wall time, the CPU time of all compilers together (what a busy
# shared machine does not inflate), the load average while it ran, and the
# wall time of llama.cpp's CMake build (the `llama-cpp-sys-2` build script)
# from cargo's --timings report.
#   bench/build_time.sh [TARGET_DIR] [JOBS]
# TARGET_DIR defaults to a new temporary directory (removed afterwards);
# give one to keep the build. Heavy: one at a time on a shared machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${1:-}"
jobs="${2:-2}"
if [ -z "$target" ]; then
  target=$(mktemp -d /tmp/ferroclaw-build-time-XXXXXX)
  trap 'rm -rf "$target"' EXIT
fi
[ ! -e "$target/fast" ] || { echo "$target/fast exists: not a build from scratch" >&2; exit 1; }
loads=$(mktemp)
( while sleep 10; do cut -d' ' -f1 /proc/loadavg >> "$loads"; done ) &
sampler=$!
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL="$jobs" /usr/bin/time -f "%U %S" -o "$loads.cpu" \
  cargo build --profile fast -p ferroclaw-cli -j "$jobs" --timings \
  --manifest-path "$root/Cargo.toml" --target-dir "$target" --quiet
wall=$(( $(date +%s) - start ))
kill "$sampler" 2>/dev/null || true
read -r user sys < "$loads.cpu"
echo "wall ${wall} s, CPU $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.0f", u + s }') s (user $user, sys $sys), jobs $jobs"
awk '{ t += $1; n++ } END { if (n) printf "load average while building: mean %.1f over %d samples\n", t / n, n }' "$loads"
report=$(ls -t "$target"/cargo-timings/cargo-timing-*.html 2>/dev/null | head -1)
if [ -n "$report" ]; then
  python3 - "$report" <<'EOF'
import json, re, sys
html = open(sys.argv[1]).read()
m = re.search(r"const UNIT_DATA = (\[.*?\]);", html, re.S)
units = json.loads(m.group(1)) if m else []
for u in units:
    if u["name"] == "llama-cpp-sys-2" and u.get("mode") == "run-custom-build":
        print(f"llama.cpp CMake build (llama-cpp-sys-2 build script): {u['duration']:.0f} s wall")
slow = sorted(units, key=lambda u: -u["duration"])[:5]
print("slowest units: " + ", ".join(f"{u['name']} {u.get('mode', '')} {u['duration']:.0f} s" for u in slow))
EOF
fi
rm -f "$loads" "$loads.cpu"
