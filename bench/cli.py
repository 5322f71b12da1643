"""How long ``plait`` takes to start: wall time of whole CLI processes, in milliseconds.

Each figure is the median over repeated runs of one command, started as a new process
the way a shell starts it (the installed ``plait`` console script, else ``python -c``
calling the same entry point):

- ``cli_start_ms``: ``plait --version``;
- ``cli_help_ms``: ``plait --help``;
- ``cli_graph_runs_ms``: ``plait graph runs`` on an empty SQLite mesh in a temporary
  directory (the smallest command that opens a mesh and reads it).

Each also as ``..._cpu_ms``: the median CPU time (user + system) of the same runs, which
a busy machine inflates far less than wall time.

The baseline is the issue's bound, 250 ms on a quiet machine, so ``ratio`` is
250 / value (at least 1 meets it). The interpreter's own start, ``python -c pass``, is
measured in the same rounds, interleaved with the commands, and reported as
``python_start_ms``: what the machine's load does to any process start shows there.
The load average is printed (on stderr with ``--json``). The commands run with
``PYTHONDONTWRITEBYTECODE`` unset, so they read cached bytecode as an installed ``plait``
does (the warm-up run writes it), not compile every module on every start.

Run: ``python bench/cli.py [--json] [--seconds 1.0]`` (``--seconds`` scales the number of
rounds: 10 per second, at least 5).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import Cost, parse_args, report

BENCH = "cli"
BOUND_MS = 250.0
_ENTRY = "import sys; from plait.cli import main; sys.argv[0] = 'plait'; main()"


def plait_argv() -> list[str]:
    """The command line that starts ``plait``: its console script beside this Python."""
    script = Path(sys.executable).with_name("plait")
    if script.exists():
        return [str(script)]
    found = shutil.which("plait")
    return [found] if found else [sys.executable, "-c", _ENTRY]


_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def spent_ms(argv: Sequence[str], cwd: str) -> tuple[float, float]:
    """Wall and CPU (user + system) milliseconds of running ``argv`` to its exit; raises
    if it exits non-zero."""
    cpu = _children_cpu_s()
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=_ENV, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000, (_children_cpu_s() - cpu) * 1000


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rounds = max(5, round(10 * args.seconds))
    plait = plait_argv()
    with tempfile.TemporaryDirectory(prefix="plait-bench-cli-") as tmp:
        mesh = f"sqlite:///{Path(tmp) / 'mesh.db'}"
        commands = {
            "python_start_ms": [sys.executable, "-c", "pass"],
            "cli_start_ms": [*plait, "--version"],
            "cli_help_ms": [*plait, "--help"],
            "cli_graph_runs_ms": [*plait, "graph", "runs", "--mesh", mesh],
        }
        for argv in commands.values():  # warm the file cache; graph runs creates the mesh
            spent_ms(argv, tmp)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, argv in commands.items():
                wall, used = spent_ms(argv, tmp)
                times[name].append(wall)
                cpu[name].append(used)
    load = os.getloadavg()
    figures = [
        Cost(BENCH, name, statistics.median(spent), "ms", BOUND_MS, 1.0,
             f"the issue's bound; median of {rounds}")
        for name, spent in times.items()
    ] + [
        Cost(BENCH, name.replace("_ms", "_cpu_ms"), statistics.median(used), "ms", BOUND_MS,
             1.0, "the bound, against CPU time: what a quiet machine's wall time nears")
        for name, used in cpu.items()
    ]  # fmt: skip
    shown = f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} cores"
    if args.json:
        print(shown, file=sys.stderr)
    report(figures, as_json=args.json, title=f"plait start-up ({shown})")


if __name__ == "__main__":
    main()
