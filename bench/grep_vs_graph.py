#!/usr/bin/env python3
"""Grep vs the code graph on 30 questions about a real repository.

The repository is tokio 1.54.1's source from the cargo registry cache
(pinned). The questions and their answers are checked in
(bench/grep_vs_graph_questions.json):

- 20 "who calls X?": the functions (file and name) whose bodies call X;
- 10 "what breaks if X changes?": the files holding X's callers and their
  callers (two hops).

Each is answered twice, the way a model would with each toolset, and we
count the bytes of tool output it would have read:

- grep: `grep -rnw X` over the .rs files, then for every hit that looks like
  a call, a `read` of the 60 lines above it to find the enclosing `fn` (an
  ideal reader: it never misreads what it is shown); for two hops, the same
  again for each caller found;
- graph: `ferroclaw code callers X` (`--depth 2` for two hops), read whole.

An answer is correct when its set equals the checked-in set exactly; the
table also gives precision and recall summed over the questions.

The ground truth is made by `--make-truth`, independently of the graph and
of grep: every .rs file is stripped of comments and strings, each `fn`'s
body is found by matching braces, and every `X(` / `.X(` / `::X(` / `X::<..>(`
is attributed to the innermost body around it. Only functions whose name is
defined once in the repository, is not a common std method and is not
defined in a module that mirrors std's (fs, process, net) are asked about, so a name means one function; the list was then read by hand.

Usage:
  bench/grep_vs_graph.py                 # run the benchmark (builds ferroclaw with --profile fast)
  bench/grep_vs_graph.py --bin PATH      # use this ferroclaw binary
  bench/grep_vs_graph.py --make-truth    # print a fresh question list (for review)
"""

import argparse
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINNED = "tokio-1.54.1"
QUESTIONS = os.path.join(ROOT, "bench", "grep_vs_graph_questions.json")
READ_WINDOW = 60

# Names std or common crates also use as methods: a grep or name match for
# them says nothing about which function is meant.
COMMON = set(
    """new default clone drop fmt from into poll next len is_empty push pop get set insert remove take
    send recv run main build spawn close lock unwrap expect map as_ref as_mut deref deref_mut iter
    read write flush shutdown wake wake_by_ref call with enter try_recv try_send register park unpark
    load store swap fetch_add fetch_sub fetch_or fetch_and compare_exchange with_mut from_raw into_raw
    as_raw_fd as_fd poll_read poll_write poll_flush poll_shutdown hash eq cmp partial_cmp to_string
    reset start stop contains sleep now elapsed duration handle block_on finish clear extend capacity
    is_some is_none ok err filter and_then or_else unwrap_or rev find any all count sum min max abs
    to_owned borrow borrow_mut split as_str as_bytes bind connect accept listen with_capacity advance
    put chunk remaining from_std into_std local_addr peer_addr subscribe notify notified bytes entry""".split()
)


# tokio's modules that mirror std's (`tokio::fs::read_link` wraps
# `std::fs::read_link`, `Command::output` mirrors std's): their names are
# std's too.
STD_MIRRORS = ("src/fs/", "src/process/", "src/net/", "src/io/stdio", "src/io/std")


def registry_source():
    cargo = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = sorted(glob.glob(os.path.join(cargo, "registry", "src", "*", PINNED)))
    if not found:
        sys.exit(f"no {PINNED} in the cargo registry cache; run `cargo fetch` in this repository")
    return found[0]


def rust_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("target", ".git"))
        for f in sorted(filenames):
            if f.endswith(".rs"):
                out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return out


def strip(text):
    """Comments and string/char literals blanked out (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c == "r" and re.match(r'r#*"', text[i:i + 10]) and not re.match(r"\w", text[i - 1:i] or " ")):
            m = re.match(r'(r(#*))?"', text[i:])
            hashes = m.group(2) or ""
            raw = m.group(1) is not None
            j = i + len(m.group(0))
            while j < n:
                if not raw and text[j] == "\\":
                    j += 2
                    continue
                if text[j] == '"' and text.startswith(hashes, j + 1):
                    j += 1 + len(hashes)
                    break
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def fn_spans(code):
    """(name, body start, body end) of every `fn` with a body."""
    spans = []
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        j = m.end()
        depth_angle = 0
        while j < len(code):
            ch = code[j]
            if ch == ";" and depth_angle == 0:
                break
            if ch == "{":
                break
            j += 1
        if j >= len(code) or code[j] != "{":
            continue
        depth, k = 0, j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        spans.append((m.group(1), j, k))
    return spans


class Repo:
    """The stripped files, their `fn` bodies, and which names are defined where."""

    def __init__(self, root):
        self.root = root
        self.files = {}
        self.defs = {}
        for rel in rust_files(root):
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                code = strip(f.read())
            spans = fn_spans(code)
            self.files[rel] = (code, spans)
            for m in re.finditer(r"\bfn\s+(\w+)", code):
                self.defs.setdefault(m.group(1), []).append(rel)

    def callers(self, name):
        """{(file, enclosing fn)} of every call of `name`."""
        pat = re.compile(r"(?<![\w])" + re.escape(name) + r"\s*(::\s*<[^;{}()]*>\s*)?\(")
        out = set()
        for rel, (code, spans) in self.files.items():
            for m in pat.finditer(code):
                before = code[max(0, m.start() - 20):m.start()]
                if re.search(r"\bfn\s+$", before):
                    continue
                inner = [s for s in spans if s[1] < m.start() < s[2]]
                if not inner:
                    continue
                enclosing = min(inner, key=lambda s: s[2] - s[1])
                out.add((rel, enclosing[0]))
        return out


def make_truth(src):
    repo = Repo(src)
    unique = sorted(
        n for n, where in repo.defs.items()
        if len(where) == 1 and n not in COMMON and not n.startswith("test") and len(n) > 4
        and not where[0].startswith(STD_MIRRORS)
    )
    rng = random.Random(17)
    rng.shuffle(unique)
    callers_qs, impact_qs = [], []
    for name in unique:
        found = repo.callers(name)
        if not 2 <= len(found) <= 12:
            continue
        if len(callers_qs) < 20:
            callers_qs.append({"kind": "callers", "symbol": name,
                               "answer": sorted(f"{p}::{f}" for p, f in found)})
            continue
        # Two hops: only where every caller's name means one function too.
        if len(impact_qs) < 10 and all(len(repo.defs.get(f, [])) == 1 and f not in COMMON for _, f in found):
            files = {p for p, _ in found}
            for _, f in found:
                files |= {p for p, _ in repo.callers(f)}
            if len(files) <= 25:
                impact_qs.append({"kind": "impact", "symbol": name, "answer": sorted(files)})
        if len(callers_qs) == 20 and len(impact_qs) == 10:
            break
    json.dump({"repository": PINNED, "questions": callers_qs + impact_qs}, sys.stdout, indent=1)
    print()


def run(cmd, cwd, env=None):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False).stdout


def grep_callers(work, name, cache):
    """The grep answer for `name`: {(file, fn)}, and the bytes read."""
    if name in cache:
        return cache[name]
    out = run(["grep", "-rnw", "--include=*.rs", name, "."], work)
    read = len(out.encode())
    found = set()
    windows = {}
    for line in out.splitlines():
        m = re.match(r"\./(.+?):(\d+):(.*)", line)
        if not m:
            continue
        rel, no, text = m.group(1), int(m.group(2)), m.group(3)
        if re.search(r"\bfn\s+" + re.escape(name) + r"\b", text) or not re.search(
            r"\b" + re.escape(name) + r"\s*(::<.*>)?\(", text
        ) or text.lstrip().startswith("//"):
            continue
        windows.setdefault(rel, []).append(no)
    for rel, hits in windows.items():
        with open(os.path.join(work, rel), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        shown = set()
        for no in hits:
            lo = max(1, no - READ_WINDOW)
            shown.update(range(lo, no + 1))
            for k in range(no, lo - 1, -1):
                fm = re.search(r"\bfn\s+(\w+)", lines[k - 1])
                if fm and not (k == no and fm.group(1) == name):
                    found.add((rel, fm.group(1)))
                    break
        read += sum(len(lines[k - 1]) + 1 for k in shown)
    cache[name] = (found, read)
    return cache[name]


def graph_callers(work, env, binary, name, depth):
    out = run([binary, "code", "callers", name, "--depth", str(depth), "--max-chars", "50000"], work, env)
    found, files = set(), set()
    for line in out.splitlines():
        m = re.match(r"\s*(\S+?):(\d+) (?:\w+ (\S+?)(?: \[test\])?|<top level>)(?: inherits| refers to)? -> ", line)
        if m:
            files.add(m.group(1))
            if m.group(3):
                found.add((m.group(1), re.split(r"::|\.", m.group(3))[-1]))
    return found, files, len(out.encode())


def score(got, want):
    got, want = set(got), set(want)
    return got == want, len(got & want), len(got), len(want)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--make-truth", action="store_true")
    parser.add_argument("--bin")
    parser.add_argument("--source")
    args = parser.parse_args()
    src = args.source or registry_source()
    if args.make_truth:
        make_truth(src)
        return
    binary = os.path.abspath(args.bin) if args.bin else None
    if not binary:
        subprocess.run(["cargo", "build", "--quiet", "-p", "ferroclaw-cli", "--profile", "fast"], cwd=ROOT, check=True)
        binary = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "fast", "ferroclaw")
    with open(QUESTIONS) as f:
        questions = json.load(f)["questions"]
    tmp = tempfile.mkdtemp(prefix="grep-vs-graph-")
    try:
        work = os.path.join(tmp, "tokio")
        shutil.copytree(src, work)
        env = dict(os.environ, FERROCLAW_HOME=os.path.join(tmp, "home"))
        subprocess.run([binary, "index"], cwd=work, env=env, check=True, capture_output=True)
        cache = {}
        rows = []
        for i, q in enumerate(questions, 1):
            name = q["symbol"]
            if q["kind"] == "callers":
                want = {tuple(a.rsplit("::", 1)) for a in q["answer"]}
                g_found, g_bytes = grep_callers(work, name, cache)
                k_found, _, k_bytes = graph_callers(work, env, binary, name, 1)
                g, k = score(g_found, want), score(k_found, want)
            else:
                want = set(q["answer"])
                first, g_bytes = grep_callers(work, name, cache)
                g_files = {p for p, _ in first}
                for _, caller in sorted(first):
                    more, b = grep_callers(work, caller, cache)
                    g_bytes += b
                    g_files |= {p for p, _ in more}
                _, k_files, k_bytes = graph_callers(work, env, binary, name, 2)
                g, k = score(g_files, want), score(k_files, want)
            rows.append((i, q["kind"], name, len(want), g, g_bytes, k, k_bytes))
        print(f"{'#':>2} {'question':<8} {'symbol':<28} {'want':>4} | {'grep ok':>7} {'bytes':>7} | {'graph ok':>8} {'bytes':>6}")
        for i, kind, name, want, g, gb, k, kb in rows:
            mark = lambda s: "yes" if s[0] else f"{s[1]}/{s[2]}"
            print(f"{i:>2} {kind:<8} {name:<28} {want:>4} | {mark(g):>7} {gb:>7} | {mark(k):>8} {kb:>6}")
        for label, idx, bidx in (("grep", 4, 5), ("graph", 6, 7)):
            correct = sum(1 for r in rows if r[idx][0])
            hit = sum(r[idx][1] for r in rows)
            got = sum(r[idx][2] for r in rows)
            want = sum(r[idx][3] for r in rows)
            total = sum(r[bidx] for r in rows)
            print(
                f"{label:<5}: {correct}/{len(rows)} exactly right, precision {hit / max(got, 1):.2f}, "
                f"recall {hit / max(want, 1):.2f}, {total} bytes of tool output (~{total // 4} tokens)"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
