"""The release workflow served by a process SIGKILLed at each step boundary and inside
each step, on SQLite and Redis: a new process takes the run over, every effect happens
once (or, for a check retried by its policy, once more for the one cut short), the
journal is replayed, one decision is asked, and the timer fires after a restart.

Kill points (see :mod:`tests.workflows.effect`): ``before:X`` dies after the steps
before effect X committed and before X happens (a step boundary); ``after:X`` dies
after X happened, before its step committed (inside the step). ``timer`` kills the
process while the run sleeps on its timer.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from plait.decisions import DecisionAnswerer, Human
from plait.mesh import open_mesh
from plait.profiles import AgentProfile
from plait.profiles.store import put_profile
from plait.runs import RunRecord, Runs
from plait.workflows import journal, start_workflow
from tests._support.meshes import make_url_factory
from tests._support.processes import LoggedProcess
from tests._support.timing import scaled
from tests.workflows.release_flow import release

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("serve_flows.py")

KILL_POINTS = [
    "before:types",
    "after:types",
    "before:tests",
    "after:tests",
    "before:notes",
    "after:notes",
    "timer",
]


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A mesh URL on SQLite and on Redis (a backend another process can reach)."""
    make, cleanup = make_url_factory(request.param, tmp_path)
    try:
        yield make()
    finally:
        cleanup()


class _Servers:
    """The serving processes of one test, one at a time, restarted when one dies."""

    def __init__(self, url: str, where: Path) -> None:
        self.url, self.where = url, where
        self.started: list[LoggedProcess] = []

    def ensure(self) -> LoggedProcess:
        if self.started and self.started[-1].alive():
            return self.started[-1]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        log = self.where / f"server{len(self.started)}.log"
        proc = LoggedProcess([sys.executable, str(SERVER), self.url], log, cwd=self.where, env=env)
        self.started.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.started:
            if proc.alive():
                proc.stop()
            proc.kill()


async def _drive(url: str, where: Path, kill: str) -> tuple[RunRecord, list[str], int]:
    """Run the release workflow to its end through killed and restarted servers: its
    record, the names of the steps journaled, and how many servers were started."""
    servers = _Servers(url, where)
    killed_on_timer = answered = False
    try:
        async with open_mesh(url) as mesh:
            await put_profile(
                mesh, AgentProfile(name="assistant", tools=["bash"], pre_approved=["bash"])
            )
            rec = await start_workflow(mesh, release, "pkg", wait_s=1.0, workspace=where)
            runs = Runs(mesh)
            with anyio.fail_after(scaled(120)):
                while not rec.terminal:
                    server = servers.ensure()
                    rec = await runs.get(rec.run_id)
                    waiting = rec.waiting
                    if waiting is not None and waiting.ask == "Release pkg?" and not answered:
                        # Once: the record shows the wait until the server takes the answer.
                        await runs.resume(rec.run_id, "yes", by=Human("tester"))
                        answered = True
                    elif waiting is not None and waiting.ask.startswith("Timer:"):
                        if kill == "timer" and not killed_on_timer:
                            server.sigkill()  # the next server fires the timer
                            killed_on_timer = True
                    await anyio.sleep(0.05)  # polling the record, within the deadline above
            steps = [s.name for s in await journal(mesh, rec.run_id)]
            assert await runs.verify(rec.run_id) > 0
            asked = [d for d in await DecisionAnswerer(mesh).list() if d.title == "Release pkg?"]
            assert len(asked) == 1
            return rec, steps, len(servers.started)
    finally:
        servers.close()


@pytest.mark.parametrize("kill", KILL_POINTS)
async def test_a_killed_server_leaves_each_effect_once(url: str, tmp_path: Path, kill: str) -> None:
    where = tmp_path / "work"
    where.mkdir()
    if kill != "timer":
        (where / "kill_at").write_text(kill)
    rec, steps, servers = await _drive(url, where, kill)
    logs = "\n".join(p.read_text()[-2000:] for p in sorted(where.glob("server*.log")))
    assert rec.status == "done", (rec.error, logs)
    assert not (where / "kill_at").exists(), "the kill point was never reached"
    assert servers == 2, logs
    assert steps == [
        "tools.bash",
        "tools.bash",
        "agents.run",
        "decisions.ask",
        "sleep",
        "release_notes",
    ]
    effects = Counter((where / "effects.log").read_text().split())
    when, _, name = kill.partition(":")
    assert effects["notes"] == 1, effects  # verified after a crash, never run twice
    for check in ("types", "tests"):
        if check == name:
            # Cut short after its effect, the check is retried (its policy): once more.
            assert effects[check] == (2 if when == "after" else 1), effects
        elif name in ("types", "tests"):
            # Its sibling ran beside it in the same batch: retried with it, or not.
            assert effects[check] in (1, 2), effects
        else:
            assert effects[check] == 1, effects
