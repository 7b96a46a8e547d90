#!/usr/bin/env python3
"""Load test of `ferroclaw gateway` through its OpenAI-compatible API, with the
scripted model answering every request at once with its own words
(`echo: {{last_user}}`), so each answer can be checked against its request.

Phases (each against a fresh gateway and home):
  1. idle RSS of the gateway with the web chat and the API on, after start-up;
  2. USERS concurrent users (default 50), each sending MESSAGES messages
     (default 20) one after the other on a keep-alive connection, as a chat
     client does: answered messages per second, p50/p99/max latency, and
     lost (no 200 answer), mismatched (an answer that is not its request's)
     and duplicated (a request answered more than once, or an answer to a
     request nobody sent) answers; then the RSS;
  3. RSS with SESSIONS live idle sessions (default 10,000: that many users
     send one message each, 50 at a time), and the RSS once idle.

Usage: cargo build --release -p ferroclaw-cli -p ferroclaw-testkit
       python3 bench/gateway_load.py [--profile release] [--turns 16]
           [--users 50] [--messages 20] [--sessions 10000] [--skip-sessions]
FERROCLAW_WRAP runs the gateway under a tool (`FERROCLAW_WRAP="heaptrack -o /tmp/gw"`:
what each idle session holds, by call site; `perf record -g -o /tmp/gw.data`: where time goes).
Report the machine's load (`cat /proc/loadavg`) with the numbers: the client,
the gateway and the scripted model share the machine's cores.
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gateway import TARGET, TOKEN, free_port, new_home, start_gateway, start_llm  # noqa: E402,F401


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class Gateway:
    """A `ferroclaw gateway` in a fresh home; killed by stop()."""

    def __init__(self, binary, llm_url, turns, tmp):
        self.port = free_port()
        self.home = new_home(tmp, port=self.port, max_concurrent_turns=turns, requests_per_minute=0,
                             heartbeat_minutes=0, max_connections=1024)
        self.proc = start_gateway(binary, self.home, self.port, llm_url,
                                  wrap=os.environ.get("FERROCLAW_WRAP"))
        self.stderr = self.proc.stderr_file

    def rss(self):
        return rss_mib(self.proc.pid)

    def stop(self):
        # A wrapping tool writes its report on SIGTERM; the gateway itself stops at once.
        self.proc.send_signal(15 if os.environ.get("FERROCLAW_WRAP") else 9)
        self.proc.wait()
        self.stderr.close()


async def read_response(reader):
    """(status, body bytes) of one HTTP/1.1 response (content-length or chunked)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        return status, await reader.readexactly(int(headers["content-length"]))
    body = b""
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            return status, body
        body += chunk[:-2]


class Results:
    def __init__(self):
        self.latencies = []
        self.answers = {}  # nonce -> times answered (with its own nonce)
        self.lost = 0
        self.mismatched = 0
        self.errors = []


async def user(port, name, messages, results, sent):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for i in range(messages):
            nonce = "%s-m%d-%d" % (name, i, time.monotonic_ns())
            sent.add(nonce)
            body = json.dumps({"model": "ferroclaw", "user": name,
                               "messages": [{"role": "user", "content": "message " + nonce}]}).encode()
            request = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                       b"authorization: Bearer " + TOKEN.encode() + b"\r\ncontent-type: application/json\r\n"
                       b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            started = time.perf_counter()
            try:
                writer.write(request)
                await writer.drain()
                status, raw = await read_response(reader)
            except (OSError, asyncio.IncompleteReadError) as e:
                results.lost += messages - i
                results.errors.append("%s: connection: %s" % (name, e))
                return
            results.latencies.append(time.perf_counter() - started)
            if status != 200:
                results.lost += 1
                results.errors.append("%s: HTTP %d %s" % (name, status, raw[:200]))
                continue
            answer = json.loads(raw)["choices"][0]["message"]["content"] or ""
            if nonce not in answer:
                results.mismatched += 1
                results.errors.append("%s: answer %r to %r" % (name, answer[:120], nonce))
            for word in answer.split():
                if "-m" in word and word.count("-") >= 2:
                    results.answers[word] = results.answers.get(word, 0) + 1
    finally:
        writer.close()


async def run_users(port, names, messages, parallel):
    results = Results()
    sent = set()
    queue = list(names)

    async def worker():
        while queue:
            await user(port, queue.pop(), messages, results, sent)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(parallel, len(names)))))
    elapsed = time.perf_counter() - started
    duplicated = sum(n - 1 for n in results.answers.values() if n > 1)
    duplicated += sum(1 for nonce in results.answers if nonce not in sent)
    return results, elapsed, duplicated


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="release", help="cargo profile whose binaries to use")
    ap.add_argument("--turns", type=int, default=16, help="[gateway] max_concurrent_turns")
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--sessions", type=int, default=10000)
    ap.add_argument("--skip-sessions", action="store_true")
    args = ap.parse_args()
    binary = os.path.join(TARGET, args.profile, "ferroclaw")
    llm_binary = os.path.join(TARGET, args.profile, "scripted-llm")
    for b in (binary, llm_binary):
        if not os.path.exists(b):
            sys.exit("%s missing: build it first (see the usage at the top)" % b)
    tmp = tempfile.mkdtemp(prefix="ferroclaw-load-")
    llm, url = start_llm(llm_binary, tmp)
    print("binary %s; load before: %s" % (binary, open("/proc/loadavg").read().strip()))
    try:
        gw = Gateway(binary, url, args.turns, tmp)
        time.sleep(2)
        print("idle RSS (web + API on):            %6.1f MiB" % gw.rss())
        names = ["u%d" % i for i in range(args.users)]
        results, elapsed, duplicated = asyncio.run(run_users(gw.port, names, args.messages, args.users))
        answered = len(results.latencies) - results.lost
        lat = [x * 1000 for x in results.latencies]
        print("%d users x %d messages, max_concurrent_turns = %d:" % (args.users, args.messages, args.turns))
        print("  answered %d in %.2f s: %.0f msg/s" % (answered, elapsed, answered / elapsed))
        if lat:
            print("  latency p50 %.1f ms, p99 %.1f ms, max %.1f ms"
                  % (percentile(lat, 0.5), percentile(lat, 0.99), max(lat)))
        print("  lost %d, mismatched %d, duplicated %d" % (results.lost, results.mismatched, duplicated))
        for e in results.errors[:5]:
            print("  !", e)
        print("RSS after the load (%d live sessions):  %6.1f MiB" % (args.users, gw.rss()))
        print("load after: %s" % open("/proc/loadavg").read().strip())
        gw.stop()
        if not args.skip_sessions:
            gw = Gateway(binary, url, args.turns, tmp)
            names = ["s%d" % i for i in range(args.sessions)]
            results, elapsed, duplicated = asyncio.run(run_users(gw.port, names, 1, 50))
            time.sleep(1)
            print("%d sessions opened (one message each) in %.1f s, lost %d, mismatched %d"
                  % (args.sessions, elapsed, results.lost, results.mismatched))
            for e in results.errors[:5]:
                print("  !", e)
            print("RSS with %d live idle sessions:     %6.1f MiB" % (args.sessions, gw.rss()))
            gw.stop()
    finally:
        llm.kill()
        llm.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
