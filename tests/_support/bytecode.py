"""Compiled bytecode for a test session whose environment turned it off.

With ``PYTHONDONTWRITEBYTECODE`` set, every process recompiles every module it imports
from source: each xdist worker re-rewrites and recompiles every test module while it
collects (about half of its collection time), and each ``plait`` child process a test
starts recompiles the package (a quarter of a short command's time). The suite then
keeps bytecode in a cache directory of its own instead (``PYTHONPYCACHEPREFIX``, so
that nothing is written beside the sources), for this process and, through the
environment, for the processes it starts.

``PLAIT_TEST_PYCACHE`` names that directory (default ``~/.cache/plait-tests/pycache``);
``PLAIT_TEST_PYCACHE=0`` leaves the setting as it is. A ``PYTHONPYCACHEPREFIX`` already
set is kept.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DEFAULT_DIR = Path.home() / ".cache" / "plait-tests" / "pycache"
"""Where the bytecode goes unless ``PLAIT_TEST_PYCACHE`` says otherwise."""


def keep_bytecode() -> str | None:
    """Write bytecode to the cache directory if the environment turned it off; the
    directory used, or None when nothing was changed."""
    chosen = os.environ.get("PLAIT_TEST_PYCACHE", "")
    if chosen == "0" or not sys.dont_write_bytecode:
        return None
    prefix = sys.pycache_prefix or chosen or str(DEFAULT_DIR)
    try:
        Path(prefix).mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: compile from source, as asked
        return None
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return prefix
