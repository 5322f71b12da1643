"""What ``plait graph run`` and ``resume`` show on stderr while a run goes: each visit
as it starts and commits, read from the run's :class:`~plait.runs.progress.Progress`;
on a terminal, a running timer on the visits in flight, under each the tail of the
reply its model streams (from the run's live channel, :mod:`plait.runs.channel`)."""

from __future__ import annotations

import time
from typing import Any

from rich.live import Live
from rich.text import Text

from plait.cli._common import err_console
from plait.cli._output import clean, line, say, styled
from plait.runs.channel import LiveEvent
from plait.runs.progress import Progress

STREAM_TAIL = 320
"""How much of a streaming reply's end the display keeps under its visit's timer."""

STREAM_LINES = 3
"""How many of those lines it shows."""


class RunProgress:
    """What ``graph run`` and ``resume`` show on stderr as a run goes, from its progress
    events: each visit as it starts and commits; on a terminal, a running timer on the
    visits in flight instead of their start lines."""

    def __init__(self, enabled: bool, *, stderr: bool = True) -> None:
        self.enabled = enabled
        self.stderr = stderr
        self.flight: dict[str, tuple[int | None, float]] = {}  # node -> (visit, started at)
        self.streams: dict[str, str] = {}  # node -> the tail of what its model streams
        self.live: Live | None = None

    def __enter__(self) -> RunProgress:
        if self.enabled and err_console.is_terminal:
            self.live = Live(self, console=err_console, refresh_per_second=4, transient=True)
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    @property
    def streaming(self) -> bool:
        """Whether the display shows streamed replies (on a terminal only)."""
        return self.live is not None

    def __rich__(self) -> Text:
        now = time.time()
        shown: list[Text] = []
        # Copies: Live's refresh thread renders while the event loop adds and removes.
        streams = dict(self.streams)
        for node, (visit, at) in list(self.flight.items()):
            shown.append(
                line(
                    styled("  ⏱ ", "cyan"),
                    str(node),
                    f" (visit {visit}) ",
                    styled(f"{now - at:.1f}s", "dim"),
                )
            )
            tail = streams.get(node)
            if tail:
                shown += [
                    Text("    " + text, style="dim") for text in tail.splitlines()[-STREAM_LINES:]
                ]
        return Text("\n").join(shown)

    def stream(self, event: LiveEvent) -> None:
        """Show a live event: a streamed piece of a reply under its visit's timer; a
        restarted attempt begins its visit's text anew."""
        if event.node is None:
            return
        if event.kind == "attempt":
            self.streams[event.node] = "↻ restarted\n" if event.restart else ""
        elif event.kind == "delta" and event.text:
            text = self.streams.get(event.node, "") + clean(event.text)
            self.streams[event.node] = text[-STREAM_TAIL:]

    def __call__(self, progress: Progress) -> None:
        if not self.enabled:
            return
        if progress.node is not None:
            self.done(progress, progress.node)
        for visit in progress.started:
            self.begin(visit.node, visit.visit, visit.at)

    def begin(self, node: str, visit: int | None, at: float | None) -> None:
        self.flight[node] = (visit, at if at is not None else time.time())
        if self.live is None:
            say(styled("  … ", "dim"), node, f" (visit {visit})", stderr=self.stderr)

    def done(self, progress: Progress, node: str) -> None:
        visit, status = progress.visit, str(progress.status)
        if progress.status == "running" and progress.at is not None:
            self.begin(node, visit, progress.at)  # a visit claimed by its own wake
            return
        began, _ = self.flight.pop(node, (None, 0.0))
        self.streams.pop(node, None)
        elapsed = progress.elapsed
        took = f" {elapsed:.2f}s" if elapsed is not None else ""
        waiting = progress.waiting
        if visit is None and waiting is not None and waiting.node == node:  # parked
            mark = styled("  ⏸ ", "yellow")
            took, visit = "", began
        elif progress.retry_in is not None:  # a transient error
            mark = styled("  ↻ ", "yellow")
            again = f"retrying again in {progress.retry_in:.1f}s"
            took = f" {took.strip()}, {again}" if took else f" {again}"
        elif progress.error:
            mark = styled("  ✗ ", "red")
        else:
            mark = styled("  ✓ ", "green")
        verdict = f" → {progress.verdict}" if progress.verdict else ""
        visit_text = f" (visit {visit})" if visit else ""
        # The mark is the visit's outcome; the line ends with the run's status after it.
        run_status = styled(f" · run {status}", "dim")
        say(mark, node, visit_text, verdict, took, run_status, stderr=self.stderr)
        if progress.error:
            say("    ", styled("error: ", "red"), progress.error, stderr=self.stderr)
        revisits = any(v.visit > 1 for v in progress.started)
        critique = verifier_critique(progress.critique, progress.verdict)
        if critique and revisits:  # the verifier sends the flow back: say why
            say("    ", styled("critique: ", "yellow"), critique, stderr=self.stderr)


def verifier_critique(reply: Any, verdict: Any) -> str:
    """A verifier's reply without the line that holds its verdict."""
    if not isinstance(reply, str) or not verdict:
        return ""
    lines = reply.strip().splitlines()
    if lines and str(verdict).lower() in lines[-1].lower():
        lines = lines[:-1]
    return "\n".join(lines).strip()


def progress_printer(enabled: bool) -> RunProgress:
    """The progress display of a run (see :class:`RunProgress`); a context manager."""
    return RunProgress(enabled)


__all__ = ["RunProgress", "progress_printer", "verifier_critique"]
