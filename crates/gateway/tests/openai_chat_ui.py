"""One conversation as a chat front-end (Open WebUI) drives an OpenAI API,
through the official OpenAI Python client.

Usage: openai_chat_ui.py BASE_URL TOKEN
The gateway's model echoes ("echo: " and the last user message). The
sequence is Open WebUI 0.12's with its defaults (no `user`, no user-info
headers): list the models; stream each answer with the whole conversation
(the front-end's system prompt, the history, the sampling settings it
sends); regenerate (the same messages again, streamed); a picture as an
`image_url` part; then the title and tags requests (not streamed, one user
message holding the chat history); and "continue" (the last message the
assistant's), which is refused in OpenAI's error shape. Prints "ok" at
the end; the caller checks what reached the model.
"""
import sys

import openai
from openai import OpenAI

base, token = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=base + "/v1", api_key=token, max_retries=0, timeout=120)
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
SYSTEM = {"role": "system", "content": "You are a helpful assistant. Today is Sunday."}
# What Open WebUI sends from a model's advanced parameters.
SETTINGS = {"temperature": 0.7, "top_p": 0.9, "max_tokens": 512, "seed": 42}


def stream(messages):
    """One streamed answer: its text, joined from the deltas, and how it ended."""
    chunks = client.chat.completions.create(
        model="ferroclaw", messages=messages, stream=True,
        stream_options={"include_usage": True}, **SETTINGS,
    )
    pieces, finish, usage, ids = [], None, None, set()
    for chunk in chunks:
        ids.add(chunk.id)
        usage = chunk.usage or usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert len(ids) == 1, ids
    assert usage is not None and usage.completion_tokens > 0, usage
    return "".join(pieces), finish


def task(prompt):
    """A background task (title, tags): not streamed, one user message."""
    done = client.chat.completions.create(
        model="ferroclaw", messages=[{"role": "user", "content": prompt}], stream=False,
        max_tokens=1000,
    )
    return done.choices[0].message.content


# The model picker.
models = client.models.list().data
assert [m.id for m in models] == ["ferroclaw"], models
assert all(m.object == "model" and m.owned_by for m in models), models

# First turn, then the second with the whole history, as the front-end keeps it.
history = [SYSTEM, {"role": "user", "content": "plan a picnic for four"}]
answer, finish = stream(history)
assert (answer, finish) == ("echo: plan a picnic for four", "stop"), (answer, finish)
history += [{"role": "assistant", "content": answer},
            {"role": "user", "content": "make it vegetarian"}]
answer, finish = stream(history)
assert (answer, finish) == ("echo: make it vegetarian", "stop"), (answer, finish)

# Regenerate: the same messages again give a fresh answer (a second turn).
again, _ = stream(history)
assert again == "echo: make it vegetarian", again

# A picture, with the history before it.
history += [{"role": "assistant", "content": again},
            {"role": "user", "content": [
                {"type": "text", "text": "is this basket big enough?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG}},
            ]}]
answer, _ = stream(history)
assert answer == "echo: is this basket big enough?", answer

# The title and tags requests the front-end makes after the first answers.
chat = "USER: plan a picnic for four\nASSISTANT: echo: plan a picnic for four"
title = task("### Task:\nGenerate a concise title summarizing the chat history.\n"
             "### Chat History:\n<chat_history>\n" + chat + "\n</chat_history>")
assert title.startswith("echo: ### Task:"), title
tags = task("### Task:\nGenerate 1-3 broad tags categorizing the main themes.\n"
            "### Chat History:\n<chat_history>\n" + chat + "\n</chat_history>")
assert tags.startswith("echo: ### Task:"), tags

# "Continue": the last message is the assistant's; refused, saying why.
try:
    client.chat.completions.create(
        model="ferroclaw",
        messages=history + [{"role": "assistant", "content": "A basket for"}],
        extra_body={"continue_final_message": True, "add_generation_prompt": False},
    )
    raise AssertionError("continue was accepted")
except openai.BadRequestError as e:
    assert isinstance(e.body, dict) and "last message" in e.body["message"], e.body
print("ok")
