#!/usr/bin/env python3
"""ferroclaw benchmarks against the scripted LLM server (no network, no keys).

Measures, with a release build:
  1. `ferroclaw --version`: wall time and peak RSS (median of N runs);
  2. a one-shot answer (`-p`) against the scripted server: wall time and peak RSS;
  3. harness overhead per model turn over a 20-turn scripted session: the gap
     between the end of one model response and the arrival of the next
     request, minus nothing (the tool, a `read` of a one-line file, is
     included, so this is an upper bound);
  4. resuming a 100 MB session file: wall time and peak RSS of a one-shot
     `--resume` answer.

Usage: cargo build --release && python3 bench/bench.py [--runs N] [--profile P] [--only WHAT]
Peak RSS comes from GNU time's %M (ru_maxrss of the command itself).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.path.join(TARGET, "release", "ferroclaw")
LLM = os.path.join(TARGET, "release", "scripted-llm")


def measure(argv, env, cwd):
    """Runs argv under GNU time; returns (wall seconds, peak RSS in KiB, exit code, stdout).

    GNU time (a small C program) forks and execs the command, so ru_maxrss is
    the command's own peak, not the forking Python's.
    """
    out = tempfile.TemporaryFile()
    with tempfile.NamedTemporaryFile("r") as rep:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-o", rep.name, "-f", "%M"] + argv, env=env, cwd=cwd,
                              stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        lines = [l for l in rep.read().splitlines() if l.strip()]
    out.seek(0)
    return wall, int(lines[-1]), proc.returncode, out.read().decode()


def start_llm(script, tmp, record=None):
    path = os.path.join(tmp, "script-%d.json" % time.monotonic_ns())
    with open(path, "w") as f:
        json.dump(script, f)
    argv = [LLM, "--script", path, "--repeat"]
    if record:
        argv += ["--record", record]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on "), line
    return proc, line[len("listening on "):]


def env_for(home, url):
    return {"PATH": os.environ.get("PATH", ""), "HOME": home, "FERROCLAW_HOME": home,
            "ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": url}


def summary(label, samples):
    walls = [s[0] * 1000 for s in samples]
    rss = [s[1] / 1024 for s in samples]
    print("%-34s wall median %7.2f ms (min %.2f, max %.2f)   peak RSS median %6.1f MB (max %.1f)"
          % (label, statistics.median(walls), min(walls), max(walls), statistics.median(rss), max(rss)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--resume-mb", type=int, default=100)
    ap.add_argument("--profile", default="release", help="cargo profile whose binaries to use")
    ap.add_argument("--only", choices=["version", "oneshot", "overhead", "spawn", "resume"],
                    help="run only this measurement")
    args = ap.parse_args()
    global BIN, LLM
    BIN = os.path.join(TARGET, args.profile, "ferroclaw")
    LLM = os.path.join(TARGET, args.profile, "scripted-llm")
    want = lambda name: args.only in (None, name)
    for b in (BIN, LLM):
        if not os.path.exists(b):
            sys.exit("%s missing: run `cargo build --release` first" % b)
    tmp = tempfile.mkdtemp(prefix="ferroclaw-bench-")
    home = os.path.join(tmp, "home")
    ws = os.path.join(tmp, "ws")
    os.makedirs(home)
    os.makedirs(ws)
    try:
        # 1. --version
        samples = []
        if want("version"):
            samples = [measure([BIN, "--version"], env_for(home, "http://127.0.0.1:9"), ws) for _ in range(args.runs)]
            summary("ferroclaw --version", samples)

        if want("oneshot"):
            # 2. one-shot answer
            llm, url = start_llm([{"kind": "reply", "text": "The answer is 42."}], tmp)
            env = env_for(home, url)
            samples = []
            for _ in range(args.runs):
                s = measure([BIN, "-p", "what is the answer?", "--model", "anthropic/bench"], env, ws)
                assert s[2] == 0 and "42" in s[3], s
                samples.append(s)
            llm.kill()
            summary("one-shot answer (-p)", samples)

        if want("overhead"):
            # 3. harness overhead per turn, 20 turns
            with open(os.path.join(ws, "tiny.txt"), "w") as f:
                f.write("tiny\n")
            record = os.path.join(tmp, "record.jsonl")
            script = [{"kind": "reply", "tool_calls": [{"name": "read", "arguments": {"path": "tiny.txt"}}]}] * 19
            script.append({"kind": "reply", "text": "done"})
            gaps = []
            for _ in range(5):
                if os.path.exists(record):
                    os.remove(record)
                llm, url = start_llm(script, tmp, record)
                s = measure([BIN, "-p", "go", "--model", "anthropic/bench", "--max-turns", "30"], env_for(home, url), ws)
                time.sleep(0.2)
                llm.kill()
                llm.wait()
                assert s[2] == 0, s
                reqs = [json.loads(l) for l in open(record)]
                reqs.sort(key=lambda r: r["received_at"])
                assert len(reqs) == 20, len(reqs)
                for prev, nxt in zip(reqs, reqs[1:]):
                    gaps.append((nxt["received_at"] - prev["finished_at"]) / 1000.0)
            print("harness overhead per turn (20-turn session, incl. a tiny read): median %.3f ms, p90 %.3f ms, max %.3f ms (n=%d)"
                  % (statistics.median(gaps), sorted(gaps)[int(len(gaps) * 0.9)], max(gaps), len(gaps)))

        if want("spawn"):
            # 5. sub-agent spawn overhead: a request whose one tool call is a
            # sub-agent (that answers at once) against one whose call is a tiny read.
            read_script = [{"kind": "reply", "tool_calls": [{"name": "read", "arguments": {"path": "tiny.txt"}}]},
                           {"kind": "reply", "text": "done"}]
            task_script = [{"kind": "reply", "tool_calls": [{"name": "task", "arguments": {
                               "description": "d", "prompt": "say hi", "agent_type": "explore"}}]},
                           {"kind": "reply", "text": "hi"}, {"kind": "reply", "text": "done"}]
            for label, script in (("request with a read call", read_script), ("request with a sub-agent", task_script)):
                samples = []
                for _ in range(args.runs):
                    llm, url = start_llm(script, tmp)
                    s = measure([BIN, "-p", "go", "--model", "anthropic/bench"], env_for(home, url), ws)
                    llm.kill()
                    llm.wait()
                    assert s[2] == 0, s
                    samples.append(s)
                summary(label, samples)

        if want("resume"):
            # 4. resume a large session
            sessions = os.path.join(home, "sessions", "bench")
            os.makedirs(sessions, exist_ok=True)
            sid = "20260101-000000-beef"
            path = os.path.join(sessions, sid + ".jsonl")
            target = args.resume_mb * 1024 * 1024
            with open(path, "w") as f:
                f.write(json.dumps({"type": "meta", "id": sid, "cwd": ws, "model": "anthropic/bench",
                                    "created": "2026-01-01T00:00:00Z", "version": 1}) + "\n")
                filler = "lorem ipsum dolor sit amet " * 40
                i = 0
                while f.tell() < target:
                    f.write(json.dumps({"type": "message", "ts": i, "message": {"role": "user", "content": [{"type": "text", "text": "question %d" % i}]}}) + "\n")
                    f.write(json.dumps({"type": "message", "ts": i, "message": {"role": "assistant", "content": [{"type": "text", "text": filler}]}}) + "\n")
                    i += 1
            size_mb = os.path.getsize(path) / 1e6
            llm, url = start_llm([{"kind": "reply", "text": "resumed fine"}], tmp)
            samples = []
            for _ in range(max(3, args.runs // 3)):
                shutil.copy(path, path + ".orig") if not os.path.exists(path + ".orig") else None
                s = measure([BIN, "-p", "continue", "--resume", sid, "--model", "anthropic/bench"], env_for(home, url), ws)
                assert s[2] == 0 and "resumed fine" in s[3], s
                shutil.copy(path + ".orig", path)
                samples.append(s)
            llm.kill()
            summary("resume %.0f MB session + answer" % size_mb, samples)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
