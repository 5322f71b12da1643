"""What the console's browser tests share: Debian's chromium, Playwright, and where
screenshots go ($PLAIT_TEST_ARTIFACTS, default tests/artifacts/)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
"""Debian's chromium, which Playwright drives headless."""

ARTIFACTS = Path(
    os.environ.get("PLAIT_TEST_ARTIFACTS") or Path(__file__).resolve().parents[1] / "artifacts"
)
"""Where screenshots are kept."""


def playwright_or_skip() -> ModuleType:
    """``playwright.sync_api``; skips the calling test module, saying why, without it
    or without chromium."""
    found = pytest.importorskip("playwright.sync_api", reason="needs playwright (dev extra)")
    if not Path(CHROMIUM).is_file():
        pytest.skip(
            "needs Debian's chromium (apt-get install -y chromium); not installed here",
            allow_module_level=True,
        )
    return found
