"""Node visits per second of an in-session revise loop, beside LangGraph in the same run.

The graph is three nodes: ``draft -> verify``, and ``verify`` sends the flow back to
``draft`` until it passes on round ``K``, then on to ``publish``: ``2K + 1`` visits per
run. plait runs it with :func:`plait.graphs.run_graph` and an instant scripted model
(no delay, fixed usage), an agent with no tools and an empty tool registry, so what is
measured is the runner: engine transitions, templates, the verdict, the trajectory.
LangGraph runs the same cycle as a ``StateGraph`` with three nodes and a conditional
edge, no checkpointer, each node rendering its prompt. ``ratio`` is value / baseline.

Run: ``python bench/engine.py [--json] [--seconds 1.0] [--rounds K]``.
"""

from __future__ import annotations

import asyncio
import operator
import sys
from typing import Annotated, Any, TypedDict

from _common import Figure, Measure, best_of, report

from plait.graphs import GraphSpec, load_graph, run_graph
from plait.models import ScriptedModel
from plait.profiles import AgentProfile
from plait.tools import ToolRegistry

BENCH = "engine"
UNIT = "visits/s"
TARGET = 4.0
DEFAULT_ROUNDS = 10

REVISE: dict[str, Any] = {
    "name": "revise",
    "entry": "draft",
    "budget": 100,
    "nodes": [
        {"id": "draft", "type": "agent", "next": "verify",
         "prompt": "Write about {{input}}. Earlier critique: {{verify?}}"},
        {"id": "verify", "type": "verifier", "prompt": "Review:\n\n{{draft}}",
         "verdicts": {"pass": "publish", "fail": "draft"}},
        {"id": "publish", "type": "agent", "prompt": "Format:\n\n{{draft}}"},
    ],
}  # fmt: skip


def scripted(rounds: int) -> ScriptedModel:
    """Instant answers: the verifier fails until visit ``rounds``, then passes."""
    usage = {"input_tokens": 10, "output_tokens": 5}
    return ScriptedModel(
        [
            {"node": "verify", "visit": rounds, "text": "Sourced.\npass", "usage": usage},
            {"node": "verify", "text": "Cite the figure.\nfail", "usage": usage},
            {"node": "draft", "text": "Revenue rose 12%.", "usage": usage},
            {"node": "publish", "text": "FINAL", "usage": usage},
        ]
    )


async def plait_loop(spec: GraphSpec, rounds: int) -> Measure:
    """Visits per second of whole runs of the revise loop through ``run_graph``."""
    model = scripted(rounds)
    tools = ToolRegistry()
    profiles = {"assistant": AgentProfile(name="assistant")}
    visits = 2 * rounds + 1

    async def measure(seconds: float) -> float:
        loop = asyncio.get_running_loop()
        done, started = 0, loop.time()
        while loop.time() - started < seconds:
            model.calls.clear()  # the scripted model keeps every call; not part of the run
            run = await run_graph(spec, "Q3", model=model, tools=tools, profiles=profiles)
            assert run.status == "done" and len(run.trajectory) == visits, run.error
            done += visits
        return done / (loop.time() - started)

    return measure


class _State(TypedDict):
    topic: str
    draft: str
    critique: str
    verdict: str
    rounds: int
    output: str
    prompts: Annotated[list[str], operator.add]


def langgraph_loop(rounds: int) -> Measure:
    """Visits per second of the same cycle as a compiled LangGraph ``StateGraph``."""
    from _langgraph_loop import loop_graph
    from langchain_core.runnables import RunnableConfig

    def draft(state: _State) -> dict[str, Any]:
        prompt = f"Write about {state['topic']}. Earlier critique: {state['critique']}"
        return {"draft": "Revenue rose 12%.", "prompts": [prompt]}

    def verify(state: _State) -> dict[str, Any]:
        prompt = f"Review:\n\n{state['draft']}"
        n = state["rounds"] + 1
        reply = "Sourced.\npass" if n >= rounds else "Cite the figure.\nfail"
        verdict = reply.splitlines()[-1].strip()
        return {"critique": reply, "verdict": verdict, "rounds": n, "prompts": [prompt]}

    def publish(state: _State) -> dict[str, Any]:
        return {"output": "FINAL", "prompts": [f"Format:\n\n{state['draft']}"]}

    app = loop_graph(draft, verify, publish, _State).compile()
    visits = 2 * rounds + 1
    start: _State = {"topic": "Q3", "draft": "", "critique": "(no output yet)", "verdict": "",
                     "rounds": 0, "output": "", "prompts": []}  # fmt: skip
    config: RunnableConfig = {"recursion_limit": visits + 5}

    async def measure(seconds: float) -> float:
        loop = asyncio.get_running_loop()
        done, started = 0, loop.time()
        while loop.time() - started < seconds:
            final = app.invoke(start, config)
            assert final["output"] == "FINAL" and len(final["prompts"]) == visits
            done += visits
        return done / (loop.time() - started)

    return measure


async def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or BENCH).splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object per figure")
    parser.add_argument("--seconds", type=float, default=1.0, help="time per figure")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="K: verify rounds")
    args = parser.parse_args(argv)
    spec = load_graph(REVISE)
    value, baseline = await best_of(
        [await plait_loop(spec, args.rounds), langgraph_loop(args.rounds)], args.seconds, rounds=10
    )
    figure = Figure(
        BENCH,
        "engine_visits",
        value,
        UNIT,
        baseline,
        target=TARGET,
        note=f"LangGraph StateGraph, same {2 * args.rounds + 1}-visit cycle, no checkpointer",
    )
    report([figure], as_json=args.json, title="in-session node visits per second")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
