#!/usr/bin/env python3
"""End-to-end test of `plansmith serve` with the official `openai` Python client.

Usage: e2e_openai.py --base-url http://127.0.0.1:PORT/v1 --api-key KEY --model ID

Driven by crates/plansmith-cli/tests/serve_openai.rs, which trains a tiny planner, starts the
server and runs this script. Exits 0 when every check passes, 1 when one fails, and 2 (loudly)
when the `openai` package is missing: install it with `pip install -r scripts/requirements-ci.txt`.
"""

import argparse
import json
import os
import sys
import traceback

try:
    import openai
except ImportError as e:  # never skip silently
    sys.stderr.write(
        "e2e_openai.py: FAILED: the `openai` Python package is not importable ({}).\n"
        "Install it: python3 -m pip install -r scripts/requirements-ci.txt\n".format(e)
    )
    sys.exit(2)

WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, copied from the request."},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Send a text message.",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
                "required": ["to", "text"],
            },
        },
    },
]
NAMES = {t["function"]["name"] for t in WEATHER_TOOLS}
REQUESTS = ["what is the weather in Paris", "text Bob that I am running late", "open safari"]


def user(text):
    return [{"role": "user", "content": text}]


def check_calls(choice, expect_call=None, only=None, at_most=None):
    """Wire-format checks on one choice; returns [(name, args)]."""
    msg = choice.message
    assert msg.role == "assistant"
    calls = msg.tool_calls or []
    if expect_call is True:
        assert calls, "expected a tool call, got content {!r}".format(msg.content)
    if expect_call is False:
        assert not calls, "expected no tool call, got {}".format(calls)
    if calls:
        assert choice.finish_reason == "tool_calls", choice.finish_reason
    else:
        assert choice.finish_reason == "stop", choice.finish_reason
        assert msg.content, "a no-call answer carries content"
    out = []
    for i, tc in enumerate(calls):
        assert tc.id == "call_{}".format(i), tc.id
        assert tc.type == "function"
        assert tc.function.name in (only or NAMES), tc.function.name
        args = json.loads(tc.function.arguments)
        assert isinstance(args, dict), args
        out.append((tc.function.name, args))
    if at_most is not None:
        assert len(out) <= at_most, out
    return out


def test_models(client, model):
    ids = [m.id for m in client.models.list().data]
    assert model in ids, ids


def test_tool_choice_variants(client, model):
    for text in REQUESTS:
        r = client.chat.completions.create(model=model, messages=user(text), tools=WEATHER_TOOLS, tool_choice="none")
        check_calls(r.choices[0], expect_call=False)
        r = client.chat.completions.create(model=model, messages=user(text), tools=WEATHER_TOOLS, tool_choice="required")
        check_calls(r.choices[0], expect_call=True)
        r = client.chat.completions.create(
            model=model,
            messages=user(text),
            tools=WEATHER_TOOLS,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        )
        calls = check_calls(r.choices[0], expect_call=True, only={"get_weather"})
        assert all("city" in a for _, a in calls), calls
        r = client.chat.completions.create(model=model, messages=user(text), tools=WEATHER_TOOLS)
        check_calls(r.choices[0])
        ext = r.model_extra.get("plansmith") if r.model_extra else None
        assert ext and ext["source"] in ("model", "teacher", "none") and "confidence" in ext, ext


def test_parallel_calls(client, model):
    text = "weather in Oslo and then text Ann hello"
    r = client.chat.completions.create(
        model=model, messages=user(text), tools=WEATHER_TOOLS, tool_choice="required", parallel_tool_calls=True
    )
    calls = check_calls(r.choices[0], expect_call=True)
    assert len(calls) >= 1
    r = client.chat.completions.create(
        model=model, messages=user(text), tools=WEATHER_TOOLS, tool_choice="required", parallel_tool_calls=False
    )
    assert len(check_calls(r.choices[0], expect_call=True, at_most=1)) == 1


def test_streaming_reassembly(client, model):
    for text in REQUESTS:
        for tool_choice in ("auto", "required", "none"):
            kw = dict(model=model, messages=user(text), tools=WEATHER_TOOLS, tool_choice=tool_choice)
            whole = client.chat.completions.create(**kw).choices[0]
            content, calls, finish = "", {}, None
            for chunk in client.chat.completions.create(stream=True, **kw):
                assert chunk.object == "chat.completion.chunk"
                for ch in chunk.choices:
                    d = ch.delta
                    if d.content:
                        content += d.content
                    for tc in d.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function and tc.function.name:
                            slot["name"] = tc.function.name
                        if tc.function and tc.function.arguments:
                            slot["arguments"] += tc.function.arguments
                    if ch.finish_reason:
                        finish = ch.finish_reason
            got = [(calls[i]["id"], calls[i]["name"], calls[i]["arguments"]) for i in sorted(calls)]
            want = [(t.id, t.function.name, t.function.arguments) for t in whole.message.tool_calls or []]
            assert got == want, (text, tool_choice, got, want)
            assert finish == whole.finish_reason, (finish, whole.finish_reason)
            assert (content or None) == whole.message.content, (content, whole.message.content)


def test_no_call_answers(client, model):
    r = client.chat.completions.create(model=model, messages=user("open safari"), tools=WEATHER_TOOLS, tool_choice="none")
    choice = r.choices[0]
    assert choice.message.tool_calls in (None, [])
    assert choice.finish_reason == "stop"
    assert isinstance(choice.message.content, str) and choice.message.content
    # Tool results after the user turn: that turn is done, no call again.
    r = client.chat.completions.create(
        model=model,
        tools=WEATHER_TOOLS,
        messages=[
            {"role": "user", "content": "what is the weather in Paris"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
        ],
    )
    assert r.choices[0].finish_reason == "stop" and not r.choices[0].message.tool_calls


def test_extensions_and_vendor_fields(client, model):
    r = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": [{"type": "text", "text": "click the Save button"}]}],
        extra_body={"cache_prompt": True, "plansmith": {"entities": [{"type": "ui_element", "label": "Save"}]}},
        seed=7,
        temperature=0.2,
        max_tokens=64,
    )
    check_calls(r.choices[0], only=None if not r.choices[0].message.tool_calls else {t.function.name for t in r.choices[0].message.tool_calls})
    assert r.model_extra["plansmith"]["escalated"] in (True, False)


def expect_bad_request(fragment, **kw):
    try:
        kw["client"].chat.completions.create(**{k: v for k, v in kw.items() if k != "client"})
    except openai.BadRequestError as e:
        assert e.status_code == 400
        assert fragment in e.message, (fragment, e.message)
        assert isinstance(e.body, dict) and fragment in e.body.get("message", ""), e.body
        return
    raise AssertionError("expected openai.BadRequestError containing {!r}".format(fragment))


def test_errors(client, model):
    base = dict(client=client, model=model, messages=user("what is the weather in Paris"))
    expect_bad_request("`n` = 2", n=2, **base)
    expect_bad_request(
        "launch_rocket", tools=WEATHER_TOOLS, tool_choice={"type": "function", "function": {"name": "launch_rocket"}}, **base
    )
    bad_tools = [{"type": "function", "function": {"name": "bad name!", "parameters": {"type": "object"}}}]
    expect_bad_request("tools[0]", tools=bad_tools, **base)
    expect_bad_request("logprobs", logprobs=True, **base)
    expect_bad_request("response_format", response_format={"type": "json_object"}, **base)
    expect_bad_request("`messages` is empty", client=client, model=model, messages=[])


def test_auth(client, model, base_url):
    bad = openai.OpenAI(base_url=base_url, api_key="wrong-key", max_retries=0)
    try:
        bad.models.list()
    except openai.AuthenticationError as e:
        assert e.status_code == 401
        assert "invalid API key" in e.message, e.message
    else:
        raise AssertionError("expected openai.AuthenticationError")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--api-key", default="unused")
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    # Talk to the local server directly, whatever proxy the environment names.
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=60)
    tests = [
        ("models", lambda: test_models(client, args.model)),
        ("tool_choice variants", lambda: test_tool_choice_variants(client, args.model)),
        ("parallel calls", lambda: test_parallel_calls(client, args.model)),
        ("streaming reassembly", lambda: test_streaming_reassembly(client, args.model)),
        ("no-call answers", lambda: test_no_call_answers(client, args.model)),
        ("extensions and vendor fields", lambda: test_extensions_and_vendor_fields(client, args.model)),
        ("errors as openai.BadRequestError", lambda: test_errors(client, args.model)),
        ("auth", lambda: test_auth(client, args.model, args.base_url)),
    ]
    failed = 0
    for name, fn in tests:
        try:
            fn()
            print("ok      {}".format(name))
        except Exception:  # report every failure, then fail
            failed += 1
            print("FAILED  {}".format(name))
            traceback.print_exc(file=sys.stdout)
    print("openai {}: {} passed, {} failed".format(openai.__version__, len(tests) - failed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
