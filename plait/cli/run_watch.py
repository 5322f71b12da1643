"""``plait graph watch RUN``: follow a run as it happens, its models' replies token by token.

Reads the run's live channel (:func:`plait.runs.watch.follow_run`): each visit's streamed
reply as it comes, a marker when a visit's attempt restarts (its process died, or an
error is retried), each commit, until the run is done, failed, cancelled or waits on a
person. ``--json`` prints one JSON object per event, for a pipe; ``--after OFFSET``
resumes after an event already seen (every event carries its offset).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from plait.cli._common import MeshOption, print_json, run
from plait.cli._graph_app import graph_app
from plait.cli._ids import RUNS, RunArgument, resolve
from plait.cli._output import JsonOption, clean, say, styled
from plait.cli.run_progress import RunProgress
from plait.cli.runs import exit_for
from plait.ids import RunId
from plait.mesh import open_mesh
from plait.runs import Runs
from plait.runs.channel import LiveEvent
from plait.runs.watch import follow_run


class LivePrinter:
    """Prints a run's live events on stdout: replies as they stream, a line per
    attempt and per commit (or, with ``as_json``, one JSON object per event)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.progress = RunProgress(True, stderr=False)
        self.mid_line = False

    def __call__(self, event: LiveEvent) -> None:
        if self.as_json:
            print_json(event.model_dump(mode="json", exclude_none=True))
            return
        if event.kind == "delta":
            sys.stdout.write(clean(event.text or ""))
            sys.stdout.flush()
            self.mid_line = not (event.text or "").endswith("\n")
            return
        self.end_line()
        if event.kind == "attempt":
            where = f" (visit {event.visit})"
            if event.restart:
                say(
                    styled("  ↻ ", "yellow"),
                    str(event.node),
                    where,
                    styled(f" attempt {event.attempt} restarted this node", "yellow"),
                )
            else:
                say(styled("  ▶ ", "cyan"), str(event.node), where)
        elif event.progress is not None:
            self.progress(event.progress)

    def end_line(self) -> None:
        """End a line a streamed reply left open."""
        if self.mid_line:
            sys.stdout.write("\n")
            self.mid_line = False


@graph_app.command("watch")
def watch_cmd(
    run_id: RunArgument,
    after: Annotated[
        int, typer.Option("--after", min=0, help="Start after this event offset.")
    ] = 0,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Follow a run as it happens: its models' replies token by token, each attempt and
    commit, until it is done, failed, cancelled or waits on a person.

    Exit codes: 0 the run is done or waits on a person; 1 it failed or was cancelled,
    or the command failed.
    """

    async def main() -> None:
        async with open_mesh(mesh) as m:
            runs = Runs(m)
            rid = RunId(await resolve(m, RUNS, run_id))
            await runs.get(rid)  # no such run: one line, exit 1
            printer = LivePrinter(as_json)
            async for event in follow_run(m, rid, after=after):
                printer(event)
            printer.end_line()
            exit_for(await runs.get(rid))

    run(main)


__all__ = ["LivePrinter", "watch_cmd"]
