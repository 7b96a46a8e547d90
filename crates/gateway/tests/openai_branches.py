"""A chat front-end that keeps a server-side session (`user`) and goes
back in it, through the official OpenAI Python client.

Usage: openai_branches.py BASE_URL TOKEN
The gateway's model echoes ("echo: " and the last user message). With
`user="carol"` the front-end sends its whole copy of the conversation each
time: two turns, then a regenerate of the second answer (streamed, the
same messages again), then an edit of the second question, then a third
turn on the edited branch. Prints "ok" at the end; the caller checks what
reached the model.
"""
import sys

from openai import OpenAI

base, token = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=base + "/v1", api_key=token, max_retries=0, timeout=120)


def q(text):
    return {"role": "user", "content": text}


def a(text):
    return {"role": "assistant", "content": text}


def ask(messages):
    done = client.chat.completions.create(model="ferroclaw", messages=messages, user="carol")
    return done.choices[0].message.content


def stream(messages):
    chunks = client.chat.completions.create(
        model="ferroclaw", messages=messages, user="carol", stream=True)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


first = ask([q("where is the key?")])
assert first == "echo: where is the key?", first
second = ask([q("where is the key?"), a(first), q("under the blue pot")])
assert second == "echo: under the blue pot", second

# Regenerate the second answer: the conversation up to its question, again.
again = stream([q("where is the key?"), a(first), q("under the blue pot")])
assert again == "echo: under the blue pot", again

# Edit the second question: the conversation up to it, changed.
edited = ask([q("where is the key?"), a(first), q("under the red mat")])
assert edited == "echo: under the red mat", edited

# Go on from the edited branch.
third = ask([q("where is the key?"), a(first), q("under the red mat"), a(edited),
             q("which colour was it?")])
assert third == "echo: which colour was it?", third
print("ok")
