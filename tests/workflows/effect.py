"""Effects of the test workflows, and ``effect.py NAME``: a stand-in command (for mypy
or pytest) that records effect NAME in the working directory.

Each effect appends its name to ``effects.log``. A ``kill_at`` file there
(``before:NAME`` or ``after:NAME``) makes effect NAME SIGKILL the serving process (its
pid in ``server.pid``) before or after it happens, once: the file is removed first.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def effect(where: Path, name: str) -> None:
    """Record effect ``name`` in ``where``, killing the server before or after if told."""
    kill = where / "kill_at"
    told = kill.read_text().strip() if kill.exists() else ""
    if told in (f"before:{name}", f"after:{name}"):
        kill.unlink()
    if told == f"before:{name}":
        os.kill(int((where / "server.pid").read_text()), signal.SIGKILL)
        return
    with (where / "effects.log").open("a") as out:
        out.write(name + "\n")
    if told == f"after:{name}":
        os.kill(int((where / "server.pid").read_text()), signal.SIGKILL)


if __name__ == "__main__":
    effect(Path.cwd(), sys.argv[1])
