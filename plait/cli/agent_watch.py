"""``plait agents watch NAME``: follow an agent actor's turns as they happen, token by token.

Reads the actor's live channel (:func:`plait.agents.live.follow_agent`): a line when a
turn starts (with the message it handles), its model's reply as it streams, a marker
when a try of a turn restarts (its process died, or it ran again after a conflict), a
line when it ends. It follows until interrupted, or until ``--turns N`` turns ended.
``--json`` prints one JSON object per event, for a pipe; ``--after OFFSET`` resumes
after an event already seen (every event carries its offset). Everything a model or a
message says is shown escaped: no control sequence reaches the terminal.
"""

from __future__ import annotations

from typing import Annotated

import typer

from plait.agents import Agents
from plait.agents.live import AgentEvent, follow_agent
from plait.cli._common import MeshOption, run
from plait.cli._output import JsonOption, say, styled
from plait.cli.agents import agents_app
from plait.cli.run_watch import StreamedText
from plait.mesh import open_mesh

AFTER_HELP = "Start after this event offset (default: the turn in flight, else what comes)."


class AgentPrinter(StreamedText):
    """Prints an agent actor's live events on stdout (or, with ``as_json``, one JSON
    object per event)."""

    def __call__(self, event: AgentEvent) -> None:
        if self.streamed(event, event.text if event.kind == "delta" else None):
            return
        if event.kind == "turn":
            detail = ": " + (event.prompt or "")
            self.started(event.message, detail, event.attempt, event.restart, "turn")
        elif event.summary is None:
            say(styled("  ✗ ", "red"), event.message, ": ", event.text or "stopped")
        else:
            summary = event.summary
            tools = f", tools: {', '.join(summary.tools)}" if summary.tools else ""
            say(
                styled("  ✓ ", "green"),
                f"turn {summary.seq} {summary.outcome} ({summary.tokens} tokens{tools})",
            )


@agents_app.command("watch")
def watch_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The agent actor.")],
    after: Annotated[int | None, typer.Option("--after", min=0, help=AFTER_HELP)] = None,
    turns: Annotated[
        int | None, typer.Option("--turns", min=1, help="Stop once this many turns ended.")
    ] = None,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Follow agent actor NAME's turns as they happen: each turn's message, its model's
    reply token by token, and how it ended.

    Exit codes: 0 it stopped as --turns says (or was interrupted); 1 the command failed.
    """

    async def main() -> None:
        async with open_mesh(mesh) as m:
            await Agents(m).get(name)  # no such actor: one line, exit 1
            printer = AgentPrinter(as_json)
            try:
                async for event in follow_agent(m, name, after=after, turns=turns):
                    printer(event)
            finally:
                printer.end_line()

    run(main)


__all__ = ["AgentPrinter", "watch_cmd"]
