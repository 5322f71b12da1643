"""``plait graph run|resume|cancel|raise-budget|prune``: durable runs from the CLI.

The live progress display is :mod:`plait.cli.run_progress`; the read-only commands
(``runs``, ``inspect``, ``events``) are :mod:`plait.cli.run_views`.

``run`` and ``resume`` hand the run to a live ``plait worker``, or with none serve that
run (and its child runs) in this process until it is done, failed or waiting on a
person; ``plait worker`` serves every run on the mesh.
"""

from __future__ import annotations

import math
import re
import time
from typing import Annotated, Any

import typer
from rich.text import Text

from plait.actors import LocalRuntime
from plait.cli._common import (
    CreatingMeshOption,
    MeshOption,
    fail,
    print_json,
    run,
    text_arg,
)
from plait.cli._foreground import (
    INTERRUPTED,
    interruptible,
    serving_run,
    tools_nobody_offers,
    warn_if_unserved,
    who_offers,
)
from plait.cli._graph_app import graph_app
from plait.cli._ids import RUNS, RunArgument, resolve
from plait.cli._input import InputJsonOption, InputOption, run_input
from plait.cli._output import (
    JsonOption,
    clean,
    say,
    styled,
    utc_time,
)
from plait.cli._ray import ray_mesh
from plait.cli.run_progress import progress_printer as _progress_printer
from plait.decisions import Human
from plait.errors import ConfigError, NotPermitted
from plait.graphs.nodes import kind_of
from plait.graphs.store import get_graph
from plait.ids import RunId
from plait.mesh import Mesh, open_mesh
from plait.models import check_model_spec
from plait.profiles import get_profile
from plait.runs import RunRecord, Runs

RuntimeOption = Annotated[
    str,
    typer.Option(
        "--runtime",
        envvar="PLAIT_RUNTIME",
        help="local: serve the run here if no worker does; ray: hand it to Ray hosts "
        "(started if none serves the mesh; Ray's address from RAY_ADDRESS).",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        envvar="PLAIT_MODEL",
        metavar="SPEC",
        show_default=False,
        help="Model for every agent: openai:MODEL, anthropic:MODEL or scripted:PATH "
        "(default: PLAIT_MODEL, else the agent profile's model).",
    ),
]


def human() -> Human:
    """The person at this terminal: the OS user, ``PLAIT_USER`` only as a label.

    A process a tool started is refused with one line and exit 1 (see
    :meth:`Human.at_terminal`), wherever the command asks: inside or outside its
    async body.
    """
    try:
        person = Human.at_terminal()
    except NotPermitted as exc:
        fail(str(exc))
    if person.label is not None:
        text_arg(person.label, "PLAIT_USER")
    return person


async def _follow(
    mesh: Mesh,
    runs: Runs,
    rec: RunRecord,
    as_json: bool,
    since: RunRecord | None = None,
    ray_url: str | None = None,
    quiet: bool = False,
) -> RunRecord:
    """Have the run served (see :func:`serving_run`; ``quiet``: without saying that
    this process serves it) and follow it until it settles.

    Ctrl-C says what becomes of the run and exits 130.
    """
    run_id = rec.run_id
    async with serving_run(mesh, rec, ray_url=ray_url, quiet=quiet) as runtime:

        def interrupted(runtime: LocalRuntime | None = runtime) -> None:
            if runtime is None:
                say(
                    f"interrupted: a worker goes on with run {run_id}; see `plait graph "
                    f"inspect {run_id}`, or stop it with `plait graph cancel {run_id}`",
                    stderr=True,
                )
                return
            runtime.drain_timeout_s = 0.0  # a node cut short is its next host's to judge
            say(
                f"interrupted: run {run_id} stays queued; start `plait worker` to go on "
                f"with it, or stop it with `plait graph cancel {run_id}`",
                stderr=True,
            )

        with _progress_printer(not as_json) as show:
            settled = await interruptible(
                lambda: runs.wait(
                    run_id,
                    since=since,
                    on_progress=show,
                    on_event=show.stream if show.streaming else None,
                ),
                interrupted,
            )
    if settled is None:
        raise typer.Exit(INTERRUPTED)
    return settled


def _answer_hint(run_id: str, asked: Any) -> list[str | Text]:
    """The exact commands that answer what a run waits on, its ids filled in."""
    if asked.options:
        answer = asked.options[0]
        desk = f"plait decisions answer {asked.decision_id} --option {answer}"
    else:
        answer = "ANSWER"
        desk = f"plait decisions answer {asked.decision_id} --text ANSWER"
    return [f"answer with: plait graph resume {run_id} {answer}", f"         or: {desk}"]


async def _report(runs: Runs, rec: RunRecord, as_json: bool) -> None:
    waiting = None
    # A run parked on a subgraph's child run shows what that child asks a person.
    asking = await runs.asks(rec)
    asked = asking[1] if asking is not None else rec.waiting
    if asked is not None:
        waiting = {"node": asked.node, "ask": asked.ask, "decision_id": asked.decision_id}
    output = await runs.output(rec)
    if as_json:
        body = {
            "run_id": rec.run_id,
            "status": rec.status,
            "waiting": waiting,
            "output": output,
            "ended_detail": rec.ended_detail,
        }
        if rec.status == "failed":
            body["error"] = {
                "node": rec.error_node,
                "visit": rec.error_visit,
                "type": rec.ended_detail,
                "message": rec.error,
            }
        print_json(body)
        return
    detail = f" ({rec.ended_detail})" if rec.ended_detail else ""
    say("run ", styled(rec.run_id, "bold"), f" {rec.status}{detail}")
    if rec.error:
        say(styled("error: ", "red"), rec.error)
    if asked is not None:
        asker = asking[0].run_id if asking is not None else rec.run_id
        where = f" in subgraph run {asker}" if asker != rec.run_id else ""
        say(styled(f"waiting on {clean(asked.node)}{where}: ", "yellow"), asked.ask or "")
        if asked.options:
            say("options: ", ", ".join(asked.options))
        if asked.kind == "budget":
            say(f"raise it with: plait graph raise-budget {asker} --steps N")
        elif asked.decision_id is not None:
            for hint in _answer_hint(rec.run_id, asked):
                say(hint)
    if rec.status == "done":
        if isinstance(output, str):
            say(output)
        else:
            print_json(output)  # a dict or list output prints as JSON, never as a repr


@graph_app.command("run")
def run_graph_cmd(
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The graph's agent.")],
    name: Annotated[str, typer.Argument(metavar="NAME", help="The graph's name.")],
    input: InputOption = None,
    input_json: InputJsonOption = None,
    model: ModelOption = None,
    version: Annotated[int | None, typer.Option("--version", help="Graph version.")] = None,
    as_json: JsonOption = False,
    detach: Annotated[bool, typer.Option("--detach", help="Only enqueue the run.")] = False,
    input_untrusted: Annotated[
        bool,
        typer.Option(
            "--input-untrusted",
            help="The input is outside content: what reads it loses pre-approved tools.",
        ),
    ] = False,
    mesh: CreatingMeshOption = None,
    runtime_name: RuntimeOption = "local",
) -> None:
    """Start a durable run of a stored graph and follow it until it settles.

    Exit codes: 0 the run is done or waits on a person (waiting_*); 1 it failed or was
    cancelled, or the command failed; 2 a usage error (a bad model spec is refused
    before any run is queued).
    """
    given = run_input(input, input_json)
    ray_url = ray_url_for(runtime_name, mesh)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            stored = await get_graph(m, agent, name, version)
            spec = model or (await get_profile(m, stored.agent)).model
            calls_model = any(kind_of(node).calls_model for node in stored.spec.nodes)
            if spec is None and calls_model:
                fail(
                    f"agent {stored.agent!r} has no model: pass --model (e.g. "
                    "openai:gpt-4o-mini or scripted:path.yaml) or set PLAIT_MODEL",
                    2,
                )
            if spec is not None:
                refuse_bad_model(spec)
            runs = Runs(m)
            rec = await runs.start(
                agent, name, given, version=version, model=model, input_untrusted=input_untrusted
            )
            missing = await tools_nobody_offers(m, rec)
            if missing:
                say(
                    f"run {rec.run_id} needs tool(s) {', '.join(missing)} that no serving "
                    "worker offers: it stays queued, and no node of it runs, until "
                    + await who_offers(m, missing),
                    stderr=True,
                )
            elif detach:
                await warn_if_unserved(m)
            if detach or missing:
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
                    say(f"run {rec.run_id} enqueued")
                return
            if not as_json:
                say(
                    "run ",
                    styled(rec.run_id, "bold"),
                    f" of {agent}/{name} v{rec.graph.version}",
                    stderr=True,
                )
            rec = await _follow(m, runs, rec, as_json, ray_url=ray_url)
            await _report(runs, rec, as_json)
            exit_for(rec)

    run(main)


def ray_url_for(runtime_name: str, mesh: str | None) -> str | None:
    """The mesh URL Ray hosts serve for ``--runtime ray`` (None for ``local``); exits 2
    for another runtime name, a mesh hosts cannot share, or without Ray."""
    if runtime_name not in ("local", "ray"):
        fail(f"--runtime must be local or ray, not {runtime_name!r}", 2)
    if runtime_name == "local":
        return None
    assert mesh is not None  # the mesh option's callback resolved it
    return ray_mesh(mesh)


def refuse_bad_model(spec: str) -> None:
    """Exit 2 with one line if a model spec cannot work (nothing is queued then)."""
    try:
        check_model_spec(spec)
    except ConfigError as exc:
        fail(str(exc), 2)


def exit_for(rec: RunRecord) -> None:
    """Exit 1 if the run failed or was cancelled; a done or parked run exits 0."""
    if rec.status in ("failed", "cancelled"):
        raise typer.Exit(1)


@graph_app.command("resume")
def resume_cmd(
    run_id: RunArgument,
    answer: Annotated[str, typer.Argument(metavar="ANSWER")],
    as_json: JsonOption = False,
    mesh: MeshOption = None,
    runtime_name: RuntimeOption = "local",
) -> None:
    """Answer what a waiting run asks, then follow it until it settles again.

    Exit codes: 0 the run is done or waits on a person again (waiting_*); 1 it failed
    or was cancelled, or the command failed; 2 a usage error (a mesh Ray hosts cannot
    share with ``--runtime ray`` is refused before the answer is given).
    """
    text_arg(answer, "ANSWER")
    ray_url = ray_url_for(runtime_name, mesh)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            runs = Runs(m)
            rid = RunId(await resolve(m, RUNS, run_id))
            before = await runs.resume(rid, answer, by=human())
            outer = before if before.run_id == rid else await runs.get(rid)
            rec = await _follow(m, runs, outer, as_json, since=before, ray_url=ray_url, quiet=True)
            await _report(runs, rec, as_json)
            exit_for(rec)

    run(main)


@graph_app.command("raise-budget")
def raise_budget_cmd(
    run_id: RunArgument,
    steps: Annotated[int | None, typer.Option("--steps", min=1, help="More steps.")] = None,
    tokens: Annotated[int | None, typer.Option("--tokens", min=1, help="More tokens.")] = None,
    dollars: Annotated[
        float | None, typer.Option("--dollars", min=0.0, help="More dollars.")
    ] = None,
    wall_seconds: Annotated[
        float | None, typer.Option("--wall-seconds", min=0.0, help="More seconds.")
    ] = None,
    retries: Annotated[int | None, typer.Option("--retries", min=1, help="More retries.")] = None,
    as_json: JsonOption = False,
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
    for name, amount in extra.items():
        if not math.isfinite(amount):
            fail(f"--{name.replace('_', '-')} must be a finite number, not {amount:g}", code=2)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            rid = RunId(await resolve(m, RUNS, run_id))
            rec = await Runs(m).raise_budget(rid, extra, by=human())
        if as_json:
            print_json({"run_id": rec.run_id, "status": rec.status, "raised": extra})
            return
        raised = ", ".join(f"{name} +{amount:g}" for name, amount in extra.items())
        say(f"run {rec.run_id} {rec.status}: budget raised ({raised})")

    run(main)


@graph_app.command("cancel")
def cancel_cmd(
    run_id: RunArgument,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Cancel a run: nothing of it runs again. Exits 1 if the run was already over."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            runs = Runs(m)
            rid = RunId(await resolve(m, RUNS, run_id))
            before = await runs.get(rid)
            if before.terminal:
                fail(f"run {rid} is already over ({before.status}): nothing to cancel")
            rec = await runs.cancel(rid, by=human())
        if as_json:
            print_json(
                {"run_id": rec.run_id, "status": rec.status, "ended_detail": rec.ended_detail}
            )
        else:
            say(f"run {rec.run_id} {rec.status}")

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
        say(f"{verb} {len(found)} finished run(s)")
        for s in found:
            say(f"  {s.run_id} {s.status} {utc_time(s.updated_at)}")

    run(main)
