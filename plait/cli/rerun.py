"""``plait graph retry|fork``: a failed run goes on, or a new run starts from a visit.

Like ``graph run``, both follow the run until it settles, serving it in this process
when no worker serves the mesh (``--detach``: only enqueue it).
"""

from __future__ import annotations

from typing import Annotated

import typer

from plait.cli._common import MeshOption, fail, print_json, run, text_arg
from plait.cli._foreground import warn_if_unserved
from plait.cli._graph_app import graph_app
from plait.cli._ids import RUNS, RunArgument, resolve
from plait.cli._output import JsonOption, say, styled
from plait.cli.runs import _follow, _report, exit_for, human
from plait.errors import RunNotRetryable, VisitNotFound
from plait.ids import RunId
from plait.mesh import open_mesh
from plait.runs import RunRecord, Runs
from plait.runs.rerun import KEEP_INPUT

DetachOption = Annotated[bool, typer.Option("--detach", help="Only enqueue the run.")]


async def _settle(runs: Runs, rec: RunRecord, as_json: bool, detach: bool, what: str) -> None:
    """Follow ``rec`` until it settles and report it (or say it is enqueued)."""
    if detach:
        await warn_if_unserved(runs.mesh)
        if as_json:
            print_json({"run_id": rec.run_id, "status": rec.status})
        else:
            say(f"run {rec.run_id} {what}, enqueued")
        return
    if not as_json:
        g = rec.graph
        say(
            "run ",
            styled(rec.run_id, "bold"),
            f" {what} ({g.agent}/{g.name} v{g.version})",
            stderr=True,
        )
    settled = await _follow(runs.mesh, runs, rec, as_json)
    await _report(runs, settled, as_json)
    exit_for(settled)


@graph_app.command("retry")
def retry_cmd(
    run_id: RunArgument,
    as_json: JsonOption = False,
    detach: DetachOption = False,
    mesh: MeshOption = None,
) -> None:
    """Continue a failed run from the node that failed, on its pinned graph version.

    Every committed visit is kept; the failed node runs again as its next visit.
    Exit codes: 0 the run is done or waits on a person; 1 it failed again or was
    cancelled, the run did not fail, or the command failed.
    """

    async def main() -> None:
        async with open_mesh(mesh) as m:
            runs = Runs(m)
            try:
                rid = RunId(await resolve(m, RUNS, run_id))
                rec = await runs.retry(rid, by=human())
            except RunNotRetryable as exc:
                fail(str(exc))
            await _settle(runs, rec, as_json, detach, "retried")

    run(main)


@graph_app.command("fork")
def fork_cmd(
    run_id: RunArgument,
    at: Annotated[
        str,
        typer.Option(
            "--at",
            metavar="VISIT",
            help="The committed visit to start after: NODE:VISIT as `graph inspect` "
            "shows them, or NODE for its last visit.",
        ),
    ],
    input: Annotated[
        str | None,
        typer.Option("--input", help="The new run's input (default: the parent's)."),
    ] = None,
    as_json: JsonOption = False,
    detach: DetachOption = False,
    mesh: MeshOption = None,
) -> None:
    """Start a new run from the state after a committed visit of RUN.

    Same pinned graph version; only what comes after the visit runs, and the new
    run's audit chain names the parent's event it starts from. Exit codes: 0 the new
    run is done or waits on a person; 1 it failed, or the command failed; 2 VISIT is
    no visit to fork at (the error lists those there are).
    """
    text_arg(at, "--at")
    if input is not None:
        text_arg(input, "--input")

    async def main() -> None:
        async with open_mesh(mesh) as m:
            runs = Runs(m)
            rid = RunId(await resolve(m, RUNS, run_id))
            try:
                rec = await runs.fork(
                    rid, at, by=human(), input=KEEP_INPUT if input is None else input
                )
            except VisitNotFound as exc:
                fail(str(exc), 2)
            await _settle(runs, rec, as_json, detach, f"forked from {rid} at {at}")

    run(main)
