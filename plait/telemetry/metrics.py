"""Prometheus metrics of a serving process, in their own registry.

Names and labels follow Prometheus conventions (``_total`` counters, ``_seconds``
durations, base units) and stay low in cardinality: statuses, models, tools and
outcomes are labels, run ids never are. The counters count only once metrics are on
(``STATE.metrics``: ``plait serve``, ``plait worker --metrics-port``); each helper
here is one attribute test while they are off. Gauges of the mesh as a whole (runs by
status, decisions open) are read when scraped, by whoever serves the endpoint (see
:func:`set_mesh_gauges`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client import start_http_server as _start_http_server

from plait.telemetry.state import STATE

REGISTRY = CollectorRegistry(auto_describe=True)
"""The registry every plait metric is in."""

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The content type of :func:`render`'s text."""

TRANSITIONS = Counter(
    "plait_transitions", "Run transitions committed by this process.", registry=REGISTRY
)
RUNS_STARTED = Counter("plait_runs_started", "Runs started by this process.", registry=REGISTRY)
RUNS_ENDED = Counter(
    "plait_runs_ended", "Runs this process ended, by status.", ["status"], registry=REGISTRY
)
RUNS_PARKED = Counter(
    "plait_runs_parked",
    "Transitions that parked a run, by what it waits on.",
    ["kind"],
    registry=REGISTRY,
)
RUNS = Gauge("plait_runs", "Runs on the mesh, by listed status.", ["status"], registry=REGISTRY)
COMMIT_SECONDS = Histogram(
    "plait_mesh_commit_seconds",
    "Mesh transaction commit latency.",
    ["backend"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
CAS_CONFLICTS = Counter(
    "plait_mesh_cas_conflicts",
    "Mesh commits refused because a compare-and-swap found the data moved.",
    ["backend"],
    registry=REGISTRY,
)
PARTITIONS_HELD = Gauge(
    "plait_partitions_held",
    "Mailbox partitions this process holds leases on.",
    registry=REGISTRY,
)
PARTITIONS = Gauge("plait_partitions", "Mailbox partitions of the mesh.", registry=REGISTRY)
LEASE_CHANGES = Counter(
    "plait_lease_changes", "Partition leases gained or lost.", ["change"], registry=REGISTRY
)
BACKLOG = Gauge(
    "plait_mailbox_in_flight",
    "Mailbox messages delivered to this process and not acked yet.",
    registry=REGISTRY,
)
PARTITION_BACKLOG = Gauge(
    "plait_mailbox_backlog",
    "Mailbox messages not acked yet on the mesh, by partition.",
    ["partition"],
    registry=REGISTRY,
)
DECISIONS_OPEN = Gauge("plait_decisions_open", "Decisions open on the mesh.", registry=REGISTRY)
DECISION_AGE = Gauge(
    "plait_decision_oldest_age_seconds", "Age of the oldest open decision.", registry=REGISTRY
)
MODEL_TOKENS = Counter(
    "plait_model_tokens",
    "Model tokens spent, by model and type.",
    ["model", "type"],
    registry=REGISTRY,
)
MODEL_DOLLARS = Counter(
    "plait_model_dollars", "Dollars spent on model calls, by model.", ["model"], registry=REGISTRY
)
MODEL_CALLS = Counter(
    "plait_model_calls",
    "Model calls, by model and outcome.",
    ["model", "outcome"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "plait_tool_calls", "Tool calls, by tool and outcome.", ["tool", "outcome"], registry=REGISTRY
)
TOPIC_DELIVERIES = Counter(
    "plait_topic_deliveries", "Topic events forwarded into mailboxes.", registry=REGISTRY
)
TOPIC_REDELIVERIES = Counter(
    "plait_topic_redeliveries",
    "Topic events delivered again (an earlier delivery was not acked).",
    registry=REGISTRY,
)
SCHEDULES = Counter(
    "plait_schedule_fires",
    "Schedule fire times, by outcome: fired (a run started) or skipped (missed).",
    ["outcome"],
    registry=REGISTRY,
)


_SEEN: set[str] = {"running", "done", "failed", "cancelled"}

_CHILDREN: dict[tuple[Any, ...], Any] = {}


def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, looked up once per label set (each lookup takes the
    metric's lock)."""
    key = (metric, *labels)
    found = _CHILDREN.get(key)
    if found is None:
        found = _CHILDREN[key] = metric.labels(*labels)
    return found


def render() -> bytes:
    """The Prometheus text of every metric."""
    _no_created_series()
    return generate_latest(REGISTRY)


def _no_created_series() -> None:
    """Leave out the ``_created`` series (one per counter, doubling what is scraped): a
    switch of prometheus_client's, for the whole process, thrown only by a process that
    serves plait's metrics."""
    disable_created_metrics()  # type: ignore[no-untyped-call]


def serve_http(port: int, addr: str = "0.0.0.0", *, registry: CollectorRegistry = REGISTRY) -> None:
    """Serve ``registry`` (default: this process's metrics, :func:`render`'s) at
    ``http://addr:port/metrics`` from a daemon thread, and turn metrics on."""
    STATE.metrics = True
    _no_created_series()
    _start_http_server(port, addr=addr, registry=registry)


def transition(status: str, was: str, waiting: str | None) -> None:
    """Count one run transition into ``status`` (from ``was``)."""
    if not STATE.metrics:
        return
    TRANSITIONS.inc()
    if status != was and status in ("done", "failed", "cancelled"):
        _child(RUNS_ENDED, status).inc()
    if waiting is not None and was != "waiting":
        _child(RUNS_PARKED, waiting).inc()


def run_started() -> None:
    """Count a run started."""
    if STATE.metrics:
        RUNS_STARTED.inc()


def model_call(
    model: str, input_tokens: int, output_tokens: int, dollars: float, outcome: str
) -> None:
    """Count a model call and what it spent."""
    if not STATE.metrics:
        return
    _child(MODEL_CALLS, model, outcome).inc()
    if input_tokens:
        _child(MODEL_TOKENS, model, "input").inc(input_tokens)
    if output_tokens:
        _child(MODEL_TOKENS, model, "output").inc(output_tokens)
    if dollars:
        _child(MODEL_DOLLARS, model).inc(dollars)


def tool_call(tool: str, outcome: str) -> None:
    """Count a tool call with its outcome (``ok``, ``error``, ``parked``, ``rejected``)."""
    if STATE.metrics:
        _child(TOOL_CALLS, tool, outcome).inc()


def commit(backend: str, seconds: float, conflict: bool) -> None:
    """Count a mesh commit of ``seconds`` (and its CAS conflict)."""
    _child(COMMIT_SECONDS, backend).observe(seconds)
    if conflict:
        _child(CAS_CONFLICTS, backend).inc()


def partitions(held: int, count: int, gained: int, lost: int) -> None:
    """Set the partitions held and count the leases gained and lost."""
    if not STATE.metrics:
        return
    PARTITIONS_HELD.set(held)
    PARTITIONS.set(count)
    if gained:
        _child(LEASE_CHANGES, "gained").inc(gained)
    if lost:
        _child(LEASE_CHANGES, "lost").inc(lost)


class LeaseTally:
    """Counts a runtime's partitions: held (a gauge) and the leases it gained and lost
    since the last call; a :class:`~plait.actors.LeasedRuntime`'s ``on_change``."""

    def __init__(self) -> None:
        self.held: set[int] = set()

    def __call__(self, serving: set[int], count: int) -> None:
        """The runtime serves the partitions ``serving`` of ``count`` now."""
        before, self.held = self.held, set(serving)
        partitions(len(serving), count, len(serving - before), len(before - serving))


def topic_delivery(redelivered: bool) -> None:
    """Count a topic event forwarded into a mailbox."""
    if STATE.metrics:
        (TOPIC_REDELIVERIES if redelivered else TOPIC_DELIVERIES).inc()


def schedules(*, fired: int, skipped: int) -> None:
    """Count a schedule's runs started (``fired``) and fire times it missed (``skipped``)."""
    if not STATE.metrics:
        return
    if fired:
        _child(SCHEDULES, "fired").inc(fired)
    if skipped:
        _child(SCHEDULES, "skipped").inc(skipped)


def track_in_flight(read: Callable[[], float]) -> None:
    """Read the mailbox messages in flight from ``read`` at each scrape."""
    BACKLOG.set_function(read)


def set_mesh_gauges(
    runs: dict[str, int],
    decisions_open: int,
    oldest_decision_s: float,
    backlog: list[int] | None = None,
) -> None:
    """Set the gauges read from the mesh at scrape time (``backlog``: each mailbox
    partition's, by partition number)."""
    for status in {*_SEEN, *runs}:
        _child(RUNS, status).set(runs.get(status, 0))
    _SEEN.update(runs)
    DECISIONS_OPEN.set(decisions_open)
    DECISION_AGE.set(oldest_decision_s)
    for partition, held in enumerate(backlog or ()):
        _child(PARTITION_BACKLOG, str(partition)).set(held)


__all__ = [
    "CONTENT_TYPE",
    "REGISTRY",
    "LeaseTally",
    "commit",
    "model_call",
    "partitions",
    "render",
    "run_started",
    "schedules",
    "serve_http",
    "set_mesh_gauges",
    "tool_call",
    "topic_delivery",
    "track_in_flight",
    "transition",
]
