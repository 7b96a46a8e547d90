#!/usr/bin/env python3
"""The bounds of issue 30, measured on a build: what a provider stream
without end, `edit` on a 1 GB sparse file and a full disk under the session
files cost a `ferroclaw -p` run (peak RSS from the kernel, `wait4`'s
ru_maxrss; bytes stored; exit code and what the run said).

    cargo build --release -p ferroclaw-cli -p ferroclaw-testkit
    python3 bench/fault_bounds.py                 # BIN_DIR=target/release
    python3 bench/fault_bounds.py --bin-dir DIR   # another build

The endless stream runs for at most --stream-secs (20) before the script
gives up on it; ferroclaw should cut it well before. The full-disk case
mounts a 1 MB tmpfs and needs root (skipped, saying so, without).
Everything runs against the scripted LLM server: no key, no network.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_server(bin_dir, work, steps):
    script = os.path.join(work, "script.json")
    with open(script, "w") as f:
        json.dump(steps, f)
    server = subprocess.Popen([os.path.join(bin_dir, "scripted-llm"), "--script", script],
                              stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    return server, line.strip().removeprefix("listening on ")


def run(bin_dir, url, wire, home, ws, args, limit):
    """Runs ferroclaw to its end (killed after `limit` s); returns
    (exit code, seconds, peak RSS MiB, stdout)."""
    env = {"PATH": os.environ["PATH"], "HOME": home, "FERROCLAW_HOME": home}
    if wire == "anthropic":
        env.update(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=url, FERROCLAW_MODEL="anthropic/claude-test")
    else:
        env.update(OPENAI_API_KEY="k", OPENAI_BASE_URL=url + "/v1", FERROCLAW_MODEL="openai/gpt-test")
    out = tempfile.TemporaryFile()
    start = time.monotonic()
    child = subprocess.Popen([os.path.join(bin_dir, "ferroclaw")] + args, cwd=ws, env=env,
                             stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.DEVNULL)
    timer = None
    try:
        timer = threading.Timer(limit, lambda: child.send_signal(signal.SIGKILL))
        timer.start()
        _, status, usage = os.wait4(child.pid, 0)
    finally:
        if timer:
            timer.cancel()
    child.returncode = os.waitstatus_to_exitcode(status)
    secs = time.monotonic() - start
    out.seek(0)
    return child.returncode, secs, usage.ru_maxrss / 1024, out.read().decode(errors="replace")


def session_bytes(home):
    total = 0
    for dirpath, _, files in os.walk(os.path.join(home, "sessions")):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    return total


def layout(work):
    home, ws = os.path.join(work, "home"), os.path.join(work, "ws")
    os.makedirs(home, exist_ok=True)
    os.makedirs(ws, exist_ok=True)
    return home, ws


def endless(bin_dir, wire, max_tokens, secs):
    with tempfile.TemporaryDirectory() as work:
        server, url = start_server(bin_dir, work, [{"kind": "fault", "fault": "endless", "text": "and on "}])
        home, ws = layout(work)
        if max_tokens:
            with open(os.path.join(home, "config.toml"), "w") as f:
                f.write(f"max_tokens = {max_tokens}\n")
        try:
            code, took, peak, out = run(bin_dir, url, wire, home, ws,
                                        ["-p", "talk", "--output-format", "json"], secs)
        finally:
            server.kill()
        result = json.loads(out)["result"] if out.strip() else ""
        cut = "max_tokens" in result
        print(f"endless stream, {wire:9}, max_tokens {max_tokens or 'default (8192)':>14}: exit {code}, "
              f"cut {'yes' if cut else 'NO'}, {took:5.2f} s, peak {peak:6.1f} MiB, "
              f"stored {session_bytes(home) / 1024:7.1f} KiB")


def sparse_edit(bin_dir):
    with tempfile.TemporaryDirectory() as work:
        edit = {"name": "edit", "arguments": {"path": "huge.log", "old_string": "x", "new_string": "y"}}
        steps = [{"kind": "reply", "tool_calls": [edit]}, {"kind": "reply", "text": "ok"}]
        server, url = start_server(bin_dir, work, steps)
        home, ws = layout(work)
        with open(os.path.join(ws, "huge.log"), "wb") as f:
            f.truncate(1 << 30)
        try:
            code, took, peak, _ = run(bin_dir, url, "anthropic", home, ws, ["-p", "fix it", "--yes"], 60)
        finally:
            server.kill()
        with open(next(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(home, "sessions")) for f in fs)) as f:
            refused = "over the 64 MB limit" in f.read()
        print(f"edit on a 1 GB sparse file: exit {code}, refused {'yes' if refused else 'NO'}, "
              f"{took:5.2f} s, peak {peak:6.1f} MiB")


def full_disk(bin_dir):
    with tempfile.TemporaryDirectory() as work:
        home, ws = layout(work)
        sessions = os.path.join(home, "sessions")
        os.makedirs(sessions)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", sessions],
                          stderr=subprocess.DEVNULL).returncode != 0:
            print("full disk: SKIPPED (cannot mount a tmpfs: needs root)")
            return
        try:
            steps = [{"kind": "reply", "text": "first"},
                     {"kind": "reply", "tool_calls": [{"name": "bash", "arguments": {"command": "seq 1 3000"}}]},
                     {"kind": "reply", "text": "done"}]
            server, url = start_server(bin_dir, work, steps)
            try:
                first = run(bin_dir, url, "anthropic", home, ws, ["-p", "hi"], 60)[0]
                try:
                    with open(os.path.join(sessions, "filler"), "wb") as f:
                        while True:
                            f.write(b"f" * 4096)
                            f.flush()
                except OSError:
                    pass
                code, took, peak, out = run(bin_dir, url, "anthropic", home, ws,
                                            ["-p", "more", "--continue", "--yes", "--output-format", "json"], 60)
            finally:
                server.kill()
            v = json.loads(out) if out.strip() else {}
            print(f"full disk under the session files: first run exit {first}; full: exit {code}, "
                  f"is_error {v.get('is_error')}, {took:5.2f} s, peak {peak:6.1f} MiB, "
                  f"said: {str(v.get('result', ''))[:100]!r}")
        finally:
            subprocess.run(["umount", "-l", sessions])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    parser.add_argument("--bin-dir", default=os.environ.get("BIN_DIR", os.path.join(target, "release")))
    parser.add_argument("--stream-secs", type=float, default=20)
    parser.add_argument("--only", choices=["stream", "edit", "disk"])
    args = parser.parse_args()
    for name in ("ferroclaw", "scripted-llm"):
        if not os.access(os.path.join(args.bin_dir, name), os.X_OK):
            sys.exit(f"{args.bin_dir}/{name} not found: cargo build --release -p ferroclaw-cli -p ferroclaw-testkit")
    if args.only in (None, "stream"):
        for wire in ("anthropic", "openai"):
            for max_tokens in (None, 128000):
                endless(args.bin_dir, wire, max_tokens, args.stream_secs)
    if args.only in (None, "edit"):
        sparse_edit(args.bin_dir)
    if args.only in (None, "disk"):
        full_disk(args.bin_dir)


if __name__ == "__main__":
    main()
