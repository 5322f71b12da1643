"""Ray hosts on one Redis: transitions per second, the Ray runtime beside the local one,
and how fast a SIGKILLed host's partitions are taken over.

Runs of a ``draft -> verify`` loop (9 transitions each, an instant scripted model) are
written by this process and served by others, each on a key prefix of its own on the
same Redis: a ``plait worker`` process (the local, leased runtime) and Ray hosts
(:mod:`plait.cluster`) on a Ray cluster this benchmark starts on the machine.

- ``cluster_1_host`` / ``cluster_2_hosts``: transitions per second of the runs with one
  Ray host, then two (the second is judged against the first).
- ``ray_vs_local``: the Ray host's rate over the local worker's, measured in alternate
  rounds in the same run (= local cost per node / Ray cost per node; target 0.8: a host
  is a leased runtime inside a Ray process, so it should cost almost nothing extra).
- ``takeover_s``: the median time from SIGKILL of a host's process until every
  partition it held is held, unexpired, by a live host; judged against lease expiry +
  Ray's restart of the host (measured) + 1 s.

Run: ``python bench/cluster.py [--json] [--seconds 1.0]`` (``--seconds`` is unused:
each round serves a fixed number of runs). Redis is ``PLAIT_BENCH_REDIS``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _common import (
    LOOP,
    Cost,
    Figure,
    alternate,
    parse_args,
    redis_mesh_url,
    redis_scratch,
    report,
)

from plait.actors.leases import read_leases, read_members
from plait.cluster import RunsSpec, drain, host_infos, scale
from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.mesh import Mesh, open_mesh
from plait.mesh._base import now_ms
from plait.runs import Runs

BENCH = "cluster"
ROOT = Path(__file__).resolve().parent.parent
RUNS = 200
FAILS = 3  # 4 drafts, 4 verdicts, a publish: 9 transitions per run
ROUNDS = 3
KILLS = 3
PARTITIONS = 8
LEASE_S = 1.0
RAY_VS_LOCAL_TARGET = 0.8

RULES = [
    {"node": "verify", "visit": FAILS + 1, "text": "Good now.\npass"},
    {"node": "verify", "text": "Needs a source.\nfail"},
    {"text": "A draft."},
]


async def serve_round(mesh: Mesh) -> float:
    """Start :data:`RUNS` runs and wait until all are done; transitions per second."""
    runs = Runs(mesh)
    started = time.perf_counter()
    ids = [(await runs.start("assistant", "loop", f"x{i}")).run_id for i in range(RUNS)]
    left = set(ids)
    transitions = 0
    while left:
        await asyncio.sleep(0.05)
        for run_id in list(left):
            rec = await runs.get(run_id)
            if rec.terminal:
                if rec.status != "done":
                    raise RuntimeError(f"run {run_id} ended {rec.status}: {rec.error}")
                transitions += sum(rec.visits.values())
                left.discard(run_id)
    return transitions / (time.perf_counter() - started)


async def wait_members(mesh: Mesh, count: int, within_s: float = 60.0) -> None:
    """Wait until ``count`` members serve and every partition is held."""
    deadline = time.monotonic() + within_s
    while True:
        members = await read_members(mesh)
        leases = await read_leases(mesh)
        now = now_ms()
        held = sum(1 for lease, _ in leases.values() if lease.holder and lease.expires_ms > now)
        if len(members) == count and held == PARTITIONS:
            shares = {
                m.host: sum(1 for lease, _ in leases.values() if lease.holder == m.host)
                for m in members
            }
            if max(shares.values()) - min(shares.values()) <= 1:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} members did not settle: {members}")
        await asyncio.sleep(0.05)


def start_local_worker(url: str, model: str, log: Path) -> subprocess.Popen[bytes]:
    """``plait worker`` (the local leased runtime) on ``url``."""
    plait = Path(sys.executable).with_name("plait")
    args = [str(plait), "worker", "--mesh", url, "--model", model,
            "--lease-s", str(LEASE_S), "--partitions", str(PARTITIONS),
            "--processes", "1"]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=out)


async def takeover(mesh: Mesh, namespace: str) -> tuple[float, float]:
    """SIGKILL host-0's process; seconds until its partitions are held by a live host,
    and until Ray's restart of it answers."""
    (info,) = [i for i in await host_infos(namespace) if i["name"] == "host-0"]
    dead = info["host"]
    leases = await read_leases(mesh)
    theirs = [n for n, (lease, _) in leases.items() if lease.holder == dead]
    os.kill(info["pid"], signal.SIGKILL)
    killed = time.perf_counter()
    taken = restarted = None
    while taken is None or restarted is None:
        await asyncio.sleep(0.02)
        now = now_ms()
        if taken is None:
            leases = await read_leases(mesh)
            if all(
                leases[n][0].holder not in (None, dead) and leases[n][0].expires_ms > now
                for n in theirs
            ):
                taken = time.perf_counter() - killed
        if restarted is None:
            found = [i for i in await host_infos(namespace, timeout_s=0.5) if i["name"] == "host-0"]
            if found and found[0].get("pid") not in (None, info["pid"]):
                restarted = time.perf_counter() - killed
        if time.perf_counter() - killed > 60:
            raise TimeoutError("the killed host's partitions were not taken over")
    await wait_members(mesh, 2)
    return taken, restarted


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else BENCH, argv)
    figures: list[Figure] = []
    async with redis_scratch() as scratch:
        if scratch is None:
            return
        _, prefix = scratch
        figures = await measure(prefix)
    report(figures, as_json=args.json, title="Ray hosts")


async def measure(prefix: str) -> list[Figure]:
    import ray

    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    # Hosts import this checkout, whatever the working directory of Ray's workers.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, namespace=namespace, log_to_driver=False)
    local_url, ray_url = redis_mesh_url(prefix + "local:"), redis_mesh_url(prefix + "ray:")
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
        model_file = Path(tmp) / "loop.model.json"
        model_file.write_text(json.dumps({"rules": RULES}))
        model = f"scripted:{model_file}"
        spec = RunsSpec(model=model, lease_s=LEASE_S, partitions=PARTITIONS, cwd=tmp)
        async with open_mesh(local_url) as local, open_mesh(ray_url) as remote:
            for mesh in (local, remote):
                await import_graph(mesh, load_graph(LOOP))
            worker = start_local_worker(local_url, model, Path(tmp) / "worker.log")
            try:
                await scale(ray_url, spec, 1, namespace=namespace)
                await wait_members(local, 1)
                await wait_members(remote, 1)
                await serve_round(local)  # warm both: imports, connections, caches
                await serve_round(remote)
                local_rates, ray_rates = await alternate(
                    ROUNDS, lambda: serve_round(local), lambda: serve_round(remote)
                )
                await scale(ray_url, spec, 2, namespace=namespace)
                await wait_members(remote, 2)
                await serve_round(remote)
                two = [await serve_round(remote) for _ in range(ROUNDS)]
                kills = [await takeover(remote, namespace) for _ in range(KILLS)]
            finally:
                worker.send_signal(signal.SIGTERM)
                worker.wait(30)
                await drain(namespace=namespace)
                ray.shutdown()
    one, local_best = max(ray_rates), max(local_rates)
    taken = statistics.median(k[0] for k in kills)
    restart = statistics.median(k[1] for k in kills)
    bound = LEASE_S + restart + 1.0
    return [
        Figure(BENCH, "cluster_1_host", one, "transitions/s", one, 1.0,
               f"{RUNS} runs of 9 transitions, best of {ROUNDS}"),
        Figure(BENCH, "cluster_2_hosts", max(two), "transitions/s", one, 1.0,
               "baseline: 1 host (2 cores shared by hosts, Redis and this process)"),
        Figure(BENCH, "ray_vs_local", 100 * one / local_best, "%", 100.0, RAY_VS_LOCAL_TARGET,
               f"1 Ray host {one:.0f}/s over plait worker {local_best:.0f}/s, "
               "alternate rounds"),
        Cost(BENCH, "takeover_s", taken, "s", bound, 1.0,
             f"median of {KILLS} SIGKILLs; bound = lease {LEASE_S:.0f} s + Ray restart "
             f"{restart:.2f} s + 1 s"),
    ]  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
