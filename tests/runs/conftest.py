"""Fixtures of the durable-run tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``plait`` as a subprocess in this test's directory, on its own SQLite mesh."""
    return Cli(tmp_path)
