"""What ``plait graph run`` and ``resume`` show on stderr while a run goes: each visit
as it starts and commits, read from the run's :class:`~plait.runs.progress.Progress`;
on a terminal, a running timer on the visits in flight."""

from __future__ import annotations

import time
from typing import Any

from rich.live import Live
from rich.text import Text

from plait.cli._common import err_console
from plait.cli._output import line, say, styled
from plait.runs.progress import Progress


class RunProgress:
    """What ``graph run`` and ``resume`` show on stderr as a run goes, from its progress
    events: each visit as it starts and commits; on a terminal, a running timer on the
    visits in flight instead of their start lines."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.flight: dict[str, tuple[int | None, float]] = {}  # node -> (visit, started at)
        self.live: Live | None = None

    def __enter__(self) -> RunProgress:
        if self.enabled and err_console.is_terminal:
            self.live = Live(self, console=err_console, refresh_per_second=4, transient=True)
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def __rich__(self) -> Text:
        now = time.time()
        return Text("\n").join(
            line(
                styled("  ⏱ ", "cyan"),
                str(node),
                f" (visit {visit}) ",
                styled(f"{now - at:.1f}s", "dim"),
            )
            # A copy: Live's refresh thread renders while the event loop adds and removes.
            for node, (visit, at) in list(self.flight.items())
        )

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
            say(styled("  … ", "dim"), node, f" (visit {visit})", stderr=True)

    def done(self, progress: Progress, node: str) -> None:
        visit, status = progress.visit, str(progress.status)
        if progress.status == "running" and progress.at is not None:
            self.begin(node, visit, progress.at)  # a visit claimed by its own wake
            return
        began, _ = self.flight.pop(node, (None, 0.0))
        elapsed = progress.elapsed
        took = f" {elapsed:.2f}s" if elapsed is not None else ""
        waiting = progress.waiting
        if visit is None and waiting is not None and waiting.node == node:  # parked
            mark = styled("  ⏸ ", "yellow")
            took, visit = "", began
        elif progress.retry_in is not None:  # a transient error
            mark = styled("  ↻ ", "yellow")
            took = f" {took.strip()}, again in {progress.retry_in:.1f}s" if took else ""
            status = "retrying"
        elif progress.error:
            mark = styled("  ✗ ", "red")
        else:
            mark = styled("  ✓ ", "green")
        verdict = f" → {progress.verdict}" if progress.verdict else ""
        visit_text = f" (visit {visit})" if visit else ""
        say(mark, node, visit_text, verdict, took, " ", styled(status, "dim"), stderr=True)
        if progress.error:
            say("    ", styled("error: ", "red"), progress.error, stderr=True)
        revisits = any(v.visit > 1 for v in progress.started)
        critique = verifier_critique(progress.critique, progress.verdict)
        if critique and revisits:  # the verifier sends the flow back: say why
            say("    ", styled("critique: ", "yellow"), critique, stderr=True)


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
