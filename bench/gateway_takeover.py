#!/usr/bin/env python3
"""How long a chat whose gateway was killed mid-turn waits before the other
gateway answers it (issue 31: "a killed gateway's chats answer on the
survivor in <= 3 s, median over 10 kills"; before, the survivor waited for
the dead process's 30 s chat lease).

Two `ferroclaw gateway` processes with separate homes on one throw-away
PostgreSQL, the default chat lease (30 s), and a model served here that
answers at once, except the first time it is asked a message that starts
with "hold": that request is held (the turn is mid-flight). Each round:

  1. a message "hold N" for chat tN goes to the victim; once the victim's
     worker holds the chat (its lease row names the victim's pid) and the
     model holds the request, the victim is killed with SIGKILL;
  2. at once the next message of the same chat, "after N", goes to the
     survivor, which must first take the dead process's message over (it
     runs again; the model answers it now), then answer "after N";
  3. the time from the kill to the survivor's answer is the takeover time;
     a new victim is started for the next round.

Rounds where the survivor happened to claim the held message are answered
and repeated (the kill must cut the victim's own turn).

Usage: cargo build -p ferroclaw-cli        (or --profile fast/release)
       python3 bench/gateway_takeover.py [--profile debug] [--kills 10] [--binary PATH]
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gateway import (  # noqa: E402
    TOKEN, OpenAIModel, binaries, free_port, last_user_text, machine_load, new_home,
    scratch_with_postgres, start_gateway,
)
from gateway_load import read_response  # noqa: E402


class HoldFirstModel(OpenAIModel):
    """OpenAI wire, non-streamed or streamed: answers `echo: <last user
    text>` at once, except the first request for each text starting with
    "hold", which waits until `release(text)`."""

    def __init__(self):
        self.asked = {}
        self.held = {}

    def release(self, text):
        self.held.setdefault(text, asyncio.Event()).set()

    async def answer(self, body, writer):
        user = last_user_text(body.get("messages", []))
        first = user not in self.asked
        self.asked[user] = self.asked.get(user, 0) + 1
        if first and user.startswith("hold"):
            await self.held.setdefault(user, asyncio.Event()).wait()
        await self.reply(body, writer, {"role": "assistant", "content": "echo: " + user}, "stop")


async def say(port, user, text):
    """One API request as `user`; the answer's text (raises when the connection dies)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        body = json.dumps({"model": "ferroclaw", "user": user,
                           "messages": [{"role": "user", "content": text}]}).encode()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                     b"authorization: Bearer " + TOKEN.encode() + b"\r\ncontent-type: application/json\r\n"
                     b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        status, raw = await read_response(reader)
        if status != 200:
            raise RuntimeError("HTTP %d %s" % (status, raw[:200]))
        return json.loads(raw)["choices"][0]["message"]["content"]
    finally:
        writer.close()


async def run(args, binary, tmp, pg):
    model = HoldFirstModel()
    url = await model.start()
    db = pg.database("takeover")
    start = lambda: asyncio.to_thread(  # noqa: E731
        lambda: (lambda port: (port, start_gateway(binary, new_home(tmp, requests_per_minute=0, messages_per_minute=0, heartbeat_minutes=0), port, url, db, openai=True)))(free_port()))
    survivor = await start()
    victim = await start()
    # For RESTART_GRACE_SECS (10 s) after the database server starts, every
    # lease holds (gateways may be reconnecting with finished answers): a
    # kill then waits out the grace. A fresh server is one: start after it.
    up = float(pg.query("takeover", "SELECT extract(epoch FROM now() - pg_postmaster_start_time())")[0][0])
    if up < 10.5:
        print("waiting %.1f s for the database's restart grace to end" % (10.5 - up), flush=True)
        await asyncio.sleep(10.5 - up)
    times, skipped, n = [], 0, 0
    while len(times) < args.kills:
        n += 1
        chat, hold = "t%d" % n, "hold %d" % n
        held = asyncio.ensure_future(say(victim[0], chat, hold))
        deadline = time.perf_counter() + 60
        while hold not in model.asked:
            if time.perf_counter() > deadline:
                sys.exit("the held message never reached the model")
            await asyncio.sleep(0.01)
        holders = pg.query("takeover", "SELECT holder FROM chat_leases")
        if len(holders) != 1 or holders[0][0].rsplit("-", 2)[1] != str(victim[1].pid):
            # The survivor runs it: let it finish, and try again.
            skipped += 1
            model.release(hold)
            await held
            continue
        victim[1].kill()
        killed = time.perf_counter()
        victim[1].wait()
        held.cancel()
        answer = await asyncio.wait_for(say(survivor[0], chat, "after %d" % n), 120)
        took = time.perf_counter() - killed
        assert answer == "echo: after %d" % n, answer
        times.append(took)
        print("kill %d: the survivor answered the chat %.2f s after the kill" % (len(times), took), flush=True)
        victim = await start()
    victim[1].kill()
    survivor[1].kill()
    model.server.close()
    print("takeover after kill -9, %d kills (%d rounds repeated: the survivor had the turn): "
          "median %.2f s, min %.2f s, max %.2f s (chat lease 30 s)"
          % (len(times), skipped, statistics.median(times), min(times), max(times)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="debug")
    ap.add_argument("--binary", help="another ferroclaw binary (e.g. a build of main, for the before)")
    ap.add_argument("--kills", type=int, default=10)
    args = ap.parse_args()
    binary, _ = binaries(args, "debug")
    with scratch_with_postgres("ferroclaw-takeover-") as (tmp, pg):
        load = machine_load()
        asyncio.run(run(args, binary, tmp, pg))
        print("load %s before, %s after; %d cores; %s" % (load, machine_load(), os.cpu_count(), binary))

if __name__ == "__main__":
    main()
