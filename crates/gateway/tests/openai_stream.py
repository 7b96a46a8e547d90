"""Many streamed answers at once through the official OpenAI Python client.

Usage: openai_stream.py BASE_URL TOKEN COUNT EXPECTED_TEXT
Runs COUNT streamed completions from 16 threads over 24 sessions, with
stream_options.include_usage. Each answer's deltas must join to exactly
EXPECTED_TEXT, and each stream must end with the usage chunk. Prints the
failures and exits non-zero when there is any.
"""
import sys
from concurrent.futures import ThreadPoolExecutor

from openai import OpenAI

base, token, count, expected = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
client = OpenAI(base_url=base + "/v1", api_key=token, max_retries=0, timeout=120)


def one(i):
    stream = client.chat.completions.create(
        model="ferroclaw",
        messages=[{"role": "user", "content": f"question {i}"}],
        user=f"stream{i % 24}",
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, usage, finish = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    text = "".join(pieces)
    problems = []
    if text != expected:
        problems.append(f"joined to {text!r}")
    if usage is None or usage.completion_tokens <= 0:
        problems.append(f"no usage chunk ({usage!r})")
    if finish != "stop":
        problems.append(f"finish_reason {finish!r}")
    if len(pieces) < 2:
        problems.append(f"not streamed: {pieces!r}")
    return f"answer {i}: " + "; ".join(problems) if problems else None


with ThreadPoolExecutor(max_workers=16) as pool:
    failures = [f for f in pool.map(one, range(count)) if f]
for f in failures[:10]:
    print(f)
print(f"{count - len(failures)} of {count} streamed answers joined exactly")
sys.exit(1 if failures else 0)
