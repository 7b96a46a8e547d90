#!/usr/bin/env python3
"""Per-turn prompt size over a 50-turn scripted session, with and without
compaction (issue 4's measurement).

Every scripted answer carries some text and a `bash` call printing ~2.3 KB, so
the history grows each turn. The same text doubles as the summary when
ferroclaw asks for one. "Without compaction" uses a context window too large
to trigger it; "with" uses a 32k-token window (threshold 0.8).

Usage: cargo build && python3 bench/compaction.py [--turns 50]
Sizes are the request bodies' JSON length in bytes and ~tokens (bytes / 4).
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
PROFILE = os.environ.get("PROFILE", "debug")
BIN = os.path.join(TARGET, PROFILE, "ferroclaw")
LLM = os.path.join(TARGET, PROFILE, "scripted-llm")


def session(turns, window, tmp):
    home, ws = os.path.join(tmp, "home-%d" % window), os.path.join(tmp, "ws")
    os.makedirs(home, exist_ok=True)
    os.makedirs(ws, exist_ok=True)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("context_window = %d\ncompaction_threshold = 0.8\n" % window)
    script = os.path.join(tmp, "script.json")
    with open(script, "w") as f:
        json.dump([{"kind": "reply", "text": "SUMMARY: counting numbers; keep going.",
                    "tool_calls": [{"name": "bash", "arguments": {"command": "seq 100000 100600"}}],
                    "input_tokens": 0}], f)
    record = os.path.join(tmp, "record-%d.jsonl" % window)
    llm = subprocess.Popen([LLM, "--script", script, "--repeat", "--record", record], stdout=subprocess.PIPE, text=True)
    url = llm.stdout.readline().strip().split("listening on ")[1]
    env = {"PATH": os.environ["PATH"], "HOME": home, "FERROCLAW_HOME": home,
           "ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": url}
    subprocess.run([BIN, "-p", "count", "--yes", "--model", "anthropic/claude-bench", "--max-turns", str(turns)],
                   env=env, cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    llm.terminate()
    llm.wait()
    sizes, summaries = [], 0
    for line in open(record):
        r = json.loads(line)
        body = json.dumps(r["body"])
        if "<transcript>" in body:
            summaries += 1
        else:
            sizes.append(len(body))
    return sizes, summaries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=50)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ferroclaw-compaction-")
    try:
        for label, window in (("without compaction", 10_000_000), ("with compaction (32k window)", 32_000),
                              ("with compaction (16k window)", 16_000), ("with compaction (10k window)", 10_000)):
            sizes, summaries = session(args.turns, window, tmp)
            tok = [s // 4 for s in sizes]
            print("%-30s turns %d, summaries %d; prompt ~tokens: turn 1 %d, turn 10 %d, turn 25 %d, last %d, max %d"
                  % (label, len(sizes), summaries, tok[0], tok[min(9, len(tok) - 1)], tok[min(24, len(tok) - 1)],
                     tok[-1], max(tok)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
