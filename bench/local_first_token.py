#!/usr/bin/env python3
"""First token of `ferroclaw -p` with a local model: a fresh process each run,
the first run with an empty prompt-state cache (cold), the next ones
restoring the saved prefix (warm).

    bench/local_first_token.py BINARY MODEL.gguf [RUNS] [PROMPT]

BINARY is a built ferroclaw (e.g. target/fast/ferroclaw, what scripts/run
builds). Every run happens in the same throwaway folder (the prompt names
the folder, so the saved prefix is per folder), its three small files written
afresh, with a throwaway FERROCLAW_HOME whose models/ links MODEL; the
prompt-state cache there persists across the runs. Prints, per run: the engine's own figures
from its log (prompt tokens, reused/restored, first token after admission),
the time from process start to the first byte on stdout, and the whole run.
In the default `auto` tool choice a first answer is held back for its first
48 tokens (see docs/local-models.md), so stdout's first byte comes later than the model's
first token; FERROCLAW_LOCAL_TOOL_CHOICE=free shows the text as it comes.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, model = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    prompt = sys.argv[4] if len(sys.argv) > 4 else "List the files in this folder."
    home = tempfile.mkdtemp(prefix="ferroclaw-first-token-")
    work = tempfile.mkdtemp(prefix="ferroclaw-first-token-work-")
    try:
        os.makedirs(f"{home}/models")
        os.symlink(model, f"{home}/models/bench.gguf")
        print(f"load: {open('/proc/loadavg').read().split()[:3]}")
        for run in range(runs):
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            for name, text in [("notes.txt", "buy milk\n"), ("plan.md", "# Plan\n"), ("a.py", "print(1)\n")]:
                with open(f"{work}/{name}", "w") as f:
                    f.write(text)
            env = dict(os.environ, FERROCLAW_HOME=home, FERROCLAW_LOG="ferroclaw_local=debug")
            env.pop("ANTHROPIC_API_KEY", None)
            env.pop("OPENAI_API_KEY", None)
            started = time.monotonic()
            p = subprocess.Popen(
                [binary, "--model", "local/bench", "--yes", "-p", prompt],
                cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
            )
            first = p.stdout.read(1)
            first_at = time.monotonic() - started
            rest, err = p.communicate()
            total = time.monotonic() - started
            log = err.decode(errors="replace")
            engine = re.findall(r"local: prompt (\d+) tokens \((\d+) reused.*?first token after (\d+) ms", log)
            restored = re.findall(r"restored (\d+) prompt tokens", log)
            saved = re.findall(r"saved (\d+) prompt tokens", log)
            kind = "cold" if run == 0 else "warm"
            first_req = engine[0] if engine else ("?", "?", "?")
            print(
                f"run {run + 1} ({kind}): first request {first_req[0]} prompt tokens, {first_req[1]} reused, "
                f"model's first token {first_req[2]} ms after admission; "
                f"restored {','.join(restored) or '-'} saved {','.join(saved) or '-'}; "
                f"first stdout byte {first_at * 1000:.0f} ms, whole run {total * 1000:.0f} ms, "
                f"{len(engine)} model requests, exit {p.returncode}"
            )
            if p.returncode != 0:
                print(log[-2000:], file=sys.stderr)
            answer = (first + rest).decode(errors="replace").strip().replace("\n", " | ")
            print(f"  answer: {answer[:160]}")
        print(f"load: {open('/proc/loadavg').read().split()[:3]}")
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
