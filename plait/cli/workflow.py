"""``plait workflow``: import, start and list durable Python workflows.

A workflow run is a durable run like any other: ``plait graph resume``, ``inspect``,
``events``, ``cancel``, ``retry`` and ``raise-budget`` take its run id. ``start``
follows it as ``plait graph run`` does (served by a live worker, or by this process).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from plait.cli._common import CreatingMeshOption, MeshOption, fail, print_json, run
from plait.cli._foreground import warn_if_unserved
from plait.cli._ids import RUNS, RunArgument, resolve
from plait.cli._output import as_text, clean, say, styled
from plait.cli.runs import ModelOption, _follow, _report, exit_for, refuse_bad_model
from plait.errors import ConfigError
from plait.mesh import open_mesh
from plait.runs import Runs
from plait.workflows import import_workflow, journal, load_workflow, stale_runs, start_workflow

workflow_app = typer.Typer(
    help="Durable Python workflows (@plait.workflow): import, start, list, journal.",
    no_args_is_help=True,
)

RefArgument = Annotated[
    str, typer.Argument(metavar="REF", help="The workflow's import path, pkg.module:fn.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _load(ref: str) -> Any:
    try:
        return load_workflow(ref)
    except ConfigError as exc:
        fail(str(exc), 2)


@workflow_app.command("import")
def import_cmd(
    ref: RefArgument, mesh: CreatingMeshOption = None, as_json: JsonOption = False
) -> None:
    """Store a workflow in the mesh (a new version when its code changed)."""
    wf = _load(ref)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            stored = await import_workflow(m, wf)
        if as_json:
            print_json(
                {
                    "agent": stored.agent,
                    "name": stored.name,
                    "version": stored.version,
                    "sha256": stored.sha256,
                    "source_sha256": wf.source_sha256,
                }
            )
        else:
            say(f"imported workflow {stored.agent}/{stored.name} v{stored.version} from {ref}")

    run(main)


@workflow_app.command("start")
def start_cmd(
    ref: RefArgument,
    args: Annotated[
        str, typer.Option("--args", help="The arguments, a JSON object by parameter name.")
    ] = "{}",
    model: ModelOption = None,
    detach: Annotated[bool, typer.Option("--detach", help="Only enqueue the run.")] = False,
    as_json: JsonOption = False,
    mesh: CreatingMeshOption = None,
) -> None:
    """Start a durable run of a workflow and follow it until it settles (``--detach``:
    only enqueue it). Exit codes as ``plait graph run``."""
    wf = _load(ref)
    try:
        kwargs = json.loads(args)
    except ValueError as exc:
        fail(f"--args is not JSON: {exc}", 2)
    if not isinstance(kwargs, dict):
        fail("--args must be a JSON object of arguments by parameter name", 2)
    if model is not None:
        refuse_bad_model(model)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            try:
                rec = await start_workflow(m, wf, model=model, **kwargs)
            except ConfigError as exc:
                fail(str(exc), 2)
            runs = Runs(m)
            if detach:
                await warn_if_unserved(m)
                if as_json:
                    print_json({"run_id": rec.run_id, "status": rec.status})
                else:
                    say(f"run {rec.run_id} enqueued")
                return
            if not as_json:
                say("run ", styled(rec.run_id, "bold"), f" of workflow {wf.name}", stderr=True)
            rec = await _follow(m, runs, rec, as_json)
            await _report(runs, rec, as_json)
            exit_for(rec)

    run(main)


@workflow_app.command("runs")
def runs_cmd(
    stale: Annotated[
        bool, typer.Option("--stale", help="Only runs pinned to code that has changed.")
    ] = False,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """List workflow runs in flight pinned to code this process imports differently."""
    if not stale:
        fail(
            "list every run with `plait graph runs`; `plait workflow runs --stale` lists "
            "the workflow runs pinned to code that has changed",
            2,
        )

    async def main() -> None:
        async with open_mesh(mesh) as m:
            found = await stale_runs(m)
        if as_json:
            print_json([{"run_id": r.run_id, "status": r.status, "ref": ref} for r, ref in found])
            return
        for rec, ref in found:
            say(f"{rec.run_id}  {rec.status}  {clean(ref)}")
        if not found:
            say("no workflow run in flight is pinned to changed code")

    run(main)


@workflow_app.command("journal")
def journal_cmd(
    run_id: RunArgument,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Print the steps a workflow run has journaled, in position order."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            steps = await journal(m, await resolve(m, RUNS, run_id))
        if as_json:
            print_json([s.model_dump() for s in steps])
            return
        for s in steps:
            outcome = f"error: {s.error}" if s.error is not None else as_text(s.value)
            say(f"{s.pos:>4}  {clean(s.name)}  {clean(outcome)[:200]}")

    run(main)


__all__ = ["workflow_app"]
