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
layer's spec (:mod:`plait.hosts`) serves runs, building its run host inside the host.

*Dedicated actors.* An actor whose record's config names ``resources``
(``num_cpus``, ``num_gpus``, ``memory`` in bytes, or custom ones by name) is handled in
a Ray actor of its own holding those resources: created on its first message, kept
while it has mail, released after ``dedicated_idle_s`` without any (default 60 s). Its
host still owns the message (extends its visibility, fences its ack); the dedicated
actor runs the handler with a mesh of its own and acks in the handler's transaction.

A remote host must reach the mesh, so :func:`refuse_unshared` rejects ``memory://`` and
SQLite meshes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import anyio

from plait.actors._base import (
    DEFAULT_MAX_ATTEMPTS,
    MAILBOX_VISIBILITY_TIMEOUT_MS,
    Accepts,
    ActorContext,
    ActorRuntime,
    Fence,
    Handler,
    Mail,
    new_host_id,
    resolve_dead_letter_hook,
)
from plait.actors.directory import ActorRecord
from plait.actors.leased import LeasedRuntime
from plait.actors.leases import DEFAULT_LEASE_S
from plait.actors.local import _Activation, tune_gc_for_serving
from plait.errors import ActorError, ConfigError
from plait.ids import new_id
from plait.mesh import Delivery, Event, Mesh, Transaction, open_mesh

log = logging.getLogger("plait.actors")

NAMESPACE = "plait"
"""The Ray namespace hosts live in unless another is given."""

DEDICATED_IDLE_S = 60.0
"""How long a dedicated actor lives without mail before it is released."""

RESOURCE_NAMES = ("num_cpus", "num_gpus", "memory")
"""The resources Ray names itself; any other key of ``resources`` is a custom resource."""

INSTALL_HINT = "the Ray runtime needs Ray: pip install 'plait[ray]'"


def require_ray() -> Any:
    """The ``ray`` module.

    Raises:
        ConfigError: Ray is not installed (says how to install it).
    """
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


def refuse_unshared(url: str) -> None:
    """Refuse a mesh a host in another process or machine cannot share.

    Raises:
        ConfigError: ``url`` is a ``memory://`` or SQLite mesh.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("memory", "sqlite") or not scheme:
        raise ConfigError(
            f"the Ray runtime cannot serve the mesh {url!r}: its hosts run in other "
            "processes (or machines) and a memory:// or SQLite mesh lives in one. "
            "Use a Redis mesh (redis://HOST:6379)."
        )


def mesh_url_of(mesh: Mesh, url: str | None) -> str:
    """The URL hosts open ``mesh`` with: ``url`` if given, else the mesh's own.

    Raises:
        ConfigError: the mesh's URL had a credential masked (pass ``url=``), or it is a
            mesh a remote host cannot share.
    """
    found = url or mesh.url
    if url is None and "***" in found:
        raise ConfigError(
            "the mesh URL carries a password, masked in mesh.url: give the Ray runtime url="
        )
    refuse_unshared(found)
    return found


def split_resources(resources: Mapping[str, Any]) -> dict[str, Any]:
    """Ray actor options for a ``resources:`` mapping (custom names go to ``resources``).

    Raises:
        ConfigError: a value is not a non-negative number.
    """
    options: dict[str, Any] = {}
    custom: dict[str, float] = {}
    for name, value in resources.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ConfigError(f"resource {name!r} must be a non-negative number, got {value!r}")
        if name in RESOURCE_NAMES:
            options[name] = value
        else:
            custom[name] = float(value)
    if custom:
        options["resources"] = custom
    return options


# -- what a host serves -------------------------------------------------------------------


class HostSpec(Protocol):
    """What a host serves: picklable, so Ray can hand it to a host (and its restarts)."""

    def serve(self, mesh: Mesh, host: str) -> contextlib.AbstractAsyncContextManager[Any]:
        """Serve ``mesh`` as ``host`` for the block; yields the :class:`HostRuntime`."""
        ...


@dataclass(frozen=True)
class RuntimeSpec:
    """Serve actors with these handlers and services (what :class:`RayRuntime` hosts run).

    Attributes mirror :class:`HostRuntime`'s options.
    """

    handlers: Mapping[str, Handler] | None = None
    services: object | None = None
    accepts: Accepts | None = None
    visibility_timeout_ms: int = MAILBOX_VISIBILITY_TIMEOUT_MS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    drain_timeout_s: float = 30.0
    lease_s: float = DEFAULT_LEASE_S
    partitions: int | None = None
    dedicated_idle_s: float = DEDICATED_IDLE_S

    @contextlib.asynccontextmanager
    async def serve(self, mesh: Mesh, host: str) -> AsyncIterator[HostRuntime]:
        """Serve ``mesh`` as ``host`` with a :class:`HostRuntime` for the block."""
        runtime = HostRuntime(
            mesh,
            host=host,
            handlers=self.handlers,
            services=self.services,
            accepts=self.accepts,
            visibility_timeout_ms=self.visibility_timeout_ms,
            max_attempts=self.max_attempts,
            drain_timeout_s=self.drain_timeout_s,
            lease_s=self.lease_s,
            partitions=self.partitions,
            dedicated_idle_s=self.dedicated_idle_s,
            dedicated_services=self.services,
        )
        async with runtime:
            yield runtime


# -- dedicated actors ---------------------------------------------------------------------


@dataclass
class _Dedicated:
    handle: Any
    running: int = 0
    last_used: float = field(default_factory=time.monotonic)


class _Forward:
    """The handler a host runs for an actor with ``resources``: its dedicated actor's."""

    def __init__(self, runtime: HostRuntime, record: ActorRecord, handler: Handler) -> None:
        self.runtime = runtime
        self.record = record
        self.handler = handler
        kind = record.kind
        from_module = kind not in runtime._handlers
        # The dead-letter hook runs in the host: a message that failed its attempts
        # needs no resources to be written off.
        self.on_dead_letter = resolve_dead_letter_hook(kind, handler, from_module=from_module)

    async def __call__(self, ctx: ActorContext, mail: Mail) -> None:
        await self.runtime._forward(self.record, self.handler, mail)


class HostRuntime(LeasedRuntime):
    """The leased runtime a host runs: hands actors with ``resources`` to dedicated actors.

    Args:
        mesh: the mesh.
        dedicated_idle_s: how long a dedicated actor lives without mail.
        dedicated_services: the services a dedicated actor's handler gets (it runs in
            another process: they must pickle; None by default).
        **options: as for :class:`~plait.actors.LeasedRuntime`.
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        dedicated_idle_s: float = DEDICATED_IDLE_S,
        dedicated_services: object | None = None,
        **options: Any,
    ) -> None:
        super().__init__(mesh, **options)
        self.dedicated_idle_s = dedicated_idle_s
        self.dedicated_services = dedicated_services
        self.mesh_url = mesh.url
        """The URL a dedicated actor opens the mesh with (its host sets the unmasked one)."""
        self._dedicated: dict[str, _Dedicated] = {}

    @property
    def dedicated(self) -> list[str]:
        """The actors that have a dedicated Ray actor right now."""
        return sorted(self._dedicated)

    async def start(self) -> None:
        """Serve as a leased runtime, and release dedicated actors once idle."""
        await super().start()
        assert self._tg is not None
        self._tg.start_soon(self._release_idle)

    async def close(self) -> None:
        """Drain as a leased runtime does, then release every dedicated actor."""
        await super().close()
        for actor_id in list(self._dedicated):
            self._release(actor_id)

    async def _activate(self, actor_id: str) -> _Activation | None:
        activation = await super()._activate(actor_id)
        resources = activation.record.config.get("resources") if activation else None
        if activation is not None and resources and not isinstance(activation.handler, _Forward):
            activation.handler = _Forward(self, activation.record, activation.handler)
        return activation

    def _dedicated_for(self, record: ActorRecord, handler: Handler) -> _Dedicated:
        found = self._dedicated.get(record.id)
        if found is not None:
            return found
        options = split_resources(record.config["resources"])
        options.setdefault("num_cpus", 0)
        named = _dedicated_class().options(name=f"dedicated:{record.id}@{self.host}", **options)
        handle = named.remote(
            self.mesh_url, handler, self.dedicated_services, f"{self.host}/{record.id}"
        )
        found = self._dedicated[record.id] = _Dedicated(handle)
        log.info("actor %s: dedicated Ray actor with %s", record.id, options)
        return found

    async def _forward(self, record: ActorRecord, handler: Handler, mail: Mail) -> None:
        dedicated = self._dedicated_for(record, handler)
        dedicated.running += 1
        try:
            fence = None if mail.fence is None else (mail.fence.key, mail.fence.version)
            d = mail.delivery
            event = (d.event.id, d.event.topic, d.event.kind, d.event.data, d.event.at_ms)
            shipped = (event, d.group, d.consumer, d.attempt, d.position)
            mail.acked = bool(
                await dedicated.handle.handle.remote(record, mail.body, shipped, fence)
            )
        finally:
            dedicated.running -= 1
            dedicated.last_used = time.monotonic()

    def _release(self, actor_id: str) -> None:
        dedicated = self._dedicated.pop(actor_id, None)
        if dedicated is not None:
            require_ray().kill(dedicated.handle)
            log.info("actor %s: dedicated Ray actor released", actor_id)

    async def _release_idle(self) -> None:
        period = max(0.05, min(self.dedicated_idle_s / 4, 5.0))
        while True:
            await anyio.sleep(period)
            cutoff = time.monotonic() - self.dedicated_idle_s
            for actor_id, dedicated in list(self._dedicated.items()):
                if not dedicated.running and dedicated.last_used < cutoff:
                    self._release(actor_id)


@functools.cache
def _dedicated_class() -> Any:
    """:class:`DedicatedActor` as a Ray actor class (made once per process)."""
    return require_ray().remote(max_restarts=0)(DedicatedActor)


class _DedicatedRuntime(ActorRuntime):
    """What a dedicated actor's handler sees as ``ctx.runtime``: records and mail only.

    It serves no mailbox (its host does), so the commit-time hand-off is declined and
    the handler's next message comes through the host as usual.
    """

    def __init__(self, mesh: Mesh, host: str, services: object | None) -> None:
        self.mesh = mesh
        self.host = host
        self.services = services
        self.accepts = None
        self.max_attempts = DEFAULT_MAX_ATTEMPTS
        self.visibility_timeout_ms = MAILBOX_VISIBILITY_TIMEOUT_MS

    async def start(self) -> None:
        """Nothing to serve."""

    async def close(self) -> None:
        """Nothing to drain."""

    async def wait_idle(self) -> None:
        """Never busy with mail of its own."""

    def take_mail_in(self, tx: Transaction, actor_id: str, count: int = 1) -> bool:
        """Declined: the host serves the mailbox."""
        return False

    def handle_taken(self, deliveries: Sequence[Delivery]) -> None:
        """Nothing was taken here."""


class DedicatedActor:
    """The Ray actor of one actor with ``resources``: runs its handler on its messages."""

    def __init__(self, url: str, handler: Handler, services: object | None, host: str) -> None:
        self.url = url
        self.handler = handler
        self.services = services
        self.host = host
        self._mesh: Mesh | None = None
        self._stack = contextlib.AsyncExitStack()

    async def _open(self) -> Mesh:
        if self._mesh is None:
            self._mesh = await self._stack.enter_async_context(open_mesh(self.url))
        return self._mesh

    async def handle(
        self,
        record: ActorRecord,
        body: Any,
        shipped: tuple[tuple[str, str, str, Any, int], str, str, int, Any],
        fence: tuple[str, int] | None,
    ) -> bool:
        """Run the handler on one message; whether it is acked (acking it if the handler
        did not, fenced by the host's lease)."""
        mesh = await self._open()
        (event_id, topic, kind, data, at_ms), group, consumer, attempt, position = shipped

        async def ack(delivery: Delivery) -> None:
            async with mesh.transact() as tx:
                tx.ack(delivery)

        delivery = Delivery(
            Event(event_id, topic, kind, data, at_ms), group, consumer, attempt, position, ack
        )
        mail = Mail(
            record.id,
            body,
            delivery,
            fence=None if fence is None else Fence(mesh, fence[0], fence[1]),
        )
        runtime = _DedicatedRuntime(mesh, self.host, self.services)
        await self.handler(ActorContext(record, mesh, runtime), mail)
        if not mail.acked:
            await mail.ack()
        return True

    def pid(self) -> int:
        """This actor's process id."""
        return os.getpid()


# -- hosts --------------------------------------------------------------------------------


class HostActor:
    """A host: one :class:`HostRuntime` serving the mesh inside a Ray actor.

    It starts serving on construction, so Ray's restart of a killed host serves again
    with no call from anyone.

    Args:
        url: the mesh URL.
        spec: what to serve.
        host: its host id (None: ``ray:NAMESPACE/NAME:PID:RANDOM``, new each restart).
    """

    def __init__(self, url: str, spec: HostSpec, host: str | None = None) -> None:
        self.url = url
        self.spec = spec
        self.host = host or self._new_host_id()
        self.runtime: HostRuntime | None = None
        self.handled = 0
        """Messages handled by this incarnation's runtime (kept once it stopped)."""
        self.error: str | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._done = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.node = self._node_id()
        tune_gc_for_serving()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # Older Ray builds an async actor outside its event loop: serve on a thread.
            threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True).start()
        else:
            self._task = loop.create_task(self._serve())

    @staticmethod
    def _new_host_id() -> str:
        try:
            ray = require_ray()
            context = ray.get_runtime_context()
            name = context.get_actor_name() or "host"
            namespace = context.namespace
        except Exception:  # not in a Ray actor (a test building one directly)
            name, namespace = "host", NAMESPACE
        return f"ray:{namespace}/{name}:{os.getpid()}:{new_id()}"

    @staticmethod
    def _node_id() -> str | None:
        try:
            return str(require_ray().get_runtime_context().get_node_id())
        except Exception:  # not in a Ray actor
            return None

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        started = False
        try:
            async with open_mesh(self.url) as mesh, self.spec.serve(mesh, self.host) as runtime:
                runtime.mesh_url = self.url
                self.runtime = runtime
                started = True
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            if started and not (self._stop is not None and self._stop.is_set()):
                # Serving broke under us: let Ray restart this host afresh.
                log.error(
                    "host %s stopped serving: %s; restarting", self.host, self.error, exc_info=exc
                )
                os._exit(1)
            raise
        finally:
            if self.runtime is not None:
                self.handled = self.runtime.handled
            self.runtime = None
            self._ready.set()
            self._done.set()

    async def ready(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """This host's :meth:`info` once it serves.

        Raises:
            ActorError: it could not start serving.
        """
        await asyncio.to_thread(self._ready.wait, timeout_s)
        if self.runtime is None:
            raise ActorError(f"host {self.host} did not start serving: {self.error}")
        return self.info()

    def started_with(self) -> tuple[str, HostSpec]:
        """The mesh URL and spec it serves (a new host of the set copies them)."""
        return self.url, self.spec

    def info(self) -> dict[str, Any]:
        """Its host id, pid, Ray node, the partitions it serves, dedicated actors, handled count."""
        runtime = self.runtime
        return {
            "host": self.host,
            "pid": os.getpid(),
            "node": self.node,
            "serving": sorted(runtime.serving) if runtime else [],
            "dedicated": runtime.dedicated if runtime else [],
            "handled": runtime.handled if runtime else self.handled,
            "error": self.error,
        }

    async def wait_idle(self) -> None:
        """Wait until no message this host took is in flight."""
        runtime = self.runtime
        if runtime is not None and self._loop is asyncio.get_running_loop():
            await runtime.wait_idle()
        elif runtime is not None and self._loop is not None:
            future = asyncio.run_coroutine_threadsafe(runtime.wait_idle(), self._loop)
            await asyncio.wrap_future(future)

    async def drain(self) -> dict[str, Any]:
        """Stop serving: drain its messages in flight and release its leases; its info."""
        if self._stop is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        await asyncio.to_thread(self._done.wait)
        return self.info()


def ray_host_of(host_id: str) -> tuple[str, str] | None:
    """The Ray namespace and name in a Ray host's id (``ray:NS/NAME:PID:RANDOM``), or
    None for a host that is no Ray actor."""
    if not host_id.startswith("ray:"):
        return None
    where = host_id[len("ray:") :].split(":", 1)[0]
    namespace, _, name = where.rpartition("/")
    return (namespace, name) if name else None


def spread_nodes(count: int) -> list[str | None]:
    """The Ray node each of ``count`` hosts of a set goes to: the live nodes in turn
    (None each while Ray knows of none).

    Hosts of a set go on different nodes where they can, so a node lost takes fewer of
    them. Ray's own ``SPREAD`` strategy does not see to that here: successive actors of
    no CPUs land on one node.
    """
    ray = require_ray()
    nodes = sorted(str(n["NodeID"]) for n in ray.nodes() if n.get("Alive"))
    return [nodes[i % len(nodes)] if nodes else None for i in range(count)]


def host_options(
    *,
    name: str | None,
    namespace: str,
    detached: bool,
    resources: Mapping[str, Any] | None,
    node: str | None = None,
) -> dict[str, Any]:
    """The Ray actor options of a host (on ``node`` if it can: elsewhere once that node
    is gone or lacks its resources)."""
    options: dict[str, Any] = {
        "max_restarts": -1,
        # A call in flight when a host died is not replayed on its restart: its
        # caller sees the failure (a host's work is in the mesh, not in calls).
        "max_task_retries": 0,
        "max_concurrency": 64,
        "namespace": namespace,
        "num_cpus": 0,
        "scheduling_strategy": "SPREAD" if node is None else _on_node(node),
    }
    if name is not None:
        options["name"] = name
        options["get_if_exists"] = True
    if detached:
        options["lifetime"] = "detached"
    if resources:
        options.update(split_resources(resources))
    return options


def _on_node(node: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # Soft: a host restarted after its node is gone is placed on another.
    return NodeAffinitySchedulingStrategy(node_id=node, soft=True)


def start_host(
    url: str,
    spec: HostSpec,
    *,
    name: str | None = None,
    namespace: str = NAMESPACE,
    detached: bool = False,
    host: str | None = None,
    resources: Mapping[str, Any] | None = None,
    node: str | None = None,
) -> Any:
    """Start a host (on ``node`` if it can, see :func:`spread_nodes`), or, named, adopt
    the one already running by that name; its handle."""
    options = host_options(
        name=name, namespace=namespace, detached=detached, resources=resources, node=node
    )
    return _host_class().options(**options).remote(url, spec, host)


@functools.cache
def _host_class() -> Any:
    """:class:`HostActor` as a Ray actor class (made once per process, not per host)."""
    return require_ray().remote(HostActor)


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
