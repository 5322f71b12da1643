"""A real local Ray cluster for the test session: ``ray start --head --block`` once.

The head runs in a process group of its own, on free ports and in a temporary
directory of its own, so it neither meets nor stops another Ray cluster on the
machine; ending the session ends that group. Its workers import this checkout (and the
test packages, whose handlers are pickled by reference) through ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RAY = Path(sys.executable).with_name("ray")

CUSTOM_RESOURCE = "plait_test"
"""A custom resource the head offers one of (for dedicated-actor tests)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ray_env() -> dict[str, str]:
    """The environment Ray processes of the tests run in."""
    paths = [str(ROOT), str(ROOT / "tests")]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "RAY_USAGE_STATS_ENABLED": "0",
        # A cluster of one test session on 127.0.0.1: no token to share with drivers.
        "RAY_AUTH_MODE": "disabled",
        # Ray prints a line per worker it starts or restarts: not what a test reads.
        "RAY_DEDUP_LOGS": "0",
    }


@dataclass
class RayCluster:
    """A running head: its address and the process group to end it by."""

    address: str
    proc: subprocess.Popen[bytes]
    temp_dir: str

    def stop(self) -> None:
        """End the head's process group (its raylet, GCS and workers)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def start_head(
    num_cpus: int = 2,
    resources: dict[str, float] | None = None,
    *,
    ip: str = "127.0.0.1",
    env: Mapping[str, str] | None = None,
) -> RayCluster:
    """Start a head node at ``ip`` (its Ray settings in ``env``, ``RAY_...``) and wait
    until a driver can connect to it."""
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    args = [
        str(RAY), "start", "--head", "--block",
        "--port", str(port),
        "--node-ip-address", ip,
        "--num-cpus", str(num_cpus),
        "--resources", repr(resources or {CUSTOM_RESOURCE: 1}).replace("'", '"'),
        "--include-dashboard", "false",
        "--disable-usage-stats",
        "--dashboard-agent-listen-port", str(free_port()),
        "--dashboard-agent-grpc-port", str(free_port()),
        "--runtime-env-agent-port", str(free_port()),
        "--metrics-export-port", str(free_port()),
        "--temp-dir", temp_dir,
    ]  # fmt: skip
    log = Path(temp_dir) / "head.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args,
            env={**ray_env(), **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    cluster = RayCluster(f"{ip}:{port}", proc, temp_dir)
    deadline = time.monotonic() + 60
    while b"Ray runtime started" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            cluster.stop()
            raise RuntimeError(f"ray start failed:\n{log.read_text()}")
        time.sleep(0.1)
    return cluster


def join_node(
    head: str,
    resources: dict[str, float] | None = None,
    *,
    ip: str = "127.0.0.1",
    inside: Callable[[Sequence[str]], list[str]] | None = None,
    joined: Callable[[], bool] | None = None,
) -> RayCluster:
    """Start a second node joined to the head at ``head`` (one CPU), as a Ray worker
    machine would; it is up once the head counts it.

    Args:
        head: the head's address.
        resources: custom resources the node offers.
        ip: the node's address.
        inside: what runs the node's command line elsewhere (in a network namespace).
        joined: whether the head counts the node (default: this process, a driver of
            the head's cluster, asks Ray).
    """
    if joined is None:
        import ray

        alive = sum(1 for n in ray.nodes() if n["Alive"])
        cpus = ray.cluster_resources().get("CPU", 0)

        def joined() -> bool:
            # Counted alive, and its CPU in the resources the scheduler places by: a
            # node alive but not yet there is passed over by an actor asked onto it.
            return (
                sum(1 for n in ray.nodes() if n["Alive"]) > alive
                and ray.cluster_resources().get("CPU", 0) > cpus
            )

    args = [
        str(RAY), "start", "--block",
        "--address", head,
        "--node-ip-address", ip,
        "--num-cpus", "1",
        "--object-store-memory", str(200 * 1024 * 1024),
        "--resources", repr(resources or {}).replace("'", '"'),
        "--disable-usage-stats",
        "--dashboard-agent-listen-port", str(free_port()),
        "--dashboard-agent-grpc-port", str(free_port()),
        "--runtime-env-agent-port", str(free_port()),
        "--metrics-export-port", str(free_port()),
    ]  # fmt: skip
    temp_dir = tempfile.mkdtemp(prefix="rn", dir="/tmp")
    log = Path(temp_dir) / "node.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            inside(args) if inside else args,
            env=ray_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    node = RayCluster(head, proc, temp_dir)
    deadline = time.monotonic() + 60
    while not joined():
        if proc.poll() is not None or time.monotonic() > deadline:
            node.stop()
            raise RuntimeError(f"ray start --address failed:\n{log.read_text()}")
        time.sleep(0.2)
    return node


def connect(cluster: RayCluster) -> Any:
    """Connect this process to ``cluster`` as a driver; the ``ray`` module."""
    import ray

    for name in ("PYTHONPATH", "RAY_AUTH_MODE"):
        os.environ[name] = ray_env()[name]
    ray.init(address=cluster.address, namespace="plait-tests", log_to_driver=False)
    return ray
