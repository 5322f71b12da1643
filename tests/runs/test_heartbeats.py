"""What serves runs, and where the mesh is: heartbeats, foreground runs, discovery, tools.

Every test runs ``plait`` as real processes: workers are spawned, and what a person sees
on stderr is checked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from plait.actors.leases import read_members
from plait.mesh import Mesh
from plait.runs import RunRecord, Runs
from plait.runs.audit import read_events
from plait.runs.heartbeats import NO_WORKER, Heartbeat, live_heartbeats
from tests._support.timing import scaled

from .helpers import DATA, Cli, poll
from .test_crash import record_of, stop, with_mesh

CHAIN = DATA / "slow_chain.json"
CHAIN_MODEL = f"scripted:{DATA / 'slow_chain.model.yaml'}"

ASKING = {
    "name": "ask-first",
    "agent": "assistant",
    "entry": "ask",
    "nodes": [
        {"id": "ask", "type": "human", "ask": "Go on?", "next": "say"},
        {"id": "say", "type": "agent", "prompt": "Say {{ask}}"},
    ],
}


def heartbeats(cli: Cli) -> list[Heartbeat]:
    return with_mesh(cli.mesh_url, live_heartbeats)


def start_worker(cli: Cli, *args: str) -> subprocess.Popen[str]:
    """A worker, once its heartbeat is in the mesh."""
    worker = cli.spawn("worker", "--visibility-timeout", "1", *args)
    poll(lambda: any(b.pid == worker.pid for b in heartbeats(cli)))
    return worker


def detached(cli: Cli, graph: str, model: str = CHAIN_MODEL) -> tuple[str, str]:
    """Enqueue a run of ``graph``; its id and what the command said on stderr."""
    done = cli("graph", "run", "assistant", graph, "--model", model, "--detach", "--json")
    return json.loads(done.stdout)["run_id"], done.stderr


def committed_once(url: str, run_id: str) -> list[tuple[str, int]]:
    """The run's committed visits, after checking that none was committed twice."""

    async def read(mesh: Mesh) -> list[Any]:
        await Runs(mesh).verify(run_id)
        return await read_events(mesh, run_id)

    events = with_mesh(url, read)
    commits = [(e.node, e.visit) for e in events if e.type == "node.committed"]
    assert all(n == 1 for n in Counter(commits).values()), commits
    return commits


# -- 1. heartbeats, and saying when nothing serves the mesh ------------------------------


def test_a_worker_keeps_a_heartbeat_and_commands_say_when_none_serves(cli: Cli) -> None:
    cli.setup("graph", "import", str(CHAIN))
    run_id, said = detached(cli, "slow-chain")
    assert NO_WORKER in said

    worker = start_worker(cli)
    try:
        (beat,) = heartbeats(cli)
        assert beat.pid == worker.pid and beat.serves == "all" and beat.run_id is None
        assert str(worker.pid) in beat.host and beat.started <= beat.beat
        assert {"bash", "http_get", "read_file"} <= set(beat.tools)
        poll(lambda: (r := record_of(cli.mesh_url, run_id)) is not None and r.terminal)
        _, said = detached(cli, "slow-chain")
        assert NO_WORKER not in said
    finally:
        stop(worker)
    assert heartbeats(cli) == []  # a worker that stops removes its heartbeat

    (tmp := cli.cwd / "ask.json").write_text(json.dumps(ASKING))
    cli.setup("graph", "import", str(tmp))
    parked = cli.json("graph", "run", "assistant", "ask-first", "--model", CHAIN_MODEL)
    assert parked["status"] == "waiting_human"
    answered = cli("decisions", "answer", parked["waiting"]["decision_id"], "--text", "yes")
    assert NO_WORKER in answered.stderr


# -- 2. Ctrl-C during graph run --------------------------------------------------------


def test_ctrl_c_says_the_run_stays_queued_and_exits_130(cli: Cli) -> None:
    cli.setup("graph", "import", str(CHAIN))
    proc = cli.spawn("graph", "run", "assistant", "slow-chain", "--model", CHAIN_MODEL)

    def in_second() -> RunRecord | None:
        found = with_mesh(cli.mesh_url, lambda m: Runs(m).list())
        rec = record_of(cli.mesh_url, found[0].run_id) if found else None
        return rec if rec is not None and "second" in rec.attempts else None

    rec = poll(in_second)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=scaled(15))
    assert proc.returncode == 130, err
    assert f"run {rec.run_id} stays queued" in err
    assert "plait worker" in err and f"plait graph cancel {rec.run_id}" in err
    assert "Traceback" not in err
    assert not record_of(cli.mesh_url, rec.run_id).terminal  # type: ignore[union-attr]


def test_a_second_ctrl_c_exits_at_once(cli: Cli) -> None:
    cli.setup("graph", "import", str(CHAIN))
    proc = cli.spawn("graph", "run", "assistant", "slow-chain", "--model", CHAIN_MODEL)
    poll(lambda: "second" in proc_stderr_so_far(cli))
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=scaled(10))
    assert proc.returncode == 130


def proc_stderr_so_far(cli: Cli) -> str:
    """What the run in flight has reached, by its record (the process's pipe is unread)."""
    found = with_mesh(cli.mesh_url, lambda m: Runs(m).list())
    rec = record_of(cli.mesh_url, found[0].run_id) if found else None
    return " ".join(rec.attempts) if rec is not None else ""


# -- 3. a foreground run serves its own run only ---------------------------------------


def test_a_foreground_run_serves_its_own_run_only(cli: Cli) -> None:
    cli.setup("graph", "import", str(CHAIN))
    other, _ = detached(cli, "slow-chain")
    mine = cli.json("graph", "run", "assistant", "slow-chain", "--model", CHAIN_MODEL)
    assert mine["status"] == "done"
    untouched = record_of(cli.mesh_url, other)
    assert untouched is not None and untouched.visits == {} and not untouched.terminal

    worker = start_worker(cli)
    try:
        done = poll(lambda: (r := record_of(cli.mesh_url, other)) is not None and r.terminal)
        assert done
    finally:
        stop(worker)
    assert record_of(cli.mesh_url, other).status == "done"  # type: ignore[union-attr]


def test_a_foreground_run_hands_its_run_to_a_live_worker(cli: Cli) -> None:
    cli.setup("graph", "import", str(CHAIN))
    worker = start_worker(cli)
    try:
        done = cli("graph", "run", "assistant", "slow-chain", "--model", CHAIN_MODEL, "--json")
    finally:
        stop(worker)
    run_id = json.loads(done.stdout)["run_id"]
    assert NO_WORKER not in done.stderr

    async def actors(mesh: Mesh) -> list[str]:
        return [e.actor for e in await read_events(mesh, run_id) if e.type == "node.committed"]

    committers = with_mesh(cli.mesh_url, actors)
    assert len(committers) == 3 and all(str(worker.pid) in a for a in committers)


def test_a_worker_starting_mid_run_commits_no_visit_twice(cli: Cli) -> None:
    cli.setup("graph", "import", str(CHAIN))
    other, _ = detached(cli, "slow-chain")
    proc = cli.spawn("graph", "run", "assistant", "slow-chain", "--model", CHAIN_MODEL, "--json")
    poll(lambda: "second" in proc_stderr_so_far(cli) or proc.poll() is not None)
    worker = start_worker(cli)
    try:
        out, err = proc.communicate(timeout=scaled(30))
        assert proc.returncode == 0, err
        poll(lambda: (r := record_of(cli.mesh_url, other)) is not None and r.terminal)
    finally:
        stop(worker)
    mine = json.loads(out)["run_id"]
    for run_id in (mine, other):
        assert committed_once(cli.mesh_url, run_id) == [("first", 1), ("second", 1), ("third", 1)]
        assert record_of(cli.mesh_url, run_id).status == "done"  # type: ignore[union-attr]


# -- 4. the default mesh is found, not created -----------------------------------------


def bare(cli: Cli, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``plait ARGS`` in ``cwd`` with no --mesh and no PLAIT_MESH."""
    environ = {k: v for k, v in cli.env.items() if k not in ("PLAIT_MESH", "PLAIT_HOME")}
    return subprocess.run(
        [str(cli.argv()[0]), *args],
        cwd=cwd,
        env={**environ, **env},
        text=True,
        capture_output=True,
        timeout=scaled(60),
        check=False,
    )


def test_the_default_mesh_is_found_by_walking_up(cli: Cli, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (deep := project / "src" / "pkg").mkdir(parents=True)
    missing = bare(cli, deep, "graph", "runs")
    assert missing.returncode == 1
    assert "no plait mesh here or above: run `plait graph import FILE` or pass --mesh" in (
        missing.stderr
    )
    assert not (deep / ".plait").exists()

    imported = bare(cli, project, "graph", "import", str(CHAIN))
    assert imported.returncode == 0, imported.stderr
    assert f"created the mesh {project / '.plait' / 'mesh.db'}" in imported.stderr
    listed = bare(cli, deep, "graph", "list")
    assert listed.returncode == 0 and "slow-chain" in listed.stdout
    assert not (deep / ".plait").exists()

    home = tmp_path / "home"
    away = bare(cli, deep, "graph", "import", str(CHAIN), PLAIT_HOME=str(home))
    assert away.returncode == 0 and (home / "mesh.db").is_file()

    refused = bare(cli, deep, "graph", "runs", "--mesh", "sqlite:////nonexistent/dir/x.db")
    assert refused.returncode == 1 and "no mesh directory /nonexistent/dir" in refused.stderr
    assert not Path("/nonexistent").exists()


def test_a_relative_scripted_model_is_pinned_when_the_run_starts(cli: Cli) -> None:
    (where := cli.cwd / "models").mkdir()
    (where / "chain.yaml").write_text((DATA / "slow_chain.model.yaml").read_text())
    cli.setup("graph", "import", str(CHAIN))
    started = subprocess.run(
        cli.argv(
            "graph",
            "run",
            "assistant",
            "slow-chain",
            "--detach",
            "--json",
            "--model",
            "scripted:chain.yaml",
        ),
        cwd=where,
        env=cli.env,
        text=True,
        capture_output=True,
        check=True,
    )
    run_id = json.loads(started.stdout)["run_id"]
    rec = record_of(cli.mesh_url, run_id)
    assert rec is not None and rec.model == f"scripted:{where / 'chain.yaml'}"
    worker = start_worker(cli)  # in cli.cwd, where chain.yaml is not
    try:
        poll(lambda: (r := record_of(cli.mesh_url, run_id)) is not None and r.terminal)
    finally:
        stop(worker)
    assert record_of(cli.mesh_url, run_id).status == "done"  # type: ignore[union-attr]


# -- 5. a worker's own tools -----------------------------------------------------------

SHOUT_TOOLS = """
from plait.tools import ToolRegistry, tool

@tool(name="shout", description="Upper-case a text.",
      parameters={"type": "object", "properties": {"text": {"type": "string"}}})
async def shout(args, ctx):
    return args["text"].upper()

def make():
    return ToolRegistry([shout])
"""

SHOUTING = {
    "name": "shouting",
    "agent": "shouter",
    "entry": "ask",
    "nodes": [
        {"id": "ask", "type": "human", "ask": "Shout?", "next": "loud"},
        {"id": "loud", "type": "tool", "tool": "shout", "args": {"text": "{{ask}}"}},
    ],
}


def test_a_run_needing_a_tool_nobody_offers_stays_queued_until_a_worker_does(
    cli: Cli,
) -> None:
    (cli.cwd / "shout_tools.py").write_text(SHOUT_TOOLS)
    cli.env["PYTHONPATH"] = os.pathsep.join([str(cli.cwd), cli.env.get("PYTHONPATH", "")])
    cli("agents", "put", "shouter", "--tools", "shout")
    (graph := cli.cwd / "shouting.json").write_text(json.dumps(SHOUTING))
    refused = cli("graph", "import", str(graph), ok=False)
    assert 'unknown tool "shout"' in refused.stderr
    cli.env["PLAIT_TOOLS"] = "shout_tools:make"  # what a graph may name, here only
    cli("graph", "import", str(graph))
    del cli.env["PLAIT_TOOLS"]

    queued = cli("graph", "run", "shouter", "shouting", "--model", CHAIN_MODEL, "--json")
    run_id = json.loads(queued.stdout)["run_id"]
    assert "needs tool(s) shout that no serving worker offers: it stays queued" in queued.stderr
    assert "plait worker --tools" in queued.stderr

    plain = start_worker(cli)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(iter(plain.stderr.readline, "")))  # type: ignore[union-attr]
    reader.start()
    try:
        poll(lambda: any("needs tool(s) shout" in line for line in said))
    finally:
        plain.send_signal(signal.SIGTERM)
        assert plain.wait(timeout=scaled(15)) == 0
        reader.join(timeout=5)
        plain.stdout.close()  # type: ignore[union-attr]
        plain.stderr.close()  # type: ignore[union-attr]
    rec = record_of(cli.mesh_url, run_id)
    assert rec is not None and rec.visits == {} and not rec.terminal  # no node ran

    tooled = start_worker(cli, "--tools", "shout_tools:make")
    try:
        assert "shout" in next(b for b in heartbeats(cli) if b.pid == tooled.pid).tools
        waiting = poll(
            lambda: (
                (r := record_of(cli.mesh_url, run_id)) is not None
                and r.status == "waiting_human"
                and r
            )
        )
        cli("graph", "resume", run_id, "hello")
        done = poll(lambda: (r := record_of(cli.mesh_url, run_id)) is not None and r.terminal and r)
    finally:
        stop(tooled)
    assert waiting and done.status == "done"
    assert with_mesh(cli.mesh_url, lambda m: Runs(m).output(done)) == "HELLO"


TALLY_TOOLS = """
from pathlib import Path
from plait.tools import ToolRegistry, tool

@tool(name="shout", description="Upper-case a text, and say which run called.",
      parameters={"type": "object", "properties": {"text": {"type": "string"}}},
      idempotent=True)
async def shout(args, ctx):
    with (Path(__file__).parent / "calls.txt").open("a") as calls:
        calls.write(f"{ctx.run_id}\\n")
    return args["text"].upper()

def make():
    return ToolRegistry([shout])
"""
# Idempotent: a takeover wake that finds a queued run's first claim, its wake handed
# back and not yet handled, judges it interrupted; such a node is run again, not asked.

SHOUTING_NOW = {
    "name": "shouting-now",
    "agent": "shouter",
    "entry": "loud",
    "nodes": [{"id": "loud", "type": "tool", "tool": "shout", "args": {"text": "hi"}}],
}


def serving(cli: Cli, *args: str) -> subprocess.Popen[str]:
    """A worker with the default visibility timeout (a message a loaded machine takes
    long to refuse is not delivered again meanwhile), once its heartbeat is in the mesh."""
    worker = cli.spawn("worker", *args)
    poll(lambda: any(b.pid == worker.pid for b in heartbeats(cli)))
    return worker


def test_runs_in_partitions_of_a_worker_lacking_their_tool_move_to_one_offering_it(
    cli: Cli,
) -> None:
    """A worker holding every partition, without the tool its runs need, leaves the
    partitions of those runs to a worker that offers it once that one is live; every
    run is done, each tool call made once."""
    (cli.cwd / "tally_tools.py").write_text(TALLY_TOOLS)
    cli.env["PYTHONPATH"] = os.pathsep.join([str(cli.cwd), cli.env.get("PYTHONPATH", "")])
    cli.setup("agents", "put", "shouter", "--tools", "shout")
    (graph := cli.cwd / "shouting-now.json").write_text(json.dumps(SHOUTING_NOW))
    cli.env["PLAIT_TOOLS"] = "tally_tools:make"
    cli.setup("graph", "import", str(graph))
    del cli.env["PLAIT_TOOLS"]

    plain = serving(cli)  # takes every partition: each run's is one it keeps or not
    run_ids = [
        json.loads(
            cli.setup(
                "graph",
                "run",
                "shouter",
                "shouting-now",
                "--model",
                CHAIN_MODEL,
                "--detach",
                "--json",
            ).stdout
        )["run_id"]
        for _ in range(10)
    ]
    tooled = serving(cli, "--tools", "tally_tools:make")
    try:
        # Shares split half and half: the runs left in the plain worker's half make it
        # ask the tooled worker to serve their partitions.
        poll(lambda: any(m.avoids for m in with_mesh(cli.mesh_url, read_members)))
        done = [
            poll(
                lambda run_id=run_id: (
                    (r := record_of(cli.mesh_url, run_id)) is not None and r.terminal and r
                ),
                timeout=60,
            )
            for run_id in run_ids
        ]
    finally:
        stop(tooled)
        stop(plain)
    assert {r.status for r in done} == {"done"}
    calls = Counter((cli.cwd / "calls.txt").read_text().split())
    assert calls == Counter(run_ids)  # each run's call made once, by the tooled worker


# -- 6. agent profiles from the CLI ----------------------------------------------------


def test_agents_put_list_show(cli: Cli) -> None:
    (notes := cli.cwd / "notes.txt").write_text("Be brief.")
    cli(
        "agents", "put", "writer", "--tools", "read_file,bash", "--pre-approve", "read_file",
        "--model", "openai:gpt-4o-mini", "--instructions", str(notes),
    )  # fmt: skip
    shown = cli.json("agents", "show", "writer")
    assert shown == {
        "name": "writer",
        "model": "openai:gpt-4o-mini",
        "system_prompt": "Be brief.",
        "tools": ["read_file", "bash"],
        "pre_approved": ["read_file"],
        "delegates": [],
        "workspace": None,
        "allow_hosts": [],
        "sandbox": None,
        "sandbox_network": False,
        "tool_env": [],
    }
    assert [a["name"] for a in cli.json("agents", "list")] == ["assistant", "writer"]
    assert "writer" in cli("agents", "list").stdout

    stray = cli("agents", "put", "x", "--tools", "bash", "--pre-approve", "read_file", ok=False)
    assert stray.returncode == 1 and "does not have: read_file" in stray.stderr
    unknown = cli("agents", "show", "ghost", ok=False)
    assert unknown.returncode == 1 and "plait agents put ghost --tools" in unknown.stderr
