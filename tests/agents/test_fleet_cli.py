"""The fleet example's README lines as a person types them: ``plait`` subprocesses on
the embedded default (a SQLite file) and one real ``plait worker``; the Ray variant
(:mod:`tests.agents.test_fleet_ray`) runs the same lines against Ray hosts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.runs.helpers import Cli, poll
from tests.runs.test_ownership import Worker

from .fleet import EXAMPLE, MODEL, PROFILES, WORKERS


def set_up(cli: Cli) -> None:
    """The README's ``agents put`` and ``agents start`` lines."""
    for name, tools in PROFILES.items():
        cli("agents", "put", name, "--tools", ",".join(tools),
            "--instructions", str(EXAMPLE / f"{name}.txt"))  # fmt: skip
    cli("agents", "start", "dispatcher")
    for name in WORKERS:
        cli("agents", "start", name, "--profile", "worker", "--topics", "tasks.new")
    cli("agents", "start", "reporter", "--topics", "tasks.done")


def run_fleet(cli: Cli) -> None:
    """The README's lines from ``agents tell dispatcher`` on, with what they show checked,
    while something serves the mesh."""
    cli("agents", "tell", "dispatcher", "three tasks, please")
    poll(lambda: len(cli("mesh", "ls", "reports/fleet/").stdout.splitlines()) == 1 + 3, 60)
    for n in ("t1", "t2", "t3"):
        claim = cli.json("mesh", "get", f"tasks/{n}")
        result = cli.json("mesh", "get", f"results/{n}")
        assert claim["version"] == 1 and result["version"] == 1  # claimed once, done once
        assert result["value"]["by"] == claim["value"]["claimed_by"]
    listed = {a["name"]: a.get("actor") for a in cli.json("agents", "list")}
    assert all(listed[w]["backlog"] == 0 for w in WORKERS)
    cli("agents", "tell", "reporter", "the report, please")

    def raised() -> Any:
        return [d for d in cli.json("decisions", "list") if d["raised_by"] == "agent:reporter"]

    (decision,) = poll(raised, timeout=60)
    assert decision["title"].startswith("Sign off the fleet report")
    cli("decisions", "answer", decision["id"], "--option", "yes")

    def signed() -> Any:
        turns = cli.json("agents", "show", "reporter")["actor"]["last_turns"]
        return turns and turns[-1]["text"].startswith("report") and turns

    assert poll(signed, timeout=60)[-1]["text"] == "report answered: yes"
    outcomes = [
        t["text"] for w in WORKERS for t in cli.json("agents", "show", w)["actor"]["last_turns"]
    ]
    assert sorted(o.split()[0] for o in outcomes) == ["did"] * 3 + ["lost"] * 6


def test_the_readme_lines_on_the_embedded_default(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    set_up(cli)
    worker = Worker(cli, "worker", "--model", f"scripted:{MODEL}")
    try:
        run_fleet(cli)
        worker.stop()
    finally:
        worker.kill()
