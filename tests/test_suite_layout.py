"""The test suite's own layout: any of its directories collects with any other, its
helpers are imported from modules, never from a ``conftest.py``, and its deadlines and
process count fit the machine it runs on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import timing
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


def test_timeout_scale_follows_the_load_per_core_within_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PLAIT_TEST_TIMEOUT_SCALE", raising=False)
    monkeypatch.setattr(timing, "cpu_count", lambda: 2)
    for load, expected in ((0.5, 1.0), (4.0, 2.0), (100.0, timing.MAX_SCALE)):
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert timing.timeout_scale() == expected
        assert timing.scaled(10) == 10 * expected


def test_timeout_scale_and_workers_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (100.0, 100.0, 100.0))
    monkeypatch.setenv("PLAIT_TEST_TIMEOUT_SCALE", "1.5")
    assert timing.timeout_scale() == 1.5
    monkeypatch.setenv("PLAIT_TEST_WORKERS", "3")
    assert timing.worker_count() == 3
    monkeypatch.delenv("PLAIT_TEST_WORKERS")
    monkeypatch.setattr(timing, "cpu_count", lambda: 16)
    assert timing.worker_count() == 4  # one per core, at most four
    monkeypatch.setattr(timing, "cpu_count", lambda: 2)
    assert timing.worker_count() == 2
    for name, bad in (("PLAIT_TEST_TIMEOUT_SCALE", "fast"), ("PLAIT_TEST_TIMEOUT_SCALE", "0")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=name):
            timing.timeout_scale()
    monkeypatch.setenv("PLAIT_TEST_WORKERS", "many")
    with pytest.raises(ValueError, match="PLAIT_TEST_WORKERS='many' is not a count"):
        timing.worker_count()


KEEP_BYTECODE = """
import os, sys
from tests._support.bytecode import keep_bytecode
print(keep_bytecode(), sys.dont_write_bytecode, sys.pycache_prefix,
      os.environ.get("PYTHONPYCACHEPREFIX"), "PYTHONDONTWRITEBYTECODE" in os.environ)
"""


@pytest.mark.parametrize("choice", ["dir", "0", "unset"])
def test_bytecode_turned_off_by_the_environment_goes_to_a_cache_directory(
    tmp_path: Path, choice: str
) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PLAIT_TEST_PYCACHE": str(tmp_path)}
    env.pop("PYTHONPYCACHEPREFIX", None)
    if choice == "0":
        env["PLAIT_TEST_PYCACHE"] = "0"
    if choice == "unset":
        del env["PYTHONDONTWRITEBYTECODE"]
    done = subprocess.run(
        [sys.executable, "-c", KEEP_BYTECODE], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=scaled(60), check=True,
    )  # fmt: skip
    if choice == "dir":  # written under the directory, for this process and its children
        where = str(tmp_path)
        assert done.stdout.split() == [where, "False", where, where, "False"]
    elif choice == "0":  # left as the environment says
        assert done.stdout.split() == ["None", "True", "None", "None", "True"]
    else:  # bytecode was never off: nothing to change
        assert done.stdout.split() == ["None", "False", "None", "None", "False"]
