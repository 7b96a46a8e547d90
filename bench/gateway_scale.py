#!/usr/bin/env python3
"""Two `ferroclaw gateway` processes on one PostgreSQL database against one
(issue 20's target): USERS concurrent users (default 200) x MESSAGES messages
(default 20) through the OpenAI-compatible API, each user alternating between
the processes, the scripted model answering every request at once with its
own words (`echo: {{last_user}}`).

Reports, for one process and for two: answered messages per second, p50/p99
latency, and the exactly-once check: lost (no 200), mismatched (an answer that
is not its request's), duplicated answers, and model requests per message
(from the scripted model's record: must be exactly 1 for every message).

A throw-away PostgreSQL cluster is started with initdb/pg_ctl (on PATH, or
Debian's /usr/lib/postgresql/<version>/bin); as root it runs as `postgres`.
The processes share one FERROCLAW_HOME, as this increment requires.

Usage: cargo build --release -p ferroclaw-cli -p ferroclaw-testkit
       python3 bench/gateway_scale.py [--profile release] [--users 200] [--messages 20] [--turns 8]
Report the machine's load (`cat /proc/loadavg`) and core count with the
numbers: the clients, both gateways, PostgreSQL and the scripted model share
the machine's cores, so "two processes" only scales where there are cores to spare.
"""

import argparse
import asyncio
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_load import free_port, percentile, run_users, start_llm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
TOKEN = "bench-token"


def pg_bin():
    for d in [os.environ.get("FERROCLAW_PG_BIN", "")] + os.environ.get("PATH", "").split(":") + \
            sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if d and os.path.exists(os.path.join(d, "initdb")):
            return os.path.dirname(os.path.realpath(os.path.join(d, "initdb")))
    sys.exit("no PostgreSQL binaries (initdb, pg_ctl) found")


class Postgres:
    def __init__(self, tmp):
        self.bin = pg_bin()
        self.dir = tempfile.mkdtemp(prefix="pg-", dir=tmp)
        self.port = free_port()
        self.prefix = []
        if os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam("postgres") if "postgres" in [p.pw_name for p in pwd.getpwall()] else pwd.getpwnam("nobody")
            subprocess.run(["chown", "-R", "%d:%d" % (pw.pw_uid, pw.pw_gid), tmp], check=True)
            os.chmod(tmp, 0o755)
            self.prefix = ["setpriv", "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid, "--clear-groups"]
        data = os.path.join(self.dir, "data")
        self.data = data
        subprocess.run(self.prefix + [os.path.join(self.bin, "initdb"), "-A", "trust", "-U", "postgres",
                                      "-E", "UTF8", "--no-sync", "-D", data], check=True, stdout=subprocess.DEVNULL)
        opts = "-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -F -c max_connections=300" % self.port
        subprocess.run(self.prefix + [os.path.join(self.bin, "pg_ctl"), "-w", "-D", data, "-l",
                                      os.path.join(data, "log"), "-o", opts, "start"], check=True, stdout=subprocess.DEVNULL)

    def database(self, name):
        subprocess.run(self.prefix + [os.path.join(self.bin, "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                                      "-U", "postgres", name], check=True)
        return "postgres://postgres@127.0.0.1:%d/%s" % (self.port, name)

    def stop(self):
        subprocess.run(self.prefix + [os.path.join(self.bin, "pg_ctl"), "-m", "immediate", "-D", self.data, "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_gateway(binary, home, port, llm_url, db_url):
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "FERROCLAW_HOME": home,
           "ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": llm_url,
           "FERROCLAW_MODEL": "anthropic/bench", "FERROCLAW_DATABASE_URL": db_url}
    err = open(os.path.join(home, "gateway-%d.stderr" % port), "w")
    proc = subprocess.Popen([binary, "gateway", "--port", str(port)], env=env, cwd=home,
                            stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
    deadline = time.time() + 60
    while True:
        if proc.poll() is not None:
            sys.exit("gateway exited: " + open(err.name).read())
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                if b" 200 " in s.recv(100):
                    return proc
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit("gateway did not come up")
        time.sleep(0.05)


async def spread_users(ports, names, messages, parallel):
    """Each user on its own gateway (by index), so both processes take requests."""
    groups = [[n for i, n in enumerate(names) if i % len(ports) == k] for k in range(len(ports))]
    runs = await asyncio.gather(*(run_users(p, g, messages, max(1, parallel // len(ports)))
                                  for p, g in zip(ports, groups) if g))
    return runs


def phase(label, args, binary, llm_bin, tmp, pg, processes):
    record = os.path.join(tmp, "%s.jsonl" % label)
    llm, llm_url = start_llm_recording(llm_bin, tmp, record)
    home = tempfile.mkdtemp(prefix="home-", dir=tmp)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[gateway]\ntoken = \"%s\"\nmax_concurrent_turns = %d\nrequests_per_minute = 0\n"
                "messages_per_minute = 0\nheartbeat_minutes = 0\nmax_connections = 1024\nchat_queue = 64\n"
                % (TOKEN, args.turns))
    db = pg.database(label)
    ports = [free_port() for _ in range(processes)]
    procs = [start_gateway(binary, home, p, llm_url, db) for p in ports]
    names = ["u%d" % i for i in range(args.users)]
    started = time.perf_counter()
    runs = asyncio.run(spread_users(ports, names, args.messages, args.users))
    elapsed = time.perf_counter() - started
    for p in procs:
        p.kill()
        p.wait()
    llm.kill()
    llm.wait()
    latencies = [l for r, _, _ in runs for l in r.latencies]
    lost = sum(r.lost for r, _, _ in runs)
    mismatched = sum(r.mismatched for r, _, _ in runs)
    duplicated = sum(d for _, _, d in runs)
    asked = {}
    with open(record) as f:
        for line in f:
            body = json.loads(line).get("body", {})
            text = json.dumps(body.get("messages", [])[-1:])
            asked[text] = asked.get(text, 0) + 1
    total = args.users * args.messages
    answered = len(latencies) - lost
    print("%s: %d processes, %d users x %d messages: %.0f msg/s (%.1f s), p50 %.0f ms, p99 %.0f ms"
          % (label, processes, args.users, args.messages, answered / elapsed, elapsed,
             percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000))
    print("   lost %d, mismatched %d, duplicated %d; model requests %d for %d messages, max per message %d"
          % (lost, mismatched, duplicated, sum(asked.values()), total, max(asked.values() or [0])))
    return answered / elapsed


def start_llm_recording(binary, tmp, record):
    script = os.path.join(tmp, "echo.json")
    with open(script, "w") as f:
        json.dump([{"kind": "reply", "text": "echo: {{last_user}}"}], f)
    proc = subprocess.Popen([binary, "--script", script, "--repeat", "--record", record],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on "), line
    return proc, line[len("listening on "):]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="release")
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--turns", type=int, default=8)
    args = ap.parse_args()
    binary = os.path.join(TARGET, args.profile, "ferroclaw")
    llm_bin = os.path.join(TARGET, args.profile, "scripted-llm")
    tmp = tempfile.mkdtemp(prefix="ferroclaw-scale-")
    pg = Postgres(tmp)
    try:
        one = phase("one", args, binary, llm_bin, tmp, pg, 1)
        two = phase("two", args, binary, llm_bin, tmp, pg, 2)
        print("two processes / one: %.2fx (load %s, %d cores)"
              % (two / one, open("/proc/loadavg").read().split()[0], os.cpu_count()))
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
