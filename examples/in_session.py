"""Run the example graphs in this process, each with its scripted model.

``research_and_verify.json``: a draft, a verifier that sends it back once with a
critique, a human sign-off (the run parks until the answer "yes, ship it" resumes it),
then a final format pass. ``fan_out_map.json``: a researcher lists pages, one fetcher
instance runs per page (one of them fails and is collected), a fan-in joins them.

Run from the repository root: ``python examples/in_session.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from plait.graphs import GraphRun, resume_graph, run_graph
from plait.models import ScriptedModel

HERE = Path(__file__).resolve().parent
console = Console()


def show(title: str, run: GraphRun) -> None:
    """Print a run's trajectory and where it stands."""
    table = Table(title=title, title_justify="left")
    for column in ("#", "node", "visit", "verdict / error", "output"):
        table.add_column(column, overflow="fold")
    for n, step in enumerate(run.trajectory, 1):
        outcome = step.verdict or (f"[red]{escape(step.error)}[/]" if step.error else "")
        table.add_row(str(n), step.node, str(step.visit), outcome, escape(clip(step.output)))
    console.print(table)
    if run.waiting is not None:
        console.print(f"[yellow]{run.status}[/]: {run.waiting.kind} at {run.waiting.node!r}")
        console.print(Panel(escape(run.waiting.ask), title="asks", expand=False))
    else:
        console.print(f"[bold]{run.status}[/] ({run.ended_detail}), {run.usage.steps} steps")


def clip(value: Any, width: int = 60) -> str:
    """A value on one line of at most ``width`` characters (JSON unless a string)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


async def research_and_verify() -> None:
    model = ScriptedModel.from_file(HERE / "research_and_verify.model.yaml")
    run = await run_graph(HERE / "research_and_verify.json", "the Q3 numbers", model=model)
    show("research-and-verify: until the human sign-off", run)
    run = await resume_graph(run, "yes, ship it")
    show("research-and-verify: resumed with 'yes, ship it'", run)
    console.print(Panel(escape(str(run.output)), title="output", expand=False))


async def fan_out_map() -> None:
    model = ScriptedModel.from_file(HERE / "fan_out_map.model.yaml")
    run = await run_graph(HERE / "fan_out_map.json", "Q3 revenue", model=model)
    show("fan-out-map", run)
    console.print(Panel(escape(str(run.output)), title="output", expand=False))


async def main() -> None:
    await research_and_verify()
    console.rule()
    await fan_out_map()


if __name__ == "__main__":
    anyio.run(main)
