"""Scripted rules that refer to the call: ``{{prompt.path}}``, ``{{instance}}``, and a
``tool_result`` condition on the last tool result."""

from __future__ import annotations

import json

import pytest

from plait.models import CallContext, Message, ScriptedModel

pytestmark = pytest.mark.anyio

RULES = [
    {"node": "worker", "tool_result": "conflict", "text": "lost {{prompt.data.id}}"},
    {"node": "worker", "round": 2, "text": "won {{tool_result.version}}"},
    {
        "node": "worker",
        "round": 1,
        "tool_calls": [
            {
                "name": "mesh_put",
                "arguments": {
                    "key": "tasks/{{prompt.data.id}}",
                    "value": "{{instance}}",
                    "n": "{{prompt.data.n}}",
                },
            }
        ],
    },
]


async def test_arguments_take_values_from_the_prompt_and_the_caller() -> None:
    model = ScriptedModel(RULES)
    prompt = json.dumps({"topic": "tasks.new", "data": {"id": "t7", "n": 3}})
    ctx = CallContext(node="worker", instance="w2", prompt=prompt)
    reply = await model.complete([Message(role="user", content=prompt)], context=ctx)
    assert reply.tool_calls[0].arguments == {"key": "tasks/t7", "value": "w2", "n": 3}
    call = Message(role="assistant", tool_calls=reply.tool_calls)
    won = await model.complete(
        [
            Message(role="user", content=prompt),
            call,
            Message(role="tool", content='{"version": 1}'),
        ],
        context=ctx,
    )
    assert won.text == "won 1"
    lost = await model.complete(
        [
            Message(role="user", content=prompt),
            call,
            Message(role="tool", content="error: version conflict"),
        ],
        context=ctx,
    )
    assert lost.text == "lost t7"


async def test_other_braces_stay_as_they_are() -> None:
    model = ScriptedModel([{"text": "use {{input}} and {{draft?}}"}])
    reply = await model.complete([Message(role="user", content="x")], context=CallContext(node="n"))
    assert reply.text == "use {{input}} and {{draft?}}"


def _as_parsed(text: str) -> str:
    """What ``{{prompt}}`` renders to by its definition: the JSON value if it parses."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize(
    "prompt",
    [
        "plain words",
        "  \n",
        ' {"a": 1}',
        "\t[1, 2]",
        "42",
        "-7",
        '"quoted"',
        "true",
        "null",
        "NaN",
        "-Infinity",
        "nonsense",  # starts like null, is text
        "12 apples",  # starts like a number, is text
        "\ufeff{}",
        "\u00a0{}",  # whitespace to Python, not to JSON
    ],
)
async def test_a_prompt_is_its_json_value_when_it_parses_else_its_text(prompt: str) -> None:
    model = ScriptedModel([{"text": "p={{prompt}}"}])
    ctx = CallContext(node="n", prompt=prompt)
    reply = await model.complete([Message(role="user", content=prompt)], context=ctx)
    assert reply.text == "p=" + _as_parsed(prompt)


async def test_a_plain_reply_names_no_references_and_counts_words() -> None:
    model = ScriptedModel([{"text": "A draft."}])
    ctx = CallContext(node="draft", prompt="Draft it now")
    reply = await model.complete([Message(role="user", content="Draft it now")], context=ctx)
    assert (reply.text, reply.tool_calls, reply.stop_reason) == ("A draft.", [], "stop")
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (3, 2)
    assert model.calls[-1].messages[0].content == "Draft it now"
