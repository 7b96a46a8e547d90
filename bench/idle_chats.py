#!/usr/bin/env python3
"""Open files and memory of a files-mode `ferroclaw gateway` holding CHATS
idle chats (default 10,000), under the default `ulimit -n` of 1,024.

Each chat (an OpenAI-API user) sends one message, PARALLEL (default 50) at
a time, and gets its answer from the scripted model; the chats then sit
idle, each with its agent in memory (`session_idle_minutes` is 30). Prints,
every STEP chats and at the end: chats answered, lost (no 200), the
gateway's open file descriptors (`ls /proc/PID/fd | wc -l`) and RSS. The
gateway runs with its soft `RLIMIT_NOFILE` set to 1,024, so a gateway whose
open files grow with its chats fails (EMFILE) before the end.

Usage: cargo build [--release] -p ferroclaw-cli -p ferroclaw-testkit
       python3 bench/idle_chats.py [--profile debug|release] [--chats 10000] [--step 1000]
Numbers: bench/README.md.
"""

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gateway import TARGET, start_llm  # noqa: E402
from gateway_load import Gateway, run_users  # noqa: E402

NOFILE = 1024


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="release", help="cargo profile whose binaries to use")
    ap.add_argument("--chats", type=int, default=10000)
    ap.add_argument("--step", type=int, default=1000)
    ap.add_argument("--parallel", type=int, default=50)
    args = ap.parse_args()
    binary = os.path.join(TARGET, args.profile, "ferroclaw")
    llm_binary = os.path.join(TARGET, args.profile, "scripted-llm")
    for b in (binary, llm_binary):
        if not os.path.exists(b):
            sys.exit("%s missing: build it first (see the usage at the top)" % b)
    # The gateway inherits the soft limit: the default of most systems.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(NOFILE, hard), hard))
    tmp = tempfile.mkdtemp(prefix="ferroclaw-idle-")
    llm, url = start_llm(llm_binary, tmp)
    print("binary %s; ulimit -n %d; load before: %s"
          % (binary, resource.getrlimit(resource.RLIMIT_NOFILE)[0], open("/proc/loadavg").read().strip()))
    gw = None
    try:
        gw = Gateway(binary, url, 16, tmp)
        time.sleep(1)
        pid = gw.proc.pid
        print("%6d chats: %5d fds, RSS %7.1f MiB" % (0, open_fds(pid), gw.rss()))
        done, lost, started = 0, 0, time.perf_counter()
        while done < args.chats:
            n = min(args.step, args.chats - done)
            names = ["c%d" % i for i in range(done, done + n)]
            results, _, _ = asyncio.run(run_users(gw.port, names, 1, args.parallel))
            lost += results.lost
            for e in results.errors[:3]:
                print("  !", e)
            done += n
            if gw.proc.poll() is not None:
                sys.exit("the gateway exited (code %s) after %d chats" % (gw.proc.returncode, done))
            print("%6d chats: %5d fds, RSS %7.1f MiB, lost %d (%.0f s)"
                  % (done, open_fds(pid), gw.rss(), lost, time.perf_counter() - started))
        time.sleep(2)
        print("idle: %d chats, %d lost, %d fds, RSS %.1f MiB"
              % (done, lost, open_fds(pid), gw.rss()))
    finally:
        if gw is not None:
            gw.stop()
        llm.kill()
        llm.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
