#!/usr/bin/env python3
"""Bytes ferroclaw sends to the model over a 10-turn task (issue 14's "lean
requests" measurement).

The scripted model reads the same 2.4 KB file on every turn, then answers.
The first request is the fixed part (system prompt, every default tool's
description and schema, the user's line); the session total adds the history
each request repeats. A re-read of an unchanged file is answered with a short
note, so the file's content is sent once, not once per turn.

Usage: cargo build && python3 bench/lean_requests.py [--turns 10] [--bin PATH] [--tools]
  --bin PATH  measure another ferroclaw binary (e.g. main's), with this tree's scripted-llm
  --tools     also list each tool's share of the first request
Sizes are the request bodies' JSON length in bytes, as the Anthropic endpoint receives them.
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

# 2.4 KB of source-like text: 60 lines of 40 bytes.
FILE_TEXT = "".join("line %02d: the quick brown fox jumps ov\n" % i for i in range(60))


def session(binary, turns, tmp):
    home, ws = os.path.join(tmp, "home"), os.path.join(tmp, "ws")
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(ws, ignore_errors=True)
    os.makedirs(home)
    os.makedirs(ws)
    with open(os.path.join(ws, "notes.txt"), "w") as f:
        f.write(FILE_TEXT)
    steps = [{"kind": "reply", "text": "Checking the notes again.",
              "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]}
             for _ in range(turns - 1)]
    steps.append({"kind": "reply", "text": "The notes count 60 lines."})
    script = os.path.join(tmp, "script.json")
    with open(script, "w") as f:
        json.dump(steps, f)
    record = os.path.join(tmp, "record.jsonl")
    if os.path.exists(record):
        os.remove(record)
    llm = subprocess.Popen([LLM, "--script", script, "--record", record], stdout=subprocess.PIPE, text=True)
    url = llm.stdout.readline().strip().split("listening on ")[1]
    env = {"PATH": os.environ["PATH"], "HOME": home, "FERROCLAW_HOME": home,
           "ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": url}
    subprocess.run([binary, "-p", "How many lines do the notes have? Check notes.txt each turn.", "--yes",
                    "--model", "anthropic/claude-bench", "--max-turns", str(turns)],
                   env=env, cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    llm.terminate()
    llm.wait()
    return [json.loads(line)["body"] for line in open(record)]


def size(value):
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--bin", default=BIN)
    ap.add_argument("--tools", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ferroclaw-lean-")
    try:
        bodies = session(args.bin, args.turns, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sizes = [size(b) for b in bodies]
    first = bodies[0]
    system = first.get("system", "")
    tools = first.get("tools", [])
    print("binary: %s" % args.bin)
    print("requests %d; first request %d bytes (system %d, %d tools %d); session total %d bytes"
          % (len(sizes), sizes[0], size(system), len(tools), size(tools), sum(sizes)))
    print("per request: %s" % " ".join("%.1fk" % (s / 1000) for s in sizes))
    if args.tools:
        for tool in sorted(tools, key=size, reverse=True):
            print("  %-18s %5d bytes (description %d, schema %d)" % (
                tool["name"], size(tool), len(tool.get("description", "").encode()),
                size(tool.get("input_schema", {}))))


if __name__ == "__main__":
    main()
