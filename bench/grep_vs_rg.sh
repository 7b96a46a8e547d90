#!/usr/bin/env bash
# Compares the `grep` tool with the `rg` binary on a generated tree of
# 100,000 files (1,000 folders x 100 files, ~2 KB each), with hyperfine.
# Needs: ripgrep and hyperfine (apt-get install ripgrep hyperfine).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tree="${TREE:-/tmp/ferroclaw-grep-tree}"
files="${FILES:-100000}"
if [ ! -f "$tree/.done-$files" ]; then
  rm -rf "$tree"; mkdir -p "$tree"
  python3 - "$tree" "$files" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
random.seed(7)
words = ["alpha", "beta", "gamma", "delta", "tokio", "serde", "async", "await", "fn", "let", "match", "struct", "impl", "trait", "return", "loop"]
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    lines = []
    for j in range(40):
        line = " ".join(random.choice(words) for _ in range(8))
        if random.random() < 0.002:
            line += " needle_%d" % j
        lines.append(line)
    with open(os.path.join(d, "f%06d.rs" % i), "w") as f:
        f.write("\n".join(lines) + "\n")
PY
  touch "$tree/.done-$files"
fi
cargo build --release -q -p ferroclaw-tools --example run_tool --manifest-path "$root/Cargo.toml"
tool="${CARGO_TARGET_DIR:-$root/target}/release/examples/run_tool"
# Same search both ways: files containing the pattern, hidden files included
# (the tool searches hidden files; rg needs --hidden for that).
hyperfine --warmup 2 --runs "${RUNS:-10}" -N \
  "rg --hidden -l needle_ $tree" \
  "$tool grep '{\"pattern\": \"needle_\", \"output_mode\": \"files_with_matches\", \"head_limit\": 100000}' $tree" \
  "rg --hidden -c needle_ $tree" \
  "$tool grep '{\"pattern\": \"needle_\", \"output_mode\": \"count\", \"head_limit\": 100000}' $tree" \
  "rg --hidden -n needle_ $tree" \
  "$tool grep '{\"pattern\": \"needle_\", \"output_mode\": \"content\", \"head_limit\": 100000}' $tree"
