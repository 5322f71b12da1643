"""Fixtures of the schedule tests: file sinks may write under the test's folder, and
webhooks may reach the receiver on 127.0.0.1 (both are refused unless configured)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def sinks_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Set ``PLAIT_SINK_DIR`` to the test's folder and allow webhooks to 127.0.0.1."""
    monkeypatch.setenv("PLAIT_SINK_DIR", str(tmp_path))
    monkeypatch.setenv("PLAIT_WEBHOOK_ALLOW_HOSTS", "127.0.0.1")
