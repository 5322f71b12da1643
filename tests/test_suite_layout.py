"""The test suite's own layout: any of its directories collects with any other, and its
helpers are imported from modules, never from a ``conftest.py``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests._support.timing import scaled

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def test_directories_with_a_conftest_each_collect_together() -> None:
    # pytest imports every conftest.py as ``conftest``: one that imported helpers from
    # ``conftest`` got whichever loaded first, so ``pytest tests/cli tests/api`` failed.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n0", "-p", "no:cacheprovider",
         "tests/cli/test_mesh_cli.py", "tests/api/test_openapi.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=scaled(120), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "tests/api/test_openapi.py::" in done.stdout


def test_no_module_imports_the_bare_conftest() -> None:
    bare = re.compile(r"^\s*(from\s+conftest\s+import|import\s+conftest\b)", re.MULTILINE)
    offenders = [
        str(path.relative_to(ROOT)) for path in TESTS.rglob("*.py") if bare.search(path.read_text())
    ]
    assert offenders == [], "import shared helpers from tests._support, not from `conftest`"
