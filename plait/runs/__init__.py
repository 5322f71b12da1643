"""Durable runs: the run record, the owner actor (one node per message), the service.

:class:`Runs` starts and manages runs; :func:`serve` hosts their owners in this
process. See :mod:`plait.runs.owner` for how one transition commits.
"""

from __future__ import annotations

from plait.runs.audit import AuditEvent
from plait.runs.host import RunHost
from plait.runs.owner import OWNER_KIND
from plait.runs.record import RunRecord, RunSummary
from plait.runs.service import Runs

__all__ = ["OWNER_KIND", "AuditEvent", "RunHost", "RunRecord", "RunSummary", "Runs"]
