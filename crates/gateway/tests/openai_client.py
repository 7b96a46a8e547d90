"""Talks to `ferroclaw gateway` with the official OpenAI Python client.

Usage: openai_client.py BASE_URL TOKEN
Checks /v1/models, a plain completion and a streamed one; exits non-zero on
any mismatch. The scripted model answers "Plain answer." then "Streamed answer.".
"""
import sys

from openai import OpenAI

base, token = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=base + "/v1", api_key=token)

models = client.models.list()
assert len(models.data) == 1, models

plain = client.chat.completions.create(
    model=models.data[0].id,
    messages=[{"role": "user", "content": "Say something plain."}],
    user="py",
)
assert plain.choices[0].message.content == "Plain answer.", plain
assert plain.usage.total_tokens > 0, plain.usage

chunks = client.chat.completions.create(
    model=models.data[0].id,
    messages=[{"role": "user", "content": "Now stream it."}],
    user="py",
    stream=True,
)
pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
text = "".join(pieces)
assert text == "Streamed answer.", (text, pieces)
assert len([p for p in pieces if p]) > 1, pieces  # really streamed, in several deltas
print("ok", len(pieces), "chunks")
