"""``plait graph run|runs|inspect|resume|cancel|raise-budget``: durable runs from the CLI.

``run`` and ``resume`` host the runtime in this process until the run is done, failed or
waiting on a person; ``plait worker`` hosts it for every run on the mesh.
"""

from __future__ import annotations

import getpass
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from plait.actors import LocalRuntime, tune_gc_for_serving
from plait.cli._common import MeshOption, console, err_console, fail, print_json, run
from plait.cli.graph import graph_app
from plait.decisions import Human
from plait.errors import AuditChainBroken
from plait.graphs.store import get_graph
from plait.mesh import Mesh, open_mesh
from plait.runs import RunHost, RunRecord, Runs
from plait.tools.profiles import get_profile

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        envvar="PLAIT_MODEL",
        show_default=False,
        help="Model for every agent: openai:MODEL, anthropic:MODEL or scripted:PATH "
        "(default: PLAIT_MODEL, else the agent profile's model).",
    ),
]


def human() -> Human:
    """The person at this terminal (``PLAIT_USER``, else the login name)."""
    return Human(os.environ.get("PLAIT_USER") or getpass.getuser())


@asynccontextmanager
async def hosting(mesh: Mesh) -> AsyncIterator[LocalRuntime]:
    """Host the actor runtime (and run owners) in this process for the block."""
    tune_gc_for_serving()
    runtime = LocalRuntime(mesh)
    RunHost(runtime)  # installed before the first message can arrive
    async with runtime:
        yield runtime


def _progress_printer(enabled: bool) -> Any:
    def begin(node: Any, visit: Any) -> None:
        err_console.print(f"  [dim]…[/] {node} (visit {visit})", highlight=False)

    def show(event: dict[str, Any]) -> None:
        if not enabled:
            return
        if event.get("node") is not None:
            done(event)
        for visit in event.get("started") or ():
            begin(visit.get("node"), visit.get("visit"))

    def done(event: dict[str, Any]) -> None:
        node, visit, status = event["node"], event.get("visit"), event.get("status")
        if status == "running" and "at" in event:  # a visit claimed by its own wake
            begin(node, visit)
            return
        elapsed = event.get("elapsed")
        mark = "[red]✗[/]" if event.get("error") else "[green]✓[/]"
        verdict = f" → {event['verdict']}" if event.get("verdict") else ""
        took = f" {elapsed:.2f}s" if isinstance(elapsed, float) else ""
        visit_text = f" (visit {visit})" if visit else ""
        err_console.print(
            f"  {mark} {node}{visit_text}{verdict}{took} [dim]{status}[/]", highlight=False
        )

    return show


async def _report(runs: Runs, rec: RunRecord, as_json: bool) -> None:
    waiting = None
    # A run parked on a subgraph's child run shows what that child asks a person.
    asking = await runs.asks(rec)
    asked = asking[1] if asking is not None else rec.waiting
    if asked is not None:
        waiting = {"node": asked.node, "ask": asked.ask, "decision_id": asked.decision_id}
    output = await runs.output(rec)
    if as_json:
        print_json(
            {
                "run_id": rec.run_id,
                "status": rec.status,
                "waiting": waiting,
                "output": output,
                "ended_detail": rec.ended_detail,
            }
        )
        return
    console.print(
        f"run [bold]{rec.run_id}[/] {rec.status}"
        + (f" ({rec.ended_detail})" if rec.ended_detail else ""),
        highlight=False,
    )
    if rec.error:
        console.print(f"[red]error:[/] {rec.error}", highlight=False)
    if asked is not None:
        asker = asking[0].run_id if asking is not None else rec.run_id
        where = f" in subgraph run {asker}" if asker != rec.run_id else ""
        console.print(f"[yellow]waiting on {asked.node}{where}:[/] {asked.ask}", highlight=False)
        if asked.kind == "budget":
            console.print(f"raise it with: plait graph raise-budget {asker} --steps N")
        else:
            console.print(f"answer with: plait graph resume {rec.run_id} ANSWER", highlight=False)
    if rec.status == "done":
        console.print(output if isinstance(output, str) else repr(output), highlight=False)


@graph_app.command("run")
def run_graph_cmd(
    agent: str,
    name: str,
    input: Annotated[str, typer.Option("--input", help="The run's input ({{input}}).")] = "",
    model: ModelOption = None,
    version: Annotated[int | None, typer.Option("--version", help="Graph version.")] = None,
    as_json: JsonOption = False,
    detach: Annotated[bool, typer.Option("--detach", help="Only enqueue the run.")] = False,
    mesh: MeshOption = None,
) -> None:
    """Start a durable run of a stored graph and follow it until it settles."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            stored = await get_graph(m, agent, name, version)
            if model is None and (await get_profile(m, stored.agent)).model is None:
                fail(
                    f"agent {stored.agent!r} has no model: pass --model (e.g. "
                    "openai:gpt-4o-mini or scripted:path.yaml) or set PLAIT_MODEL"
                )
            runs = Runs(m)
            rec = await runs.start(agent, name, input, version=version, model=model)
            if detach:
                if as_json:
                    print_json(
                        {
                            "run_id": rec.run_id,
                            "status": rec.status,
                            "waiting": None,
                            "output": None,
                            "ended_detail": None,
                        }
                    )
                else:
                    console.print(f"run {rec.run_id} enqueued", highlight=False)
                return
            if not as_json:
                err_console.print(
                    f"run [bold]{rec.run_id}[/] of {agent}/{name} v{rec.graph.version}",
                    highlight=False,
                )
            async with hosting(m):
                rec = await runs.wait(rec.run_id, on_progress=_progress_printer(not as_json))
            await _report(runs, rec, as_json)

    run(main)


@graph_app.command("resume")
def resume_cmd(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    answer: Annotated[str, typer.Argument(metavar="ANSWER")],
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Answer what a waiting run asks, then follow it until it settles again."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            runs = Runs(m)
            before = await runs.resume(run_id, answer, by=human())
            async with hosting(m):
                rec = await runs.wait(
                    run_id, since=before, on_progress=_progress_printer(not as_json)
                )
            await _report(runs, rec, as_json)

    run(main)


@graph_app.command("raise-budget")
def raise_budget_cmd(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    steps: Annotated[int | None, typer.Option("--steps", min=1, help="More steps.")] = None,
    tokens: Annotated[int | None, typer.Option("--tokens", min=1, help="More tokens.")] = None,
    dollars: Annotated[
        float | None, typer.Option("--dollars", min=0.0, help="More dollars.")
    ] = None,
    wall_seconds: Annotated[
        float | None, typer.Option("--wall-seconds", min=0.0, help="More seconds.")
    ] = None,
    retries: Annotated[int | None, typer.Option("--retries", min=1, help="More retries.")] = None,
    mesh: MeshOption = None,
) -> None:
    """Raise a run's budget (a person only); a run parked on its budget goes on."""
    extra = {
        name: float(amount)
        for name, amount in (
            ("steps", steps),
            ("tokens", tokens),
            ("dollars", dollars),
            ("wall_seconds", wall_seconds),
            ("retries", retries),
        )
        if amount is not None
    }
    if not extra:
        fail("give at least one of --steps, --tokens, --dollars, --wall-seconds, --retries")

    async def main() -> None:
        async with open_mesh(mesh) as m:
            rec = await Runs(m).raise_budget(run_id, extra, by=human())
        raised = ", ".join(f"{name} +{amount:g}" for name, amount in extra.items())
        console.print(f"run {rec.run_id} {rec.status}: budget raised ({raised})", highlight=False)

    run(main)


@graph_app.command("cancel")
def cancel_cmd(
    run_id: Annotated[str, typer.Argument(metavar="RUN")], mesh: MeshOption = None
) -> None:
    """Cancel a run: nothing of it runs again."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            rec = await Runs(m).cancel(run_id, by=human())
        console.print(f"run {rec.run_id} {rec.status}", highlight=False)

    run(main)


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


@graph_app.command("runs")
def runs_cmd(
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's runs.")] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only runs in this status (running, waiting_human, done...)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
    mesh: MeshOption = None,
) -> None:
    """List runs, newest first, including parked ones."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            found = await Runs(m).list(agent=agent, status=status)
        if as_json:
            print_json(
                [
                    {
                        "run_id": s.run_id,
                        "agent": s.agent,
                        "graph": s.graph,
                        "version": s.version,
                        "status": s.status,
                        "created_at": s.created_at,
                        "updated_at": s.updated_at,
                    }
                    for s in found
                ]
            )
            return
        table = Table("run", "agent", "graph", "version", "status", "created", "updated")
        for s in found:
            table.add_row(
                s.run_id,
                s.agent,
                s.graph,
                str(s.version),
                s.status,
                _when(s.created_at),
                _when(s.updated_at),
            )
        console.print(table)

    run(main)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_age(text: str) -> float:
    """Seconds in an age like ``90s``, ``45m``, ``12h``, ``30d`` or ``2w``.

    Raises:
        typer.BadParameter: it is not a positive number followed by s, m, h, d or w.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if match is None:
        raise typer.BadParameter(
            f"{text!r} is not an age: give a number and a unit, e.g. 90s, 45m, 12h, 30d, 2w"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


@graph_app.command("prune")
def prune_cmd(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="Delete runs that ended longer ago than this (90s, 45m, 12h, 30d, 2w).",
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would be deleted.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
    mesh: MeshOption = None,
) -> None:
    """Delete finished runs (done, failed, cancelled) and everything they stored."""
    cutoff = time.time() - parse_age(older_than)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            found = await Runs(m).prune(ended_before=cutoff, dry_run=dry_run)
        if as_json:
            print_json(
                [{"run_id": s.run_id, "status": s.status, "ended_at": s.updated_at} for s in found]
            )
            return
        verb = "would delete" if dry_run else "deleted"
        console.print(f"{verb} {len(found)} finished run(s)", highlight=False)
        for s in found:
            console.print(f"  {s.run_id} {s.status} {_when(s.updated_at)}", highlight=False)

    run(main)


@graph_app.command("inspect")
def inspect_cmd(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    as_json: JsonOption = False,
    verify: Annotated[bool, typer.Option("--verify", help="Verify the audit chain.")] = False,
    mesh: MeshOption = None,
) -> None:
    """Show a run's full history (committed visits in commit order)."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            runs = Runs(m)
            rec = await runs.get(run_id)
            output = await runs.output(rec)
            broken: AuditChainBroken | None = None
            verified = None
            if verify:
                try:
                    verified = await runs.verify(run_id)
                except AuditChainBroken as exc:
                    broken = exc
            try:
                trajectory = await runs.trajectory(run_id)
            except AuditChainBroken:
                if broken is None:
                    raise
                trajectory = []  # the chain's own report says what is wrong with it
        if as_json:
            body: dict[str, Any] = {
                "run_id": rec.run_id,
                "status": rec.status,
                "graph": rec.graph.model_dump(),
                "output": output,
                "ended_detail": rec.ended_detail,
                "trajectory": trajectory,
            }
            if verify:
                body["verified"] = broken is None
                body["verify_error"] = str(broken) if broken else None
            print_json(body)
        else:
            g = rec.graph
            console.print(
                f"run [bold]{rec.run_id}[/] {rec.status} — {g.agent}/{g.name} "
                f"v{g.version} (sha256 {g.sha256[:12]})",
                highlight=False,
            )
            for step in trajectory:
                flag = f" → {step['verdict']}" if step["verdict"] else ""
                err = f" [red]{step['error']}[/]" if step["error"] else ""
                console.print(
                    f"  {step['node']} (visit {step['visit']}){flag}{err}", highlight=False
                )
            if verified is not None:
                console.print(f"[green]audit chain verified[/]: {verified} events")
        if broken is not None:
            fail(str(broken))

    run(main)
