"""Streaming across failover and through the CLI, with real processes on a SQLite mesh.

A ``plait worker`` streams a draft; ``plait graph watch --json`` in another process
follows it; the worker is SIGKILLed mid-stream and a second worker takes the visit over.
The watcher sees attempt 1's partial text, the restart marker, attempt 2's whole text,
and the commit, whose output is that text.
"""

from __future__ import annotations

import json
import subprocess
import threading
from typing import Any

import anyio
import pytest

from plait.mesh import open_mesh
from plait.runs import Runs
from tests._support.timing import scaled

from .helpers import DATA, Cli, poll
from .test_crash import sigkill_when, stop

pytestmark = pytest.mark.slow

SCRIPT = DATA / "streaming.model.yaml"
TEXT = "".join(f"w{n:03d} " for n in range(200))
GRAPH = {
    "name": "draft",
    "agent": "assistant",
    "entry": "draft",
    "nodes": [{"id": "draft", "type": "agent", "prompt": "{{input}}"}],
}


class Lines:
    """The stdout lines of a process, read in a thread as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.changed = threading.Condition()
        assert process.stdout is not None
        self.thread = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self.thread.start()

    def _read(self, stream: Any) -> None:
        for text in stream:
            with self.changed:
                self.lines.append(text)
                self.changed.notify_all()

    def events(self) -> list[dict[str, Any]]:
        with self.changed:
            return [json.loads(text) for text in self.lines]

    def wait_for(self, check: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
        with self.changed:
            assert self.changed.wait_for(
                lambda: check([json.loads(t) for t in self.lines]), timeout=scaled(timeout)
            ), self.lines[-5:]
        return self.events()


def start_run(cli: Cli) -> str:
    (cli.cwd / "draft.json").write_text(json.dumps(GRAPH))
    cli.setup("graph", "import", str(cli.cwd / "draft.json"))
    out = cli.json(
        "graph", "run", "assistant", "draft", "--input", TEXT, "--model", f"scripted:{SCRIPT}",
        "--detach",
    )  # fmt: skip
    return str(out["run_id"])


def output_of(url: str, run_id: str) -> Any:
    async def read() -> Any:
        async with open_mesh(url) as mesh:
            runs = Runs(mesh)
            return await runs.output(await runs.get(run_id))

    return anyio.run(read)


def test_a_worker_killed_mid_stream_restarts_the_attempt_for_watchers(cli: Cli) -> None:
    run_id = start_run(cli)
    watcher = cli.spawn("graph", "watch", run_id, "--json")
    lines = Lines(watcher)
    first = cli.spawn("worker", "--visibility-timeout", "1")
    second: subprocess.Popen[str] | None = None
    try:

        def streamed_some() -> bool:
            return sum(e["kind"] == "delta" for e in lines.events()) >= 20

        sigkill_when(first, lambda: poll(streamed_some))
        second = cli.spawn("worker", "--visibility-timeout", "1")
        # wait(), not communicate(): the reader thread owns stdout.
        assert watcher.wait(timeout=scaled(60)) == 0, watcher.stderr and watcher.stderr.read()
        lines.thread.join(timeout=scaled(5))
    finally:
        if second is not None:
            stop(second)
        if watcher.poll() is None:
            watcher.kill()
        lines.thread.join(timeout=scaled(5))
        watcher.communicate()  # closes its pipes (stdout is read to its end already)
    events = lines.events()
    markers = [(e["attempt"], e.get("restart", False)) for e in events if e["kind"] == "attempt"]
    assert markers == [(1, False), (2, True)]
    restart = next(i for i, e in enumerate(events) if e.get("restart"))
    before = "".join(e["text"] for e in events[:restart] if e["kind"] == "delta")
    after = "".join(e["text"] for e in events[restart:] if e["kind"] == "delta")
    assert 0 < len(before) < len(TEXT) and TEXT.startswith(before)  # attempt 1, cut off
    assert after == TEXT  # attempt 2, whole, not spliced onto attempt 1
    assert all(e["attempt"] == 1 for e in events[:restart] if e["kind"] == "delta")
    assert all(e["attempt"] == 2 for e in events[restart:] if e["kind"] == "delta")
    assert events[-1]["kind"] == "progress" and events[-1]["progress"]["status"] == "done"
    assert [e["offset"] for e in events] == sorted({e["offset"] for e in events})
    assert output_of(cli.mesh_url, run_id) == TEXT


def test_watch_prints_the_streamed_reply_and_resumes_after_an_offset(cli: Cli) -> None:
    run_id = start_run(cli)
    worker = cli.spawn("worker")
    try:
        watched = cli("graph", "watch", run_id, timeout=60)
    finally:
        stop(worker)
    assert TEXT.strip() in watched.stdout
    assert "▶ draft (visit 1)" in watched.stdout and "✓ draft" in watched.stdout
    every = [
        json.loads(line) for line in cli("graph", "watch", run_id, "--json").stdout.splitlines()
    ]
    assert "".join(e["text"] for e in every if e["kind"] == "delta") == TEXT
    tail = cli("graph", "watch", run_id, "--json", "--after", str(every[-3]["offset"]))
    assert [json.loads(line)["offset"] for line in tail.stdout.splitlines()] == [
        e["offset"] for e in every[-2:]
    ]
