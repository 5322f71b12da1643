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
from pydantic import BaseModel

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


class StreamedText:
    """Live events on stdout: a model's reply as it streams, escaped, a line per other
    event (or, with ``as_json``, one JSON object per event)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.mid_line = False

    def streamed(self, event: BaseModel, text: str | None) -> bool:
        """Print ``event`` as JSON, or its ``text`` if it is a piece of a reply (not
        None); False when it is for the caller to print as a line."""
        if self.as_json:
            print_json(event.model_dump(mode="json", exclude_none=True))
            return True
        if text is not None:
            sys.stdout.write(clean(text))
            sys.stdout.flush()
            self.mid_line = not text.endswith("\n")
            return True
        self.end_line()
        return False

    def started(self, who: str, detail: str, attempt: int | None, restart: bool, of: str) -> None:
        """The line of a try starting: a restart marker when an earlier try was cut off."""
        if restart:
            say(
                styled("  ↻ ", "yellow"),
                who,
                styled(f" attempt {attempt} restarted this {of}", "yellow"),
            )
        else:
            say(styled("  ▶ ", "cyan"), who, detail)

    def end_line(self) -> None:
        """End a line a streamed reply left open."""
        if self.mid_line:
            sys.stdout.write("\n")
            self.mid_line = False


class LivePrinter(StreamedText):
    """Prints a run's live events on stdout: replies as they stream, a line per
    attempt and per commit (or, with ``as_json``, one JSON object per event)."""

    def __init__(self, as_json: bool) -> None:
        super().__init__(as_json)
        self.progress = RunProgress(True, stderr=False)

    def __call__(self, event: LiveEvent) -> None:
        if self.streamed(event, event.text if event.kind == "delta" else None):
            return
        if event.kind == "attempt":
            self.started(
                str(event.node), f" (visit {event.visit})", event.attempt, event.restart, "node"
            )
        elif event.progress is not None:
            self.progress(event.progress)


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


__all__ = ["LivePrinter", "StreamedText", "watch_cmd"]
