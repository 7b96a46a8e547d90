"""A chat front-end's requests, through the official OpenAI Python client.

Usage: openai_frontend.py BASE_URL TOKEN
The gateway's model echoes ("echo: " and the last user message); the
gateway has the alias `fast`. Checks what the client sees: stateless
requests, a front-end's edited conversation, sessions with `user`,
Idempotency-Key retries, pictures, the model list and OpenAI's error
shape. Prints "ok" at the end; the caller checks what reached the model.
"""
import sys

import openai
from openai import OpenAI

base, token = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=base + "/v1", api_key=token, max_retries=0)
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def ask(messages, model="ferroclaw", **kw):
    return client.chat.completions.create(model=model, messages=messages, **kw)


def text(completion):
    return completion.choices[0].message.content


def refused(kind, call):
    try:
        call()
    except kind as e:
        assert isinstance(e.body, dict) and e.body.get("message") and e.body.get("type"), e.body
        return e
    raise AssertionError(f"expected {kind.__name__}")


# Two clients without `user`: each request is its own conversation.
secret = ask([
    {"role": "system", "content": "Answer like a pirate."},
    {"role": "user", "content": "my secret is 4242"},
])
assert text(secret) == "echo: my secret is 4242", secret
other = ask([{"role": "user", "content": "what is my secret?"}])
assert text(other) == "echo: what is my secret?", other

# A front-end's edit or regenerate: the conversation it sends is the conversation.
edited = ask([
    {"role": "system", "content": "Answer like a pirate."},
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "an edited answer"},
    {"role": "user", "content": "second question"},
])
assert text(edited) == "echo: second question", edited

# With `user`: the server-side session continues; the system message is the client's latest.
ask([{"role": "system", "content": "Answer like a poet."},
     {"role": "user", "content": "remember blue"}], user="alice")
ask([{"role": "system", "content": "Answer like a judge."},
     {"role": "user", "content": "which colour?"}], user="alice")

# Idempotency-Key: a retry gets the first answer again, without a second turn.
key = {"Idempotency-Key": "charge-7f3a"}
first = ask([{"role": "user", "content": "charge the card once"}], extra_headers=key)
again = ask([{"role": "user", "content": "charge the card once"}], extra_headers=key)
assert (again.id, text(again)) == (first.id, text(first)), (first, again)
e = refused(openai.BadRequestError,
            lambda: ask([{"role": "user", "content": "something else"}], extra_headers=key))
assert e.code == "idempotency_key_reused", e.body

# A picture reaches the model; a part that is no picture is refused, naming it.
picture = ask([{"role": "user", "content": [
    {"type": "text", "text": "what is this picture?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG}},
]}])
assert text(picture) == "echo: what is this picture?", picture
e = refused(openai.BadRequestError, lambda: ask([{"role": "user", "content": [
    {"type": "text", "text": "and this?"},
    {"type": "image_url", "image_url": {"url": "data:text/plain;base64,aGVsbG8="}},
]}]))
assert (e.code, e.param) == ("invalid_image_url", "messages[0].content[1].image_url"), e.body

# The model list has the aliases; an alias answers; an unknown model is 404.
ids = [m.id for m in client.models.list().data]
assert ids == ["ferroclaw", "fast"], ids
assert client.models.retrieve("fast").id == "fast"
assert text(ask([{"role": "user", "content": "quickly"}], model="fast")) == "echo: quickly"
e = refused(openai.NotFoundError, lambda: ask([{"role": "user", "content": "hi"}], model="gpt-4o"))
assert (e.code, e.param) == ("model_not_found", "model"), e.body
refused(openai.NotFoundError, lambda: client.models.retrieve("gpt-4o"))

# n > 1 is refused, and so is a path the API does not have.
e = refused(openai.BadRequestError, lambda: ask([{"role": "user", "content": "hi"}], n=2))
assert (e.param, e.code) == ("n", "unsupported_value"), e.body
e = refused(openai.NotFoundError, lambda: client.embeddings.create(model="ferroclaw", input="x"))
assert "Unknown request URL" in e.body["message"], e.body
print("ok")
