"""``plait graph runs``: the run listing, the one run command that needs no engine.

It imports the listing (:mod:`plait.runs.listing`), not the run service, so listing
runs starts as fast as the CLI itself.
"""

from __future__ import annotations

from typing import Annotated

import typer

from plait.cli._common import MeshOption, fail, print_json, run
from plait.cli._graph_app import graph_app
from plait.cli._output import JsonFlag, Output, OutputOption, age, mode, rows, utc_time
from plait.mesh import open_mesh
from plait.runs.listing import LISTING_STATUSES, list_runs


@graph_app.command("runs")
def runs_cmd(
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's runs.")] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only runs in this status (running, waiting_human, done...)."
        ),
    ] = None,
    as_json: JsonFlag = False,
    output: OutputOption = None,
    mesh: MeshOption = None,
) -> None:
    """List runs, newest first, including parked ones."""
    if status is not None and status not in LISTING_STATUSES:
        fail(f"unknown status {status!r}: expected one of {', '.join(LISTING_STATUSES)}", 2)
    shown = mode(output, as_json)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            found = await list_runs(m, agent=agent, status=status)
        if shown is Output.json:
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
        rows(
            ("run", "status", "agent", "graph", "version", "age", "created", "updated"),
            [
                (
                    s.run_id,
                    s.status,
                    s.agent,
                    s.graph,
                    s.version,
                    age(s.created_at),
                    utc_time(s.created_at),
                    utc_time(s.updated_at),
                )
                for s in found
            ],
            narrow=(0, 1, 3, 5),
            fit=3,
            ids=(0,),
            wide=shown is Output.wide,
        )

    run(main)


__all__ = ["runs_cmd"]
