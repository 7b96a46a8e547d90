"""What the gateway benchmarks share: where the binaries are, a throw-away
PostgreSQL cluster, a home with a `[gateway]` config, starting a gateway
(and waiting for its /health), the scripted model, and a model served in the
benchmark's own process on the OpenAI wire (for models that hold requests).

Imported by gateway_load.py, gateway_scale.py, gateway_takeover.py and
gateway_xacts.py; not a benchmark of its own.
"""

import asyncio
import contextlib
import glob
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
TOKEN = "bench-token"
# How long a gateway may take to answer /health after it starts.
START_TIMEOUT_S = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binaries(args, default_profile):
    """(ferroclaw, scripted-llm) for `--binary` / `--profile`: the scripted
    model beside the binary given, else in the profile's target folder."""
    binary = getattr(args, "binary", None) or os.path.join(TARGET, args.profile or default_profile, "ferroclaw")
    llm_bin = os.path.join(os.path.dirname(binary), "scripted-llm")
    if not os.path.exists(llm_bin):
        llm_bin = os.path.join(TARGET, args.profile or default_profile, "scripted-llm")
    return binary, llm_bin


def machine_load():
    """The 1-minute load average, to report with the numbers."""
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


# ---- PostgreSQL ------------------------------------------------------------


def pg_bin():
    for d in [os.environ.get("FERROCLAW_PG_BIN", "")] + os.environ.get("PATH", "").split(":") + \
            sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if d and os.path.exists(os.path.join(d, "initdb")):
            return os.path.dirname(os.path.realpath(os.path.join(d, "initdb")))
    sys.exit("no PostgreSQL binaries (initdb, pg_ctl) found")


class Postgres:
    """A throw-away cluster under `tmp` (initdb, pg_ctl on a free port;
    as root it runs as `postgres`, or `nobody`)."""

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


@contextlib.contextmanager
def scratch_with_postgres(prefix, preload=None):
    """A scratch folder and a cluster in it, both gone afterwards: yields (tmp, pg)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    pg = Postgres(tmp, preload=preload)
    try:
        yield tmp, pg
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


# ---- the gateway -------------------------------------------------------------


def new_home(tmp, **gateway):
    """A fresh FERROCLAW_HOME under `tmp` whose config.toml has `token` and
    the `[gateway]` settings given (numbers, or strings to quote)."""
    home = tempfile.mkdtemp(prefix="home-", dir=tmp)
    lines = ["[gateway]", "token = \"%s\"" % TOKEN]
    for key, value in gateway.items():
        lines.append("%s = %s" % (key, json.dumps(value) if isinstance(value, str) else value))
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return home


def wait_healthy(proc, port, stderr_path):
    """Waits until the gateway on `port` answers /health with 200; exits the
    benchmark when it died or did not come up in START_TIMEOUT_S."""
    deadline = time.time() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            sys.exit("gateway exited: " + open(stderr_path).read())
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                if b" 200 " in s.recv(100):
                    return
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit("gateway did not come up")
        time.sleep(0.05)


def start_gateway(binary, home, port, llm_url, db_url="", openai=False, wrap=None):
    """`ferroclaw gateway` in `home` on `port` against the model at `llm_url`
    (the Anthropic wire, or OpenAI with `openai`), on the database `db_url`
    (files when empty), under the tool `wrap` (a command line) if given;
    returns once it is healthy. Its stderr goes to home/gateway-PORT.stderr."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "FERROCLAW_HOME": home,
           "ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": llm_url,
           "FERROCLAW_MODEL": "anthropic/bench"}
    if db_url:
        env["FERROCLAW_DATABASE_URL"] = db_url
    if openai:
        env.update({"OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": llm_url + "/v1",
                    "FERROCLAW_MODEL": "openai/bench", "FERROCLAW_LOG": "info"})
    err = open(os.path.join(home, "gateway-%d.stderr" % port), "w")
    proc = subprocess.Popen(shlex.split(wrap or "") + [binary, "gateway", "--port", str(port)], env=env,
                            cwd=home, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
    proc.stderr_file = err
    wait_healthy(proc, port, err.name)
    return proc


# ---- models ------------------------------------------------------------------


def start_llm(binary, tmp, record=None):
    """The scripted model answering every request with `echo: <its last user
    text>` (recording each request to `record` when given): (process, URL)."""
    script = os.path.join(tmp, "echo.json")
    with open(script, "w") as f:
        json.dump([{"kind": "reply", "text": "echo: {{last_user}}"}], f)
    command = [binary, "--script", script, "--repeat"] + (["--record", record] if record else [])
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on "), line
    return proc, line[len("listening on "):]


def last_user_text(messages):
    """The text of the last user message of an OpenAI request."""
    user = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
    if isinstance(user, list):
        user = " ".join(p.get("text", "") for p in user if isinstance(p, dict))
    return user


class OpenAIModel:
    """A model on the OpenAI wire served in this process, streamed or not:
    subclasses decide each answer in `answer(body, writer)` (which may wait)
    and send it with `reply`."""

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
        raise NotImplementedError

    async def reply(self, body, writer, message, finish):
        """Sends the assistant `message` with `finish` as the finish reason,
        as chunks when the request asked for a stream."""
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
