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
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gateway import (  # noqa: E402
    OpenAIModel, binaries, free_port, last_user_text, machine_load, new_home, scratch_with_postgres,
    start_gateway, start_llm,
)
from gateway_load import percentile, run_users  # noqa: E402


async def spread_users(ports, names, messages, parallel):
    """Each user on its own gateway (by index), so both processes take requests."""
    groups = [[n for i, n in enumerate(names) if i % len(ports) == k] for k in range(len(ports))]
    runs = await asyncio.gather(*(run_users(p, g, messages, max(1, parallel // len(ports)))
                                  for p, g in zip(ports, groups) if g))
    return runs


def phase(label, args, binary, llm_bin, tmp, pg, processes):
    record = os.path.join(tmp, "%s.jsonl" % label)
    llm, llm_url = start_llm(llm_bin, tmp, record)
    home = new_home(tmp, max_concurrent_turns=args.turns, requests_per_minute=0, messages_per_minute=0,
                    heartbeat_minutes=0, max_connections=1024, chat_queue=64)
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


class HoldingModel(OpenAIModel):
    """An OpenAI-wire model in this process: a request without a tool result
    answers with a `bash` tool call at once; one with a tool result (the
    turn's second step) is held until `release`, then answered with the
    user's words. Counts requests by (user text, tool results)."""

    def __init__(self):
        self.asked = {}
        self.second = set()
        self.released = asyncio.Event()

    async def answer(self, body, writer):
        messages = body.get("messages", [])
        user = last_user_text(messages)
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
        await self.reply(body, writer, message, finish)


async def kill_phase_async(args, binary, tmp, pg):
    model = HoldingModel()
    url = await model.start()
    home = new_home(tmp, max_concurrent_turns=args.kill_turns, requests_per_minute=0, messages_per_minute=0,
                    heartbeat_minutes=0, max_connections=1024, permission_mode="bypass")
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
    binary, llm_bin = binaries(args, "fast")
    with scratch_with_postgres("ferroclaw-scale-") as (tmp, pg):
        if not args.skip_throughput:
            load = machine_load()
            one = phase("one", args, binary, llm_bin, tmp, pg, 1)
            two = phase("two", args, binary, llm_bin, tmp, pg, 2)
            print("two processes / one: %.2fx (load %s before, %s after; %d cores)"
                  % (two / one, load, machine_load(), os.cpu_count()))
        if args.kill:
            asyncio.run(kill_phase_async(args, binary, tmp, pg))

if __name__ == "__main__":
    main()
