"""A network partition, not a crash: a Ray host on a second machine is cut off and fenced.

The second machine is a network namespace with an address of its own, joined to this
one by a veth pair (:mod:`netns`). A Redis server of the test's own and a Ray head of
the test's own (not the session's) listen on the host's end of the pair; a Ray worker
node runs inside the namespace, and two hosts serve runs, one on each node (each asks
for a custom resource only its node offers): one reaches Redis across the veth, one
does not need to. With the namespaced host running a node of one of its runs, its link is cut
(``ip link set ... down``): its process goes on, its packets go nowhere. Its leases
expire, the other host takes every partition and finishes every run. When the link
comes back the cut-off host (the same process: Ray did not restart it) commits
nothing it no longer owns — every record keeps the version it had, every visit its
committer — and rejoins with its share of the partitions. ``plait cluster scale 0``
drains both at the end.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from netns import Namespace, NoNamespaces, namespace

from plait.actors import partition_of
from plait.actors.leases import read_leases, read_members
from plait.mesh import Mesh
from plait.mesh._base import now_ms
from plait.runs import Runs
from plait.runs.record import owner_id
from tests._support.timing import scaled

from .helpers import poll
from .test_crash import with_mesh
from .test_heartbeats import committed_once
from .test_ownership import (
    CHAIN_MODEL,
    CHAIN_VISITS,
    COUNT,
    all_terminal,
    bash_ready,
    committers,
    effects,
    hosts_pid,
    marked_chain,
    record_version,
    records,
    start_runs,
)
from .test_ray_hosts import ray_cli

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    # A cluster of its own, not the session's; in the session's group all the same, so
    # that two Ray clusters never compete for this machine's cores at once.
    pytest.mark.xdist_group("ray"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

# The head gives a node up only after a minute without an answer: the partition here is
# one Ray rides out, so what the test sees is plait's leases and fences, not a node lost.
PATIENT_HEAD = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "60"}


# Where each host runs: a custom resource of the head's, one of the namespaced node's.
PLACES = ("outside", "inside")

# A driver that starts the two hosts (detached, as `plait worker --runtime ray` does)
# with one-second leases on 8 partitions, each on its node; it prints their info.
PLACE_HOSTS = f"""
import json, sys
import ray
from plait.actors.ray import start_host
from plait.cluster import RunsSpec

head, namespace, url, cwd = sys.argv[1:]
ray.init(address=head, namespace=namespace, log_to_driver=False)
spec = RunsSpec(cwd=cwd, lease_s=1.0, partitions={COUNT}, visibility_timeout_ms=1000)
handles = [
    start_host(url, spec, name=f"host-{{i}}", namespace=namespace, detached=True,
               resources={{place: 0.01}})
    for i, place in enumerate({PLACES!r})
]
print(json.dumps(ray.get([h.ready.remote() for h in handles])))
"""


@dataclass
class TwoMachines:
    """This machine and one in a network namespace, a Redis and a Ray head between them."""

    ns: Namespace
    url: str
    head: str
    redis_port: int

    def unsent(self) -> int:
        """Bytes the namespace's sockets to Redis sent and Redis has not acknowledged."""
        ns = self.ns
        listed = subprocess.run(
            ns.argv(["ss", "-tnH", "dst", f"{ns.host_ip}:{self.redis_port}"]),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return sum(int(line.split()[2]) for line in listed.splitlines() if line.strip())


def _redis_server(host_ip: str, workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A redis-server on a free port of ``host_ip``, answering; it and its port."""
    with socket.socket() as probe:
        probe.bind((host_ip, 0))
        port = int(probe.getsockname()[1])
    workdir.mkdir()
    proc = subprocess.Popen(
        ["redis-server", "--bind", host_ip, "--port", str(port), "--protected-mode", "no",
         "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(host=host_ip, port=port, socket_connect_timeout=0.2)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return proc.poll() is not None  # it died: stop polling, fail below

    try:
        poll(answers, timeout=10)
    finally:
        client.close()
    assert proc.poll() is None, "redis-server did not start"
    return proc, port


def _nodes_alive(head: str) -> int:
    """How many nodes the head at ``head`` counts active (``ray status``)."""
    from ray_cluster import RAY, ray_env

    said = subprocess.run(
        [str(RAY), "status", "--address", head],
        capture_output=True,
        text=True,
        env=ray_env(),
        check=False,
    ).stdout
    active = said.split("Active:", 1)[-1].split("Pending:", 1)[0]
    return active.count("node_")


@pytest.fixture
def two_machines(tmp_path: Path) -> Iterator[TwoMachines]:
    """A namespace, a Redis and a Ray head on the host's end of its link, and a Ray node
    in it; all of them ended after the test, whatever happened."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'plait[ray]'")
    from ray_cluster import join_node, start_head

    with contextlib.ExitStack() as stack:
        try:
            ns = stack.enter_context(namespace())
        except NoNamespaces as exc:
            pytest.skip(f"cannot make a network namespace here: {exc}")
        server, port = _redis_server(ns.host_ip, tmp_path / "redis")
        stack.callback(_end, server)
        head = start_head(1, {PLACES[0]: 1}, ip=ns.host_ip, env=PATIENT_HEAD)
        stack.callback(head.stop)
        node = join_node(
            head.address,
            {PLACES[1]: 1},
            ip=ns.ip,
            inside=ns.argv,
            joined=lambda: _nodes_alive(head.address) > 1,
        )
        stack.callback(node.stop)
        stack.callback(ns.heal)  # a test that failed while cut: let the node stop cleanly
        yield TwoMachines(ns, f"redis://{ns.host_ip}:{port}/0?prefix=p:", head.address, port)


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def holders(url: str) -> dict[str, set[int]]:
    """The partitions each runtime holds on a lease not yet expired, by host id."""

    async def read(mesh: Mesh) -> dict[str, set[int]]:
        now = now_ms()
        found: dict[str, set[int]] = {}
        for n, (lease, _) in (await read_leases(mesh)).items():
            if lease.holder is not None and lease.expires_ms > now:
                found.setdefault(lease.holder, set()).add(n)
        return found

    return with_mesh(url, read)


def in_flight(url: str, host: str) -> int | None:
    """The messages in flight ``host``'s heartbeat reports (None: no live heartbeat)."""

    async def read(mesh: Mesh) -> int | None:
        return next((m.in_flight for m in await read_members(mesh) if m.host == host), None)

    return with_mesh(url, read)


def test_a_host_cut_off_by_a_network_partition_is_fenced_and_rejoins(
    two_machines: TwoMachines, tmp_path: Path
) -> None:
    machines = two_machines
    ns = machines.ns
    url = machines.url
    cli = ray_cli(tmp_path, url)
    marks = tmp_path / "started.txt"
    bash_ready(cli, marked_chain(marks))
    namespace = f"t{uuid.uuid4().hex[:8]}"
    scale = ("cluster", "scale", "--address", machines.head, "--namespace", namespace)
    inputs = [f"r{i}" for i in range(8)]
    try:
        placed = subprocess.run(
            [sys.executable, "-c", PLACE_HOSTS, machines.head, namespace, url, str(tmp_path)],
            env=cli.env, capture_output=True, text=True, timeout=scaled(90), check=True,
        ).stdout  # fmt: skip
        outside, inside = (info["host"] for info in json.loads(placed.splitlines()[-1]))
        assert ns.holds(hosts_pid(inside) or 0) and not ns.holds(hosts_pid(outside) or 0)
        cut_off, other = inside, outside
        held = poll(lambda: (found := holders(url)) and sorted(map(len, found.values())) == [4, 4]
                    and found, timeout=scaled(30))  # fmt: skip
        run_ids = start_runs(url, "marked-chain", inputs, CHAIN_MODEL)
        owned = [r for r in run_ids if partition_of(owner_id(r), COUNT) in held[cut_off]]

        def running_there() -> list[str]:
            started = effects(marks)
            return [
                rec.run_id
                for rec, given in zip(records(url, run_ids), inputs, strict=True)
                if "second" in rec.attempts
                and rec.attempts["second"].host == cut_off
                and started[given]
            ]

        cut_runs = poll(running_there, timeout=30)
        ns.cut()
        # Read once cut: the host ran on until the cut, and what it committed by then
        # is its own; nothing it sends from now on reaches Redis.
        before = {r: committers(url, r) for r in run_ids}
        # Its leases expire; the other host takes every partition and ends every run.
        poll(lambda: holders(url) == {other: set(range(COUNT))}, timeout=30)
        done = all_terminal(url, run_ids, timeout=60)
        versions = {r: record_version(url, r) for r in run_ids}
        finished = {r: committers(url, r) for r in run_ids}
        ns.heal()
        # The same host (not restarted) rejoins with its share, having nothing in flight
        # and every byte it sent while cut off delivered to Redis.
        poll(
            lambda: (
                {h: len(p) for h, p in holders(url).items()} == {cut_off: 4, other: 4}
                and in_flight(url, cut_off) == 0
                and machines.unsent() == 0
            ),
            timeout=60,
        )
        after = {r: record_version(url, r) for r in run_ids}
        again = {r: committers(url, r) for r in run_ids}
    finally:
        drained = cli(*scale, "0", ok=False, timeout=60)  # drains both
    assert drained.returncode == 0, drained.stderr
    assert holders(url) == {}
    assert cut_runs and set(cut_runs) <= set(owned)
    # Fenced: nothing the cut-off host did once cut off reached a record.
    assert after == versions
    assert again == finished
    ran = effects(marks)
    for rec, given in zip(done, inputs, strict=True):
        assert rec.status == "done", rec.error
        assert rec.attempts == {} and rec.ended_detail == "completed"
        assert committed_once(url, rec.run_id) == CHAIN_VISITS
        assert 1 <= ran[given] <= 1 + rec.usage.retries, (given, ran, rec.usage)
    for run_id in owned:
        # What the cut-off host had not committed before the cut, the other host did.
        for visit, host in finished[run_id].items():
            assert visit in before[run_id] or host == other, (run_id, visit, host)
    for rec, given in zip(done, inputs, strict=True):
        if rec.run_id in cut_runs:  # its node ran on the cut-off host, then again
            assert rec.usage.retries == 1 and ran[given] == 2, (given, ran, rec.usage)
            assert finished[rec.run_id][("second", 1)] == other
    verified = with_mesh(url, lambda mesh: _verify_all(mesh, run_ids))
    assert verified == len(run_ids)


async def _verify_all(mesh: Mesh, run_ids: list[str]) -> int:
    runs = Runs(mesh)
    for run_id in run_ids:
        await runs.verify(run_id)  # type: ignore[arg-type]
    return len(run_ids)
