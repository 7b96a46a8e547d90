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

Then (`--kill`, the issue's second target) kill -9 of one of two gateways
while KILL_TURNS turns (default 100) are in flight: each turn is a tool call
(`bash echo`) and an answer; a model served here holds every second call
(the one after the tool) until all the turns are in flight, then one gateway
is killed. The survivor takes the dead one's chats over when their leases
run out (30 s) and finishes their turns from the journal. Reported: answered
exactly once (of KILL_TURNS, every request sent to the survivor), and
re-called model steps: first calls asked again for a turn whose first step
had finished (target zero; the held second calls of the killed process were
never answered, so asking them again is not a re-call).

Usage: cargo build --profile fast -p ferroclaw-cli -p ferroclaw-testkit
       python3 bench/gateway_scale.py [--profile fast] [--users 200] [--messages 20] [--turns 8]
                                      [--kill] [--kill-turns 100] [--skip-throughput]
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
    def __init__(self, tmp, preload=None):
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
        if preload:
            opts += " -c shared_preload_libraries=%s" % preload
        subprocess.run(self.prefix + [os.path.join(self.bin, "pg_ctl"), "-w", "-D", data, "-l",
                                      os.path.join(data, "log"), "-o", opts, "start"], check=True, stdout=subprocess.DEVNULL)

    def database(self, name):
        subprocess.run(self.prefix + [os.path.join(self.bin, "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                                      "-U", "postgres", name], check=True)
        return "postgres://postgres@127.0.0.1:%d/%s" % (self.port, name)

    def query(self, name, sql):
        out = subprocess.run(self.prefix + [os.path.join(self.bin, "psql"), "-h", "127.0.0.1", "-p", str(self.port),
                                            "-U", "postgres", "-d", name, "-Atc", sql],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        return [line.split("|") for line in out.splitlines() if line]

    def stop(self):
        subprocess.run(self.prefix + [os.path.join(self.bin, "pg_ctl"), "-m", "immediate", "-D", self.data, "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_gateway(binary, home, port, llm_url, db_url, openai=False):
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "FERROCLAW_HOME": home,
           "ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": llm_url,
           "FERROCLAW_MODEL": "anthropic/bench", "FERROCLAW_DATABASE_URL": db_url}
    if openai:
        env.update({"OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": llm_url + "/v1",
                    "FERROCLAW_MODEL": "openai/bench", "FERROCLAW_LOG": "info"})
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
    # CPU the gateways spent (user + system), before they go.
    tick = os.sysconf("SC_CLK_TCK")
    cpu = 0.0
    for p in procs:
        fields = open("/proc/%d/stat" % p.pid).read().rsplit(")", 1)[1].split()
        cpu += (int(fields[11]) + int(fields[12])) / tick
    for p in procs:
        p.kill()
        p.wait()
    llm.kill()
    llm.wait()
    time.sleep(1.5)  # the database's statistics are flushed as its backends end
    xacts = int(pg.query(label, "SELECT xact_commit FROM pg_stat_database WHERE datname = '%s'" % label)[0][0])
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
    print("   gateway CPU %.1f ms per message; database transactions %.1f per message"
          % (cpu * 1000 / max(answered, 1), xacts / max(answered, 1)))
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


class HoldingModel:
    """An OpenAI-wire model in this process: a request without a tool result
    answers with a `bash` tool call at once; one with a tool result (the
    turn's second step) is held until `release`, then answered with the
    user's words. Counts requests by (user text, tool results)."""

    def __init__(self):
        self.asked = {}
        self.second = set()
        self.released = asyncio.Event()

    async def start(self):
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return "http://127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]

    async def serve(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = json.loads(await reader.readexactly(length)) if length else {}
                await self.answer(body, writer)
        except (asyncio.IncompleteReadError, asyncio.CancelledError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def answer(self, body, writer):
        messages = body.get("messages", [])
        user = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
        if isinstance(user, list):
            user = " ".join(p.get("text", "") for p in user if isinstance(p, dict))
        results = sum(1 for m in messages if m.get("role") == "tool")
        key = (user, results)
        self.asked[key] = self.asked.get(key, 0) + 1
        if results:
            self.second.add(user)
            await self.released.wait()
            message = {"role": "assistant", "content": "done: " + user}
            finish = "stop"
        else:
            call = {"id": "call_%d" % len(self.asked), "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": "echo step"})}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if body.get("stream"):
            delta = dict(message)
            if "tool_calls" in delta:
                delta["tool_calls"] = [dict(delta["tool_calls"][0], index=0)]
            chunks = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                      {"choices": [], "usage": usage}]
            payload = "".join("data: %s\n\n" % json.dumps(dict(c, id="x", object="chat.completion.chunk",
                                                                 model="bench")) for c in chunks)
            payload = (payload + "data: [DONE]\n\n").encode()
            ctype = b"text/event-stream"
        else:
            payload = json.dumps({"id": "x", "object": "chat.completion", "model": "bench",
                                  "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                  "usage": usage}).encode()
            ctype = b"application/json"
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + ctype + b"\r\ncontent-length: "
                     + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        await writer.drain()


async def kill_phase_async(args, binary, tmp, pg):
    model = HoldingModel()
    url = await model.start()
    home = tempfile.mkdtemp(prefix="home-", dir=tmp)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[gateway]\ntoken = \"%s\"\nmax_concurrent_turns = %d\nrequests_per_minute = 0\n"
                "messages_per_minute = 0\nheartbeat_minutes = 0\nmax_connections = 1024\n"
                "permission_mode = \"bypass\"\n" % (TOKEN, args.kill_turns))
    db = pg.database("kill")
    ports = [free_port(), free_port()]
    procs = await asyncio.to_thread(
        lambda: [start_gateway(binary, home, p, url, db, openai=True) for p in ports])
    survivor, victim = (ports[0], procs[0]), procs[1]
    names = ["k%d" % i for i in range(args.kill_turns)]
    # Every request to the survivor: the API answers through the process
    # that holds the request, and the victim's requests die with it.
    users = asyncio.ensure_future(run_users(survivor[0], names, 1, len(names)))
    started = time.perf_counter()
    while len(model.second) < args.kill_turns:
        if time.perf_counter() - started > 120:
            sys.exit("only %d turns in flight after 120 s" % len(model.second))
        await asyncio.sleep(0.05)
    in_flight = len(model.second)
    held = {h: int(n) for h, n in pg.query("kill", "SELECT holder, count(*) FROM chat_leases GROUP BY holder")}
    victims = sum(n for h, n in held.items() if h.rsplit("-", 2)[1] == str(victim.pid))
    victim.kill()
    victim.wait()
    killed = time.perf_counter()
    model.released.set()
    results, _, duplicated = await users
    elapsed = time.perf_counter() - killed
    survivor[1].kill()
    survivor[1].wait()
    model.server.close()
    answered = len(results.latencies) - results.lost - results.mismatched
    recalled = sum(n - 1 for (user, tools), n in model.asked.items() if tools == 0 and n > 1)
    resumed = open(os.path.join(home, "gateway-%d.stderr" % ports[0])).read().count(
        "resuming an interrupted turn")
    print("killed gateway ran %d of the turns, the survivor %d" % (victims, in_flight - victims))
    print("kill -9 of one of two gateways with %d turns in flight: answered exactly once %d/%d "
          "(lost %d, mismatched %d, duplicated %d) in %.1f s after the kill; turns resumed from the "
          "journal by the survivor %d; re-called model steps %d (target 0)"
          % (in_flight, answered, args.kill_turns, results.lost, results.mismatched, duplicated,
             elapsed, resumed, recalled))
    for e in results.errors[:5]:
        print("   ", e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--kill", action="store_true", help="also run the kill -9 phase")
    ap.add_argument("--kill-turns", type=int, default=100)
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args()
    binary = os.path.join(TARGET, args.profile, "ferroclaw")
    llm_bin = os.path.join(TARGET, args.profile, "scripted-llm")
    tmp = tempfile.mkdtemp(prefix="ferroclaw-scale-")
    pg = Postgres(tmp)
    try:
        if not args.skip_throughput:
            load = open("/proc/loadavg").read().split()[0]
            one = phase("one", args, binary, llm_bin, tmp, pg, 1)
            two = phase("two", args, binary, llm_bin, tmp, pg, 2)
            print("two processes / one: %.2fx (load %s before, %s after; %d cores)"
                  % (two / one, load, open("/proc/loadavg").read().split()[0], os.cpu_count()))
        if args.kill:
            asyncio.run(kill_phase_async(args, binary, tmp, pg))
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
