"""The run listing: every run's summary from the run index, filtered and newest first.

Kept apart from :class:`~plait.runs.service.Runs` (which delegates to it) because it
needs only the mesh and the record models: ``plait graph runs`` lists runs without
importing the engine, the commit or the decision desk.
"""

from __future__ import annotations

from pydantic import ValidationError

from plait.errors import ConfigError
from plait.mesh import Mesh, skip_corrupt, skip_unreadable
from plait.runs.record import RunSummary, listing_status

LISTING_STATUSES = (
    "running",
    "waiting_human",
    "waiting_approval",
    "waiting_child",
    "done",
    "failed",
    "cancelled",
)
"""The statuses listings show and filter by (``ready`` is shown as ``running``)."""


async def list_runs(
    mesh: Mesh, *, agent: str | None = None, status: str | None = None
) -> list[RunSummary]:
    """Runs on ``mesh``, newest first, filtered by agent and listing status.

    Raises:
        ConfigError: ``status`` is not one of :data:`LISTING_STATUSES`.
    """
    if status is not None and status not in LISTING_STATUSES:
        raise ConfigError(
            f"unknown run status {status!r}: expected one of {', '.join(LISTING_STATUSES)}"
        )
    found = []
    async for entry in mesh.scan("runindex/", on_corrupt=skip_corrupt):
        try:
            summary = RunSummary.model_validate(entry.value)
        except ValidationError as exc:
            skip_unreadable(entry.key, f"not a run summary ({exc.error_count()} problems)")
            continue
        summary.status = listing_status(summary.status)  # type: ignore[assignment]
        if agent and summary.agent != agent:
            continue
        if status and summary.status != status:
            continue
        found.append(summary)
    return sorted(found, key=lambda s: s.created_at, reverse=True)


__all__ = ["LISTING_STATUSES", "list_runs"]
