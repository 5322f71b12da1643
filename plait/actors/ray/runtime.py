"""The Ray runtime: a mesh's actors served in Ray hosts (see :mod:`plait.actors.ray`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import anyio

from plait.actors._base import (
    DEFAULT_MAX_ATTEMPTS,
    MAILBOX_VISIBILITY_TIMEOUT_MS,
    Accepts,
    ActorRuntime,
    Handler,
    new_host_id,
)
from plait.actors.leases import DEFAULT_LEASE_S
from plait.actors.ray.dedicated import DEDICATED_IDLE_S
from plait.actors.ray.guards import mesh_url_of, require_ray
from plait.actors.ray.host_runtime import RuntimeSpec
from plait.actors.ray.hosts import start_host
from plait.actors.ray.placement import NAMESPACE, spread_nodes
from plait.mesh import Delivery, Mesh, Transaction

log = logging.getLogger("plait.actors")


class RayRuntime(ActorRuntime):
    """Serves a mesh's actors in ``hosts`` Ray actors, each a :class:`HostRuntime`.

    The runtime itself handles no message: its hosts do, in their Ray processes (on any
    node of the cluster), with the handlers and services given here pickled to them. So
    a handler's ``ctx.runtime`` is its host's runtime, and :meth:`take_mail_in` here
    always declines. Ray must be initialised (``ray.init``) before :meth:`start`.

    Args:
        mesh: the mesh (Redis: a remote host cannot share memory or SQLite).
        url: the URL hosts open the mesh with (default ``mesh.url``; required when that
            masks a password).
        hosts: how many hosts to run.
        host: the host id (one host) or prefix (``HOST/0``...) of the hosts' ids.
        namespace: the Ray namespace of named hosts.
        name: name the hosts ``NAME-0``... (adopting any running by that name).
        detached: hosts outlive this process (``plait worker --keep``).
        lease_s: partition lease of each host.
        partitions: the mesh's partition count on first use.
        dedicated_idle_s: how long a dedicated actor lives without mail.
        **options: as every runtime: ``services``, ``handlers``, ``accepts``,
            ``visibility_timeout_ms``, ``max_attempts``, ``drain_timeout_s``.

    Raises:
        ConfigError: the mesh cannot be shared, or Ray is not installed.
    """

    single_activation: ClassVar[bool] = True

    def __init__(
        self,
        mesh: Mesh,
        *,
        url: str | None = None,
        hosts: int = 1,
        host: str | None = None,
        namespace: str = NAMESPACE,
        name: str | None = None,
        detached: bool = False,
        services: object | None = None,
        handlers: Mapping[str, Handler] | None = None,
        accepts: Accepts | None = None,
        visibility_timeout_ms: int = MAILBOX_VISIBILITY_TIMEOUT_MS,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        drain_timeout_s: float = 30.0,
        lease_s: float = DEFAULT_LEASE_S,
        partitions: int | None = None,
        dedicated_idle_s: float = DEDICATED_IDLE_S,
    ) -> None:
        require_ray()
        self.mesh = mesh
        self.url = mesh_url_of(mesh, url)
        self.count = hosts
        self.host = host or new_host_id()
        self.namespace = namespace
        self.name = name
        self.detached = detached
        self.services = services
        self.accepts = accepts
        self.visibility_timeout_ms = visibility_timeout_ms
        self.max_attempts = max_attempts
        self.drain_timeout_s = drain_timeout_s
        self.spec = RuntimeSpec(
            handlers=dict(handlers or {}),
            services=services,
            accepts=accepts,
            visibility_timeout_ms=visibility_timeout_ms,
            max_attempts=max_attempts,
            drain_timeout_s=drain_timeout_s,
            lease_s=lease_s,
            partitions=partitions,
            dedicated_idle_s=dedicated_idle_s,
        )
        self.handles: list[Any] = []
        self.hosts: list[dict[str, Any]] = []
        """Each host's :meth:`HostActor.info` as of :meth:`start`."""

    def _host_id(self, i: int) -> str:
        return self.host if self.count == 1 else f"{self.host}/{i}"

    async def start(self) -> None:
        """Start the hosts and wait until each serves."""
        if self.handles:
            return
        for i, node in enumerate(spread_nodes(self.count)):
            name = None if self.name is None else f"{self.name}-{i}"
            self.handles.append(
                start_host(
                    self.url,
                    self.spec,
                    name=name,
                    namespace=self.namespace,
                    detached=self.detached,
                    host=self._host_id(i),
                    node=node,
                )
            )
        self.hosts = list(await asyncio.gather(*(h.ready.remote() for h in self.handles)))

    async def close(self) -> None:
        """Drain every host (its handlers in flight, up to the drain timeout), then end it."""
        if not self.handles:
            return
        ray = require_ray()
        handles, self.handles = self.handles, []
        with anyio.CancelScope(shield=True):
            results = await asyncio.gather(
                *(h.drain.remote() for h in handles), return_exceptions=True
            )
            for result in results:
                if isinstance(result, BaseException):
                    log.warning("a host did not drain: %s", result)
            for handle in handles:
                ray.kill(handle, no_restart=True)

    async def wait_idle(self) -> None:
        """Wait until no host has a message in flight."""
        await asyncio.gather(*(h.wait_idle.remote() for h in self.handles))

    def take_mail_in(self, tx: Transaction, actor_id: str, count: int = 1) -> bool:
        """Declined: this process serves no mailbox (its hosts hand off among themselves)."""
        return False

    def handle_taken(self, deliveries: Sequence[Delivery]) -> None:
        """Nothing is taken here (see :meth:`take_mail_in`)."""

    async def info(self) -> list[dict[str, Any]]:
        """Each host's :meth:`HostActor.info` now."""
        return list(await asyncio.gather(*(h.info.remote() for h in self.handles)))


__all__ = ["RayRuntime"]
