"""Chaos on Redis or PostgreSQL: runs asking people while their servers are SIGKILLed.

Each run (graph ``chaos``) goes through a revise loop (``draft -> review``, sent back
once), a fan-out of three ``fetch`` instances with ``on_failure: collect`` (the third
always fails and is kept; the fan-in goes on with the other two), a subgraph
(``chaos-sign``: ``summarise``, then a person's ``confirm``, asked through the parent)
and a person's ``approve`` before ``ship``: 12 visits of its own, 2 of its child run's,
2 decisions. Runs are started a few a second on Redis and served by 3 processes with
one-second leases: ``plait worker`` processes (``--runtime local``, the default) or 3
Ray hosts (``--runtime ray``, on a Ray cluster this benchmark starts). Every 300–700
ms one of them, chosen at random, is SIGKILLed: a local worker is started again in its
place, a Ray host is restarted by Ray. A script answers each question at a random
moment after it is asked. The kills go on for ``--seconds`` (at least 60 by default),
then the runs are let finish. At the end every run (and child run) must be done with
its own output, every audit chain must verify, every (node, visit) must be committed
exactly once, the failed fetch kept by ``collect``, and every decision raised exactly
once and answered exactly once.

Figures: ``chaos_runs_done`` (of the runs started), ``chaos_kills``,
``chaos_double_commits`` (0) and ``chaos_lost`` (0: runs not done or not as expected,
visits missing, decisions missing, unanswered, raised twice or answered twice).

Run: ``python bench/chaos.py [--mesh redis|postgres] [--runtime ray] [--runs 300]
[--seconds 60] [--json]``; ``--mesh postgres`` runs it on the PostgreSQL of
``PLAIT_BENCH_POSTGRES`` in a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from _common import (
    Figure,
    postgres_mesh_url,
    postgres_scratch,
    redis_mesh_url,
    redis_scratch,
    report,
)

from plait.actors import load_partitions
from plait.decisions import DecisionAnswerer, Human
from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.mesh import Mesh, open_mesh
from plait.runs import RunRecord, Runs
from plait.runs.audit import read_events
from plait.runs.record import child_run_id

BENCH = "chaos"
ROOT = Path(__file__).resolve().parent.parent
PLAIT = Path(sys.executable).with_name("plait")
SERVERS = 3
PARTITIONS = 16
LEASE_S = 1.0
ANSWER_WITHIN_S = 2.0
FINISH_WITHIN_S = 180.0

FETCHES = 3
GRAPH = {
    "name": "chaos", "agent": "assistant", "entry": "draft", "budget": 40,
    "nodes": [
        {"id": "draft", "type": "agent", "prompt": "Draft {{input}}", "next": "review"},
        {"id": "review", "type": "verifier", "prompt": "Review {{draft}}",
         "verdicts": {"again": "draft", "ok": "research"}},
        {"id": "research", "type": "fan_out",
         "specs": [{"kind": "broadcast", "target_node_id": "fetch", "count": FETCHES,
                    "on_failure": "collect"}]},
        {"id": "fetch", "type": "agent", "prompt": "Fetch sources for {{draft}}",
         "next": "gather"},
        {"id": "gather", "type": "fan_in", "next": "sign"},
        {"id": "sign", "type": "subgraph", "graph": "chaos-sign", "input": "{{gather}}",
         "next": "approve"},
        {"id": "approve", "type": "human", "ask": "Ship {{draft}}?", "next": "ship"},
        {"id": "ship", "type": "agent", "prompt": "Ship {{draft}} ({{sign}}, {{approve}})"},
    ],
}  # fmt: skip
CHILD = {
    "name": "chaos-sign", "agent": "assistant", "entry": "summarise",
    "nodes": [
        {"id": "summarise", "type": "agent", "prompt": "Summarise {{input}}",
         "next": "confirm"},
        {"id": "confirm", "type": "human", "ask": "Sign {{summarise}} off?"},
    ],
}  # fmt: skip
FAILING = f"fetch[{FETCHES - 1}]"
"""The fetch instance that always fails: ``collect`` keeps it and the run goes on."""
VISITS = Counter({("draft", 1): 1, ("review", 1): 1, ("draft", 2): 1, ("review", 2): 1,
                  ("research", 1): 1, **{(f"fetch[{i}]", 1): 1 for i in range(FETCHES)},
                  ("gather", 1): 1, ("sign", 1): 1, ("approve", 1): 1, ("ship", 1): 1})  # fmt: skip
CHILD_VISITS = Counter({("summarise", 1): 1, ("confirm", 1): 1})


def script(path: Path) -> str:
    """A model whose answers quote their prompts, so each run's output carries its own
    item (outputs cannot cross runs); its model nodes take a moment, so a kill often
    lands on one in flight."""
    rules: list[dict[str, Any]] = [
        {"node": "review", "visit": 1, "text": "again"},
        {"node": "review", "text": "ok"},
        {"node": FAILING, "error": "source unreachable"},
        {"node": "draft", "text": "draft({{prompt}})", "delay_ms": 100},
        {"node": "fetch", "text": "{{instance}}: sources for {{prompt}}", "delay_ms": 100},
        {"node": "summarise", "text": "summary of {{prompt}}"},
        {"node": "ship", "text": "shipped: {{prompt}}", "delay_ms": 100},
    ]
    path.write_text(json.dumps({"rules": rules}))
    return f"scripted:{path}"


class Zero(Figure):
    """A count that must be 0: its ratio is 1 when it is, else 0."""

    __slots__ = ()

    @property
    def ratio(self) -> float:
        """1 for 0, else 0."""
        return 1.0 if self.value == 0 else 0.0


class LocalServers:
    """``plait worker`` processes; a killed one is started again in its place."""

    def __init__(self, url: str, model: str, logs: Path) -> None:
        self.url, self.model, self.logs = url, model, logs
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started = 0

    def start(self) -> None:
        """One more worker."""
        self.started += 1
        args = [str(PLAIT), "worker", "--mesh", self.url, "--model", self.model,
                "--lease-s", str(LEASE_S), "--partitions", str(PARTITIONS),
                "--visibility-timeout", "1", "--processes", "1"]  # fmt: skip
        with (self.logs / f"worker-{self.started}.log").open("wb") as log:
            self.procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log))

    async def kill_one(self, rng: random.Random) -> None:
        """SIGKILL a random worker and start another."""
        victim = rng.choice(self.procs)
        victim.kill()
        victim.wait()
        self.procs.remove(victim)
        self.start()

    async def close(self) -> None:
        """SIGTERM every worker (each drains)."""
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class RayServers:
    """Ray hosts; a killed one is restarted by Ray."""

    def __init__(self, url: str, model: str, cwd: str) -> None:
        import ray

        from plait.cluster import RunsSpec

        self.namespace = f"chaos-{uuid.uuid4().hex[:8]}"
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        )
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(num_cpus=2, include_dashboard=False, namespace=self.namespace,
                 log_to_driver=False)  # fmt: skip
        self.url = url
        self.spec = RunsSpec(model=model, cwd=cwd, lease_s=LEASE_S, partitions=PARTITIONS,
                             visibility_timeout_ms=1000)  # fmt: skip

    async def start_all(self) -> None:
        """Start the hosts."""
        from plait.cluster import scale

        await scale(self.url, self.spec, SERVERS, namespace=self.namespace)

    async def kill_one(self, rng: random.Random) -> None:
        """SIGKILL a random host's process that answers (one restarting is skipped)."""
        from plait.cluster import host_infos

        live = [i for i in await host_infos(self.namespace, timeout_s=0.3) if i.get("pid")]
        if live:
            os.kill(rng.choice(live)["pid"], signal.SIGKILL)

    async def close(self) -> None:
        """Drain the hosts and leave the cluster."""
        import ray

        from plait.cluster import drain

        await drain(namespace=self.namespace)
        ray.shutdown()


async def drive(
    mesh: Mesh, servers: Any, count: int, seconds: float, rng: random.Random
) -> tuple[list[str], int, Counter[str]]:
    """Start the runs over ``seconds``, answer each question (a run's own, or its child
    run's through it), and kill a server every 300–700 ms meanwhile; the run ids, the
    kills, and how often each decision was answered by this script."""
    runs = Runs(mesh)
    ids: list[str] = []
    answered: Counter[str] = Counter()
    due: dict[str, float] = {}
    started = time.monotonic()
    next_kill = started + rng.uniform(0.3, 0.7)
    kills = 0
    left: set[str] = set()
    while True:
        now = time.monotonic()
        chaos = now - started < seconds
        want = min(count, int(count * (now - started) / (seconds * 0.8)) + 1)
        while len(ids) < want:
            rec = await runs.start("assistant", "chaos", f"item <{len(ids)}>")
            ids.append(rec.run_id)
            left.add(rec.run_id)
        if chaos and now >= next_kill:
            await servers.kill_one(rng)
            kills += 1
            next_kill = now + rng.uniform(0.3, 0.7)
        for run_id in list(left):
            rec = await runs.get(run_id)
            if rec.terminal:
                left.discard(run_id)
                continue
            if not rec.status.startswith("waiting"):
                continue
            asking = await runs.asks(rec)
            asked = asking[1].decision_id if asking is not None else None
            if asked and not answered[asked]:
                when = due.setdefault(asked, now + rng.uniform(0, ANSWER_WITHIN_S))
                if now >= when:
                    await runs.resume(rec.run_id, "yes", by=Human("chaos"))
                    answered[asked] += 1
        if not chaos and len(ids) == count and not left:
            return ids, kills, answered
        if now - started > seconds + FINISH_WITHIN_S:
            for run_id in sorted(left):
                rec = await runs.get(run_id)
                print(f"not finished: {run_id} {rec.status} attempts={rec.attempts} "
                      f"visits={rec.visits} waiting={rec.waiting}", file=sys.stderr)  # fmt: skip
            raise TimeoutError(f"{len(left)} runs did not finish")
        await asyncio.sleep(0.1)


async def _commits(mesh: Mesh, run_id: str) -> Counter[tuple[str, int]]:
    events = await read_events(mesh, run_id)
    return Counter((e.node, e.visit) for e in events if e.type == "node.committed")


async def check(mesh: Mesh, ids: list[str], answered: Counter[str]) -> tuple[int, int, int]:
    """Runs done, visits committed more than once, and what was lost: runs (or child
    runs) not done or not with their own output, the failed fetch not kept, visits
    missing, decisions missing, raised twice, unanswered or answered other than once."""
    runs, desk = Runs(mesh), DecisionAnswerer(mesh)
    raised = Counter((d.run_id, d.node) for d in await desk.list())
    decisions = {(d.run_id, d.node): d for d in await desk.list()}
    done = doubles = lost = 0
    for i, run_id in enumerate(ids):
        rec: RunRecord = await runs.get(run_id)
        child_id = child_run_id(run_id, "sign", 1)
        child = await runs.get(child_id)
        output = await runs.output(rec) if rec.status == "done" else None
        kept = rec.outputs.get(FAILING)
        if (
            rec.status == "done"
            and child.status == "done"
            and isinstance(output, str)
            and f"<{i}>" in output
            and kept is not None
            and kept.error is not None
        ):
            done += 1
        else:
            lost += 1
            print(f"not done right: {run_id} {rec.status} error={rec.error!r} child "
                  f"{child.status} error={child.error!r}", file=sys.stderr)  # fmt: skip
        for one, expected in ((run_id, VISITS), (child_id, CHILD_VISITS)):
            await runs.verify(one)  # raises if the chain is broken
            committed = await _commits(mesh, one)
            doubles += sum(n - 1 for n in committed.values() if n > 1)
            lost += sum(1 for visit in expected if visit not in committed)
        for asker, node in ((run_id, "approve"), (child_id, "confirm")):
            decision = decisions.get((asker, node))
            if (
                decision is None
                or raised[(asker, node)] != 1
                or decision.status != "answered"
                or answered[decision.id] != 1
            ):
                lost += 1
    return done, doubles, lost


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else BENCH)
    parser.add_argument("--json", action="store_true", help="print one JSON object per figure")
    parser.add_argument("--runtime", choices=["local", "ray"], default="local")
    parser.add_argument("--mesh", choices=["redis", "postgres"], default="redis")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the kills go on")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    scratch_of = {"redis": redis_scratch, "postgres": postgres_scratch}[args.mesh]
    async with scratch_of() as scratch:
        if scratch is None:
            return
        if isinstance(scratch, str):
            url = postgres_mesh_url(scratch)
        else:
            url = redis_mesh_url(scratch[1])
        with tempfile.TemporaryDirectory(prefix="plait-chaos-") as tmp:
            model = script(Path(tmp) / "chaos.model.json")
            async with open_mesh(url) as mesh:
                await import_graph(mesh, load_graph(CHILD))
                await import_graph(mesh, load_graph(GRAPH))
                await load_partitions(mesh, PARTITIONS)  # before a run start fixes the default
                servers: Any
                if args.runtime == "ray":
                    servers = RayServers(url, model, tmp)
                    await servers.start_all()
                else:
                    servers = LocalServers(url, model, Path(tmp))
                    for _ in range(SERVERS):
                        servers.start()
                try:
                    ids, kills, answered = await drive(mesh, servers, args.runs, args.seconds, rng)
                finally:
                    await servers.close()
                done, doubles, lost = await check(mesh, ids, answered)
    note = f"{args.mesh}, {args.runtime}, {SERVERS} servers, seed {seed}"
    report(
        [
            Figure(BENCH, "chaos_runs_done", done, "runs", len(ids), 1.0, note),
            Figure(BENCH, "chaos_kills", kills, "kills", kills, 1.0, f"over {args.seconds:.0f} s"),
            Zero(BENCH, "chaos_double_commits", doubles, "visits", 0.0, 1.0, "must be 0"),
            Zero(BENCH, "chaos_lost", lost, "runs/decisions", 0.0, 1.0, "must be 0"),
        ],
        as_json=args.json,
        title=f"chaos ({args.runtime})",
    )


if __name__ == "__main__":
    asyncio.run(main())
