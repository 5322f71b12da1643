"""The scripted model: every rule field, rule order, rounds, errors and rule files."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from plait.errors import ConfigError, ScriptedModelError
from plait.models import CallContext, Message, ScriptedModel, ToolCall, Usage, load_model
from plait.models.scripted import MAX_SCRIPT_BYTES, confine_scripted, round_of
from plait.tools.spec import ToolSpec

pytestmark = pytest.mark.anyio


def ctx(node: str = "draft", visit: int = 1, prompt: str = "", **kw: Any) -> CallContext:
    return CallContext(node=node, visit=visit, prompt=prompt, **kw)


def ask(prompt: str) -> list[Message]:
    return [Message(role="system", content="be brief"), Message(role="user", content=prompt)]


async def test_node_rule_answers_with_text_and_a_word_count_usage() -> None:
    model = ScriptedModel(rules=[{"node": "draft", "text": "a short draft"}])
    reply = await model.complete(ask("write two words"), context=ctx("draft"))
    assert reply.text == "a short draft"
    assert reply.tool_calls == []
    assert reply.usage == Usage(input_tokens=5, output_tokens=3)
    assert (reply.model, reply.stop_reason) == ("scripted", "stop")


async def test_rules_are_tried_in_order_and_first_match_wins() -> None:
    model = ScriptedModel(
        rules=[
            {"node": "verify", "visit": 2, "text": "pass"},
            {"node": "verify", "text": "fail"},
            {"text": "anything else"},
            {"node": "other", "text": "never reached"},
        ]
    )
    assert (await model.complete(ask("x"), context=ctx("verify", 1))).text == "fail"
    assert (await model.complete(ask("x"), context=ctx("verify", 2))).text == "pass"
    assert (await model.complete(ask("x"), context=ctx("verify", 3))).text == "fail"
    assert (await model.complete(ask("x"), context=ctx("other"))).text == "anything else"


async def test_match_is_a_substring_of_the_rendered_prompt() -> None:
    model = ScriptedModel(
        rules=[{"match": "unsourced", "text": "fail"}, {"match": "tidy", "text": "pass"}]
    )
    prompt = "Review for unsourced claims: ..."
    assert (await model.complete(ask(prompt), context=ctx(prompt=prompt))).text == "fail"
    with pytest.raises(ScriptedModelError):
        # match reads context.prompt, not the messages
        await model.complete(ask("tidy"), context=ctx(prompt="something"))
    # without a rendered prompt in the context, the last user message stands in
    assert (await model.complete(ask("keep it tidy"), context=ctx())).text == "pass"


async def test_fan_out_instances_match_their_target_node_or_their_own_id() -> None:
    model = ScriptedModel(
        rules=[{"node": "fetcher[1]", "text": "second"}, {"node": "fetcher", "text": "any"}]
    )
    first = ctx("fetcher", instance="fetcher[0]")
    second = ctx("fetcher", instance="fetcher[1]")
    assert (await model.complete(ask("x"), context=first)).text == "any"
    assert (await model.complete(ask("x"), context=second)).text == "second"


async def test_tool_loop_uses_rounds_within_one_visit() -> None:
    model = ScriptedModel(
        rules=[
            {
                "node": "research",
                "round": 1,
                "tool_calls": [{"name": "search", "arguments": {"q": "plait"}}],
            },
            {"node": "research", "round": 2, "text": "found it"},
        ]
    )
    tools = [ToolSpec(name="search")]
    messages = ask("look it up")
    first = await model.complete(messages, tools=tools, context=ctx("research"))
    assert first.stop_reason == "tool_calls"
    [call] = first.tool_calls
    assert (call.name, call.arguments, call.id) == (
        "search",
        {"q": "plait"},
        "call_research_v1_r1_0",
    )
    messages += [
        Message(role="assistant", tool_calls=first.tool_calls),
        Message(role="tool", tool_call_id=call.id, content="3 results"),
    ]
    second = await model.complete(messages, tools=tools, context=ctx("research"))
    assert (second.text, second.tool_calls) == ("found it", [])
    assert [c.round for c in model.calls] == [1, 2]


def test_round_counts_assistant_messages_after_the_last_user_message() -> None:
    call = ToolCall(id="c", name="t")
    assistant = Message(role="assistant", tool_calls=[call])
    tool = Message(role="tool", tool_call_id="c", content="r")
    assert round_of([]) == 1
    assert round_of(ask("q")) == 1
    assert round_of([*ask("q"), assistant, tool]) == 2
    assert round_of([*ask("q"), assistant, tool, assistant, tool]) == 3
    assert round_of([*ask("q"), assistant, tool, Message(role="user", content="again")]) == 1


async def test_explicit_tool_call_id_usage_and_delay() -> None:
    model = ScriptedModel(
        rules=[
            {
                "tool_calls": [{"name": "fetch", "arguments": {"url": "u"}, "id": "call_7"}],
                "usage": {"input_tokens": 100, "output_tokens": 7},
                "delay_ms": 60,
            }
        ]
    )
    started = time.monotonic()
    reply = await model.complete(ask("x"), context=ctx())
    assert time.monotonic() - started >= 0.06
    assert reply.tool_calls == [ToolCall(id="call_7", name="fetch", arguments={"url": "u"})]
    assert reply.usage == Usage(input_tokens=100, output_tokens=7)


async def test_error_rule_raises_with_its_message() -> None:
    model = ScriptedModel(rules=[{"node": "flaky", "error": "provider melted"}, {"text": "ok"}])
    with pytest.raises(ScriptedModelError, match="provider melted"):
        await model.complete(ask("x"), context=ctx("flaky"))
    assert (await model.complete(ask("x"), context=ctx("calm"))).text == "ok"


async def test_no_matching_rule_names_node_visit_and_instance() -> None:
    model = ScriptedModel(rules=[{"node": "draft", "visit": 1, "text": "x"}])
    with pytest.raises(ScriptedModelError) as info:
        await model.complete(ask("x"), context=ctx("fetcher", 3, instance="fetcher[2]"))
    message = str(info.value)
    assert "'fetcher'" in message and "visit 3" in message and "'fetcher[2]'" in message


async def test_every_call_is_recorded_even_a_failing_one() -> None:
    model = ScriptedModel(rules=[{"node": "a", "text": "ok"}])
    schema = {"type": "object"}
    context = ctx("a", 2, prompt="p", run_id="run_1")
    await model.complete(
        ask("p"), tools=[ToolSpec(name="t")], context=context, response_format=schema
    )
    with pytest.raises(ScriptedModelError):
        await model.complete(ask("q"), context=ctx("b"))
    first, second = model.calls
    assert first.context == context
    assert [m.content for m in first.messages] == ["be brief", "p"]
    assert [t.name for t in first.tools] == ["t"]
    assert first.response_format == schema
    assert second.context.node == "b"


def test_bad_python_rule_names_its_index_and_field() -> None:
    with pytest.raises(ConfigError, match=r"<rules>: rule 1: nod: Extra inputs"):
        ScriptedModel(rules=[{"text": "ok"}, {"nod": "draft"}])
    with pytest.raises(ConfigError, match=r"rule 0: visit: Input should be greater"):
        ScriptedModel(rules=[{"visit": 0}])
    with pytest.raises(ConfigError, match=r"use from_file\(\)"):
        ScriptedModel("script.yaml")  # type: ignore[arg-type]


RULES = [
    {"node": "draft", "text": "from a file"},
    {"node": "verify", "round": 1, "tool_calls": [{"name": "check"}]},
]


@pytest.mark.parametrize("shape", ["mapping", "list"])
@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
async def test_rule_files_in_json_and_yaml_both_shapes(
    tmp_path: Path, suffix: str, shape: str
) -> None:
    data: Any = {"rules": RULES} if shape == "mapping" else RULES
    path = tmp_path / f"script{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    model = ScriptedModel.from_file(path)
    assert model.spec == f"scripted:{path}"
    assert (await model.complete(ask("x"), context=ctx("draft"))).text == "from a file"
    reply = await model.complete(ask("x"), context=ctx("verify"))
    assert [c.name for c in reply.tool_calls] == ["check"]


async def test_load_model_reads_a_scripted_spec(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text("- text: hello\n")
    model = load_model(f"scripted:{path}")
    assert isinstance(model, ScriptedModel)
    assert (await model.complete(ask("x"), context=ctx())).text == "hello"


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("rules:\n  - node: draft\n    txt: typo\n", r"script.yaml: rule 0: txt: Extra inputs"),
        ("- text: ok\n- [not, a, rule]\n", r"script.yaml: rule 1: expected a mapping"),
        ("rules: []\nmodel: x\n", r"unknown top-level field\(s\) \['model'\]"),
        ("just a string\n", r"expected a list of rules"),
        ("rules: [unclosed\n", r"not valid JSON or YAML"),
    ],
)
def test_bad_rule_files_raise_config_errors_naming_the_file(
    tmp_path: Path, content: str, error: str
) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=error):
        ScriptedModel.from_file(path)


def test_missing_rule_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the scripted model file"):
        ScriptedModel.from_file(tmp_path / "absent.json")


def test_a_rule_file_is_a_regular_file_under_the_size_cap(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="/dev/zero is not a regular file"):
        ScriptedModel.from_file("/dev/zero")
    big = tmp_path / "big.yaml"
    big.write_text("- text: ok\n" + "#" * MAX_SCRIPT_BYTES)
    with pytest.raises(ConfigError, match=f"over the limit of {MAX_SCRIPT_BYTES} bytes"):
        ScriptedModel.from_file(big)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("passwd.yaml", "root:x:0:0:root:/root:/bin/bash\nsecret: [line: two\n"),
        ("passwd.json", '{"root": "x:0:0:secret-line"\n'),
        ("digits.json", "[" + "7" * 5000 + "]"),
    ],
)
def test_a_rule_file_that_does_not_parse_is_not_echoed(
    tmp_path: Path, name: str, content: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.from_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: not ")
    said = message.removeprefix(str(path))
    assert "secret" not in said and "root" not in said and "777" not in said


def test_a_caller_names_scripted_files_only_under_the_configured_folder(tmp_path: Path) -> None:
    root = (tmp_path / "scripts").resolve()
    root.mkdir()
    (root / "ok.yaml").write_text("- text: ok\n")
    (tmp_path / "outside.yaml").write_text("- text: ok\n")
    (root / "link.yaml").symlink_to(tmp_path / "outside.yaml")
    assert confine_scripted("openai:gpt-4o-mini", None) == "openai:gpt-4o-mini"
    assert confine_scripted(None, None) is None
    with pytest.raises(ConfigError, match="PLAIT_SCRIPTED_DIR names, and it is unset"):
        confine_scripted("scripted:/dev/zero", None)
    assert confine_scripted("scripted:ok.yaml", root) == f"scripted:{root / 'ok.yaml'}"
    assert confine_scripted(f"scripted:{root}/ok.yaml", root) == f"scripted:{root / 'ok.yaml'}"
    for outside in ("/dev/zero", "/etc/passwd", "../outside.yaml", "link.yaml", ""):
        with pytest.raises(ConfigError, match="is outside the server's PLAIT_SCRIPTED_DIR"):
            confine_scripted(f"scripted:{outside}", root)
