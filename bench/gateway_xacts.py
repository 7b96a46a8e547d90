#!/usr/bin/env python3
"""PostgreSQL mode against files mode on the same machine (issue 31: "~12
transactions per message; 177-298 msg/s against 418-462 in files mode"; the
target is <= 4 transactions per message and PostgreSQL within 25% of files).

One `ferroclaw gateway` process, USERS concurrent users (default 50) x
MESSAGES messages (default 20) through the OpenAI-compatible API, the
scripted model answering every request at once with `echo: <message>`:

  files:    the gateway on its own files (no database);
  postgres: the same gateway on a throw-away PostgreSQL (one process, so the
            numbers compare the store, not the sharing).

Reported for each: answered messages per second, p50/p99 latency, lost /
mismatched / duplicated answers; for PostgreSQL also the database's
committed transactions per answered message (`pg_stat_database.xact_commit`
of the gateway's database after the run, its statistics flushed by ending
the gateway; start-up's few transactions included).

Usage: cargo build -p ferroclaw-cli -p ferroclaw-testkit   (or --profile fast/release)
       python3 bench/gateway_xacts.py [--profile debug] [--binary PATH] [--users 50] [--messages 20]
           [--turns 16] [--rounds 1]
Report the machine's load with the numbers: the clients, the gateway,
PostgreSQL and the scripted model share the machine's cores.
"""

import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gateway import (  # noqa: E402
    binaries, free_port, machine_load, new_home, scratch_with_postgres, start_gateway, start_llm,
)
from gateway_load import percentile, run_users  # noqa: E402


def one(label, args, binary, llm_bin, tmp, pg):
    llm, llm_url = start_llm(llm_bin, tmp, os.path.join(tmp, "%s.jsonl" % label))
    home = new_home(tmp, max_concurrent_turns=args.turns, requests_per_minute=0, messages_per_minute=0,
                    heartbeat_minutes=0, max_connections=1024, chat_queue=64)
    db = pg.database(label) if pg else ""
    if pg and args.breakdown:
        pg.query(label, "CREATE EXTENSION pg_stat_statements")
    port = free_port()
    proc = start_gateway(binary, home, port, llm_url, db)
    names = ["u%d" % i for i in range(args.users)]
    results, elapsed, duplicated = asyncio.run(run_users(port, names, args.messages, args.users))
    proc.kill()
    proc.wait()
    llm.kill()
    llm.wait()
    answered = len(results.latencies) - results.lost
    line = ("%s: %d users x %d messages: %.0f msg/s (%.1f s), p50 %.0f ms, p99 %.0f ms; lost %d, "
            "mismatched %d, duplicated %d"
            % (label, args.users, args.messages, answered / elapsed, elapsed,
               percentile(results.latencies, 0.5) * 1000, percentile(results.latencies, 0.99) * 1000,
               results.lost, results.mismatched, duplicated))
    if pg:
        time.sleep(1.5)  # the ended backends' statistics reach pg_stat_database
        xacts = int(pg.query(label, "SELECT xact_commit FROM pg_stat_database WHERE datname = '%s'"
                             % label)[0][0])
        line += "; %.2f database transactions per message" % (xacts / max(answered, 1))
    print(line, flush=True)
    if pg and args.breakdown:
        # Statements per answered message, most frequent first (BEGIN and
        # COMMIT included: a statement outside them is a transaction of its own).
        # Then the database's time in each (mean per call, and total per
        # message), to see which statement slows as the tables grow.
        rows = pg.query(label, "SELECT calls, round(mean_exec_time::numeric, 3), "
                               "round(total_exec_time::numeric, 1), "
                               "regexp_replace(left(query, 90), '\\s+', ' ', 'g') "
                               "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
                               "WHERE datname = '%s') ORDER BY calls DESC LIMIT 14" % label)
        print("  calls/msg  mean ms  total ms  statement", flush=True)
        for calls, mean, total, query in rows:
            print("  %9.2f  %7s  %8s  %s" % (int(calls) / max(answered, 1), mean, total, query), flush=True)
    return answered / elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="debug")
    ap.add_argument("--binary", help="another ferroclaw binary (e.g. a build of main, for the before)")
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--turns", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--breakdown", action="store_true",
                    help="statements per message by kind (pg_stat_statements; changes the timing a little)")
    args = ap.parse_args()
    binary, llm_bin = binaries(args, "debug")
    with scratch_with_postgres("ferroclaw-xacts-", "pg_stat_statements" if args.breakdown else None) as (tmp, pg):
        load = machine_load()
        for r in range(args.rounds):
            files = one("files%d" % r, args, binary, llm_bin, tmp, None)
            postgres = one("postgres%d" % r, args, binary, llm_bin, tmp, pg)
            print("postgres / files: %.2f" % (postgres / files), flush=True)
        print("load %s before, %s after; %d cores; %s" % (load, machine_load(), os.cpu_count(), binary))

if __name__ == "__main__":
    main()
