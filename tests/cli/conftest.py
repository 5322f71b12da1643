"""What the CLI tests share: a SQLite mesh for ``--mesh``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def mesh_args(tmp_path: Path) -> list[str]:
    """``--mesh`` naming a fresh SQLite file of this test."""
    return ["--mesh", f"sqlite:///{tmp_path / 'mesh.db'}"]
