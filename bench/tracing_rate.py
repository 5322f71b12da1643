"""Transitions per second of the durable-run loop of ``bench/runs.py`` on a SQLite mesh,
in a fresh process: the figure ``bench/runs.py --tracing`` compares two source trees by.

Run: ``python bench/tracing_rate.py TREE SECONDS``: imports ``plait`` and the benchmark
from checkout ``TREE`` (so an older tree, without telemetry, can be measured by the
same interpreter), runs the loop for about ``SECONDS`` and prints the rate.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path


async def measure(seconds: float) -> float:
    """The loop's transitions per second over about ``seconds``, after a warm-up run."""
    import runs  # the benchmark module of the tree on sys.path

    from plait.mesh import open_mesh
    from plait.runs import Runs

    with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
        async with open_mesh(f"sqlite:///{Path(tmp) / 'plait.db'}") as mesh:
            async with runs.hosted(mesh, runs.FAILS, runs.LOOP) as host:
                service = Runs(mesh)
                await runs.run_once(service, host)
                count, started = 0, time.perf_counter()
                while (elapsed := time.perf_counter() - started) < seconds or not count:
                    count += sum((await runs.run_once(service, host)).visits.values())
                return count / elapsed


def main() -> None:
    tree, seconds = Path(sys.argv[1]).resolve(), float(sys.argv[2])
    sys.path[:0] = [str(tree), str(tree / "bench")]
    from plait.actors import tune_gc_for_serving

    tune_gc_for_serving()
    print(asyncio.run(measure(seconds)))


if __name__ == "__main__":
    main()
