"""``graph run`` on a terminal, through a pseudo-terminal: a live timer on the node in
flight, then the run's status; the same run piped prints plain lines, no cursor moves."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from plait.profiles import AgentProfile
from tests.runs.helpers import Cli

SGR = re.compile(r"\x1b\[[0-9;]*m")  # colours and styles, not cursor moves
CURSOR = re.compile(r"\x1b\[[0-9;?]*[ABCDEFGHJKlh]|\r(?!\n)")
TIMER = re.compile(r"⏱ nap \(visit 1\) (\d+\.\d)s")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    made = Cli(tmp_path)
    made.env.update(COLUMNS="80", LINES="24", TERM="xterm-256color")
    made.env.pop("NO_COLOR", None)
    made.profile(AgentProfile(name="assistant", tools=["bash"], pre_approved=["bash"]))
    graph = {
        "name": "nap",
        "agent": "assistant",
        "entry": "nap",
        "nodes": [
            {"id": "nap", "type": "tool", "tool": "bash", "args": {"command": "sleep 1.5"},
             "next": "say"},
            {"id": "say", "type": "agent", "prompt": "Rested: {{nap}}"},
        ],
    }  # fmt: skip
    (tmp_path / "g.json").write_text(json.dumps(graph))
    (tmp_path / "m.json").write_text(json.dumps([{"text": "rested"}]))
    made("graph", "import", str(tmp_path / "g.json"))
    return made


def on_terminal(cli: Cli, *args: str, timeout: float = 30.0) -> tuple[int, str]:
    """Run ``plait ARGS`` with a pseudo-terminal of 80x24 as its stdin, stdout and
    stderr; its exit code and everything it wrote, read until it closes the terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen(
        cli.argv(*args), cwd=cli.cwd, env=cli.env, stdin=slave, stdout=slave, stderr=slave
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"plait {' '.join(args)} still running after {timeout}s")
            if not select.select([master], [], [], left)[0]:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
        return code, b"".join(chunks).decode("utf-8", errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_running_timer_on_a_terminal_and_plain_lines_piped(cli: Cli, tmp_path: Path) -> None:
    model = f"scripted:{tmp_path}/m.json"
    code, screen = on_terminal(cli, "graph", "run", "assistant", "nap", "--model", model)
    plain = SGR.sub("", screen)
    assert code == 0, plain
    # While the node ran, its timer was redrawn in place with a growing elapsed time.
    assert "✓ nap (visit 1)" in plain, plain
    ticks = [float(t) for t in TIMER.findall(plain[: plain.index("✓ nap (visit 1)")])]
    assert len(set(ticks)) >= 2 and ticks == sorted(ticks), plain
    assert CURSOR.search(screen), "the timer was not redrawn in place"
    # The last screen: the visit committed (the timer gone) and the run's status.
    assert re.search(r"✓ nap \(visit 1\) 1\.\d\ds ", plain), plain
    assert "⏱" not in plain[plain.index("✓ nap (visit 1)") :]
    assert re.search(r"run grun_\w+ done \(completed\)\r?\nrested\s*$", plain), plain

    piped = cli("graph", "run", "assistant", "nap", "--model", model)
    shown = piped.stdout + piped.stderr
    assert not CURSOR.search(shown) and "\x1b" not in shown  # no cursor moves, no colours
    assert "⏱" not in shown
    assert re.search(r"^  … nap \(visit 1\)$", piped.stderr, re.M), piped.stderr
    # the mark is the visit's; the line ends with the run's status
    assert re.search(r"^  ✓ nap \(visit 1\) 1\.\d\ds · run running$", piped.stderr, re.M), (
        piped.stderr
    )
    assert re.search(r"^run grun_\w+ done \(completed\)$", piped.stdout, re.M), piped.stdout
