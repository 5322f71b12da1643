"""The Ray runtime: leased runtimes hosted in durable Ray actors, Redis holding all state.

A *host* is a Ray actor (async, ``max_restarts=-1``) that runs one
:class:`HostRuntime`, a :class:`~plait.actors.LeasedRuntime`, against a shared mesh:
it leases a share of the mailbox partitions and runs the actors of those partitions as
asyncio tasks inside its Ray process, so thousands of run owners live in one host and a
parked actor costs only its record. Ray places, supervises and restarts hosts; nothing
durable lives only in Ray's memory. A host killed is restarted by Ray and serves again
(a new host id: its old leases expire and are taken like any dead runtime's); until then
the other hosts take its partitions once its leases expire, and every ack it made is
fenced by its partition's epoch, so nothing is committed twice.

What a host serves is a picklable :class:`HostSpec`: :class:`RuntimeSpec` serves actors
with given handlers and services (what :class:`RayRuntime` hands its hosts); the run
layer's spec (:mod:`plait.cluster`) serves runs, building its owner services inside the host.

*Dedicated actors.* An actor whose record's config names ``resources``
(``num_cpus``, ``num_gpus``, ``memory`` in bytes, or custom ones by name) is handled in
a Ray actor of its own holding those resources: created on its first message, kept
while it has mail, released after ``dedicated_idle_s`` without any (default 60 s). Its
host still owns the message (extends its visibility, fences its ack); the dedicated
actor runs the handler with a mesh of its own and acks in the handler's transaction.

A remote host must reach the mesh, so :func:`refuse_unshared` rejects ``memory://`` and
SQLite meshes.

Modules: :mod:`~plait.actors.ray.guards` (Ray installed, a shared mesh),
:mod:`~plait.actors.ray.placement` (host options, resources, nodes),
:mod:`~plait.actors.ray.dedicated` (dedicated actors),
:mod:`~plait.actors.ray.host_runtime` (the runtime a host runs),
:mod:`~plait.actors.ray.hosts` (the host Ray actors) and
:mod:`~plait.actors.ray.runtime` (:class:`RayRuntime`).
"""

from __future__ import annotations

from plait.actors.ray.dedicated import DEDICATED_IDLE_S, DedicatedActor
from plait.actors.ray.guards import INSTALL_HINT, mesh_url_of, refuse_unshared, require_ray
from plait.actors.ray.host_runtime import HostRuntime, HostSpec, RuntimeSpec
from plait.actors.ray.hosts import HostActor, start_host
from plait.actors.ray.placement import (
    NAMESPACE,
    host_options,
    ray_host_of,
    split_resources,
    spread_nodes,
)
from plait.actors.ray.runtime import RayRuntime

__all__ = [
    "DEDICATED_IDLE_S",
    "INSTALL_HINT",
    "NAMESPACE",
    "DedicatedActor",
    "HostActor",
    "HostRuntime",
    "HostSpec",
    "RayRuntime",
    "RuntimeSpec",
    "host_options",
    "mesh_url_of",
    "ray_host_of",
    "refuse_unshared",
    "require_ray",
    "split_resources",
    "spread_nodes",
    "start_host",
]
