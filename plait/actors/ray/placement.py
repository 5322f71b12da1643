"""Where Ray puts hosts: their actor options, resources, nodes and names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plait.actors.ray.guards import require_ray
from plait.errors import ConfigError

NAMESPACE = "plait"
"""The Ray namespace hosts live in unless another is given."""

RESOURCE_NAMES = ("num_cpus", "num_gpus", "memory")
"""The resources Ray names itself; any other key of ``resources`` is a custom resource."""


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


__all__ = [
    "NAMESPACE",
    "RESOURCE_NAMES",
    "host_options",
    "ray_host_of",
    "split_resources",
    "spread_nodes",
]
