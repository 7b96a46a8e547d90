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
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_load import free_port, read_response  # noqa: E402
from gateway_scale import TARGET, TOKEN, Postgres, start_gateway  # noqa: E402


class HoldFirstModel:
    """OpenAI wire, non-streamed or streamed: answers `echo: <last user
    text>` at once, except the first request for each text starting with
    "hold", which waits until `release(text)`."""

    def __init__(self):
        self.asked = {}
        self.held = {}

    async def start(self):
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return "http://127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]

    def release(self, text):
        self.held.setdefault(text, asyncio.Event()).set()

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
        first = user not in self.asked
        self.asked[user] = self.asked.get(user, 0) + 1
        if first and user.startswith("hold"):
            await self.held.setdefault(user, asyncio.Event()).wait()
        message = {"role": "assistant", "content": "echo: " + user}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if body.get("stream"):
            chunks = [{"choices": [{"index": 0, "delta": message, "finish_reason": None}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                      {"choices": [], "usage": usage}]
            payload = "".join("data: %s\n\n" % json.dumps(dict(c, id="x", object="chat.completion.chunk",
                                                                 model="bench")) for c in chunks)
            payload = (payload + "data: [DONE]\n\n").encode()
            ctype = b"text/event-stream"
        else:
            payload = json.dumps({"id": "x", "object": "chat.completion", "model": "bench",
                                  "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                                  "usage": usage}).encode()
            ctype = b"application/json"
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + ctype + b"\r\ncontent-length: "
                     + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        await writer.drain()


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


def new_home(tmp):
    home = tempfile.mkdtemp(prefix="home-", dir=tmp)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[gateway]\ntoken = \"%s\"\nrequests_per_minute = 0\nmessages_per_minute = 0\n"
                "heartbeat_minutes = 0\n" % TOKEN)
    return home


async def run(args, binary, tmp, pg):
    model = HoldFirstModel()
    url = await model.start()
    db = pg.database("takeover")
    start = lambda: asyncio.to_thread(  # noqa: E731
        lambda: (lambda port: (port, start_gateway(binary, new_home(tmp), port, url, db, openai=True)))(free_port()))
    survivor = await start()
    victim = await start()
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
    binary = args.binary or os.path.join(TARGET, args.profile, "ferroclaw")
    tmp = tempfile.mkdtemp(prefix="ferroclaw-takeover-")
    pg = Postgres(tmp)
    try:
        load = open("/proc/loadavg").read().split()[0]
        asyncio.run(run(args, binary, tmp, pg))
        print("load %s before, %s after; %d cores; %s" % (load, open("/proc/loadavg").read().split()[0],
                                                          os.cpu_count(), binary))
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
