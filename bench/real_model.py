"""plait against a real small model: llama.cpp's OpenAI-compatible server on 127.0.0.1
serving SmolLM2-135M-Instruct or Gemma 3 270M (all from PyPI, see ``bench/_llama_server.py``).

Three workloads, each beside its baseline in alternating rounds (so both see the same
machine load):

- ``quickstart_runs_completed``: the quick-start graph (``examples/research_and_verify.json``:
  draft, verify, a person's answer given up front, publish; the agent without tools, see
  :data:`NO_TOOLS`) run ``--runs`` times with its
  verifier in ``verdict_mode: structured`` (the default for this model); baseline the same
  runs in ``last_line`` mode, what plait did before verdicts were structured.
- ``verdicts_valid``: of every verifier reply in those runs, how many held a valid verdict
  (structured; baseline last line), in percent.
- ``tool_calls_made``: an agent node offered one tool with ``tool_choice: required``, run
  ``--runs`` times: how many runs called it; baseline ``tool_choice: auto``.
- ``output_tokens_per_s``: output tokens over the seconds the model calls took, in the
  structured runs; baseline the last-line runs (the grammar's cost).

Without the server or the model installed it says what to install and exits 0.
Run: ``python bench/real_model.py [--json] [--runs 5] [--model smollm2|gemma3]
[--only quickstart]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import Figure, alternate, report
from _llama_server import MODEL_NAME, MODELS, find_llama, llama_server

from plait.graphs import run_graph
from plait.graphs.agent_loop import find_verdict
from plait.graphs.nodes.verifier import read_structured, verdict_schema
from plait.models import CallContext, Message, Model, ModelReply, OpenAIModel, ToolChoice
from plait.profiles import DEFAULT_ASSISTANT, AgentProfile
from plait.tools import ToolContext, ToolRegistry, ToolSpec, tool

QUICK_START = Path(__file__).resolve().parent.parent / "examples" / "research_and_verify.json"
ANSWER = "yes, ship it"
NO_TOOLS = DEFAULT_ASSISTANT.model_copy(update={"tools": []})
"""The quick-start's agent without its tools: each ``bash`` or ``http_get`` call the
model makes waits on a person's approval, which unattended runs cannot give."""


@dataclass
class Tally:
    """What the model did over some runs."""

    runs: int = 0
    completed: int = 0
    verdicts: int = 0
    valid: int = 0
    tool_runs: int = 0
    calls: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    endings: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)


class Counting(Model):
    """Passes calls to a model, timing them and checking the verifier's replies."""

    def __init__(self, inner: OpenAIModel, tally: Tally) -> None:
        self.inner, self.tally = inner, tally
        self.spec, self.structured_output = inner.spec, inner.structured_output

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        context: CallContext,
        response_format: dict[str, Any] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> ModelReply:
        started = time.perf_counter()
        reply = await self.inner.complete(
            messages,
            tools=tools,
            context=context,
            response_format=response_format,
            tool_choice=tool_choice,
        )
        self.tally.seconds += time.perf_counter() - started
        self.tally.output_tokens += reply.usage.output_tokens
        if context.node == "verify":
            self.tally.verdicts += 1
            self.tally.valid += _valid(reply.text, response_format is not None)
            self.tally.replies.append(reply.text[:300])
        return reply


def _valid(text: str, structured: bool) -> bool:
    verdicts = {"pass": "", "fail": ""}
    if not structured:
        return find_verdict(text, verdicts) is not None
    try:
        read_structured(text, verdict_schema(list(verdicts)))
    except Exception:
        return False
    return True


STEPS = 9
"""The quick-start runs' step budget: four drafts at most (a failed review loops back)."""


def quick_start(mode: str) -> dict[str, Any]:
    spec = {**json.loads(QUICK_START.read_text()), "budget": {"steps": STEPS}}
    for node in spec["nodes"]:
        if node["type"] == "verifier":
            node["verdict_mode"] = mode
    return spec


async def run_quick_start(model: OpenAIModel, mode: str, tally: Tally, cwd: Path) -> None:
    tally.runs += 1
    run = await run_graph(
        quick_start(mode),
        "the Q3 numbers",
        model=Counting(model, tally),
        answers={"review_human": ANSWER},
        profiles={"assistant": NO_TOOLS},
        cwd=cwd,
    )
    publish = [s for s in run.trajectory if s.node == "publish" and s.error is None]
    if run.status == "done" and publish:
        tally.completed += 1
    tally.endings.append(f"{run.status}/{run.ended_detail}: {(run.error or '')[:160]}")


def tool_graph(choice: str) -> dict[str, Any]:
    node = {
        "id": "ask",
        "type": "agent",
        "prompt": "What is the weather in Paris? Use the weather tool.",
        "tools": ["weather"],
        "tool_choice": choice,
        "max_rounds": 3,
    }
    return {"name": "weather", "entry": "ask", "nodes": [node]}


async def run_tool_node(model: OpenAIModel, choice: str, tally: Tally, cwd: Path) -> None:
    calls: list[dict[str, Any]] = []

    async def weather(args: dict[str, Any], ctx: ToolContext) -> Any:
        calls.append(args)
        return {"city": args.get("city"), "sky": "clear", "celsius": 21}

    params = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    registry = ToolRegistry(
        [
            tool(
                "weather",
                description="The weather now in a city.",
                parameters=params,
                read_only=True,
            )(weather)
        ]
    )
    profile = AgentProfile(name="assistant", tools=["weather"], system_prompt="Use your tools.")
    tally.runs += 1
    run = await run_graph(
        tool_graph(choice),
        model=Counting(model, tally),
        tools=registry,
        profiles={"assistant": profile},
        cwd=cwd,
    )
    tally.calls += len(calls)
    tally.tool_runs += bool(calls)
    tally.completed += run.status == "done"
    tally.endings.append(f"{run.status}/{run.ended_detail}: {(run.error or '')[:160]}")


async def measure(base_url: str, runs: int, only: str | None = None) -> list[Figure]:
    model = OpenAIModel(MODEL_NAME, base_url=base_url, max_tokens=400, timeout=300)
    structured, last_line, required, auto = Tally(), Tally(), Tally(), Tally()
    with tempfile.TemporaryDirectory(prefix="plait-real-model-") as tmp:
        cwd = Path(tmp)
        await alternate(
            runs,
            lambda: run_quick_start(model, "structured", structured, cwd),
            lambda: run_quick_start(model, "last_line", last_line, cwd),
        )
        if only != "quickstart":
            await alternate(
                runs,
                lambda: run_tool_node(model, "required", required, cwd),
                lambda: run_tool_node(model, "auto", auto, cwd),
            )
    await model.aclose()
    for name, tally in (("structured", structured), ("last_line", last_line),
                        ("required", required), ("auto", auto)):  # fmt: skip
        print(f"{name}: {json.dumps(tally.__dict__, default=str)}", file=sys.stderr)
    bench = "real_model"
    return [
        Figure(bench, "quickstart_runs_completed", structured.completed, f"runs of {runs}",
               last_line.completed, note="the same runs, verdicts on the last line"),
        Figure(bench, "verdicts_valid", 100 * structured.valid / max(structured.verdicts, 1),
               f"% of {structured.verdicts}",
               100 * last_line.valid / max(last_line.verdicts, 1),
               note=f"last line: % of {last_line.verdicts}"),
        Figure(bench, "tool_calls_made", required.tool_runs, f"runs of {runs}",
               auto.tool_runs, note="tool_choice auto"),
        Figure(bench, "output_tokens_per_s", _per_s(structured), "tokens/s",
               _per_s(last_line), note="the last-line runs' calls"),
    ]  # fmt: skip


def _per_s(tally: Tally) -> float:
    return tally.output_tokens / tally.seconds if tally.seconds else 0.0


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object per figure")
    parser.add_argument("--runs", type=int, default=5, help="runs of each workload")
    parser.add_argument("--model", choices=sorted(MODELS), default=None, help="the model")
    parser.add_argument("--only", choices=["quickstart"], default=None, help="one workload")
    args = parser.parse_args(argv)
    found = find_llama(args.model)
    if found.gguf is None:
        print(f"skipping real_model: {found.reason}", file=sys.stderr)
        return
    os.environ.pop("PLAIT_MODEL", None)
    with llama_server(found) as server:
        figures = asyncio.run(measure(server.base_url, args.runs, args.only))
    load = os.getloadavg()[0]
    title = f"real model ({found.model.name}), load {load:.2f}"
    report(figures, as_json=args.json, title=title)


if __name__ == "__main__":
    main()
