"""The cost of telemetry on the durable-run loop of ``bench/runs.py`` (SQLite mesh).

- ``runs_tracing_on``: transitions per second with tracing on (every span through the
  SDK's batch processor to an exporter that drops them) and metrics counting, against
  the loop with both off, in adjacent slices of one run each in this process, their
  order alternating: the median of the pairs' ratios (target 0.85).
- ``runs_tracing_on_cpu``: the same pairs, counted in transitions per CPU-second of this
  process (every thread of it): what tracing costs, seen apart from what the other
  processes of a busy machine take from this one.
- ``runs_tracing_off``: with telemetry off, all that is left of it on the path is the
  test of one flag, ``STATE.tracing`` or ``STATE.metrics``: the flag reads of the off
  loop are counted (per transition) and timed (each, in a tight loop), and the figure
  is the off loop's rate over that rate with those reads taken away (target 0.99).
  Two trees can be compared instead, each in a fresh process: ``bench/runs.py
  --tracing`` with ``PLAIT_BENCH_BASELINE_TREE``.

Run: ``python bench/tracing_rate.py [--json] [--seconds S]`` (``--seconds`` scales the
pairs: 5 per second, at least 7). ``python bench/tracing_rate.py TREE SECONDS`` is the
fresh-process rate ``bench/runs.py --tracing`` compares two trees by: it imports
``plait`` and the benchmark from checkout ``TREE``, runs the loop for about ``SECONDS``
and prints the rate.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any


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


class Slice:
    """One slice of the loop: its transitions, wall seconds and CPU seconds."""

    def __init__(self, transitions: int, wall: float, cpu: float) -> None:
        self.transitions, self.wall, self.cpu = transitions, wall, cpu

    @property
    def rate(self) -> float:
        """Transitions per second."""
        return self.transitions / self.wall

    @property
    def cpu_rate(self) -> float:
        """Transitions per CPU-second of this process."""
        return self.transitions / self.cpu


def median_pair(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """The pair whose ratio (first over second) is the median."""
    return sorted(pairs, key=lambda p: p[0] / p[1])[len(pairs) // 2]


class FlagReads:
    """Counts the reads of ``STATE.tracing`` and ``STATE.metrics`` while installed (the
    state's class swapped for one whose two fields are counting properties)."""

    def __init__(self) -> None:
        self.reads = 0

    def __enter__(self) -> FlagReads:
        from plait.telemetry.state import STATE, TelemetryState

        counter = self

        class Counting(TelemetryState):
            @property  # type: ignore[override]
            def tracing(self) -> bool:
                counter.reads += 1
                return bool(self.__dict__["tracing"])

            @tracing.setter
            def tracing(self, on: bool) -> None:
                self.__dict__["tracing"] = on

            @property  # type: ignore[override]
            def metrics(self) -> bool:
                counter.reads += 1
                return bool(self.__dict__["metrics"])

            @metrics.setter
            def metrics(self, on: bool) -> None:
                self.__dict__["metrics"] = on

        STATE.__class__ = Counting
        return self

    def __exit__(self, *exc: object) -> None:
        from plait.telemetry.state import STATE, TelemetryState

        STATE.__class__ = TelemetryState


def flag_read_s() -> float:
    """Seconds one read of a telemetry flag takes (a module global's attribute, as the
    instrumented places read it), over an empty loop's."""
    from plait.telemetry import state

    n = 1_000_000
    read = min(timeit.repeat("STATE.tracing", globals=vars(state), number=n, repeat=5))
    empty = min(timeit.repeat("pass", number=n, repeat=5))
    return max(0.0, read - empty) / n


async def tracing_figures(seconds: float) -> list[Any]:
    """``runs_tracing_on``, ``runs_tracing_on_cpu`` and ``runs_tracing_off``."""
    import runs
    from _common import Figure

    from plait import telemetry
    from plait.mesh import open_mesh
    from plait.runs import Runs

    pairs = max(7, int(seconds * 5)) | 1
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
        async with open_mesh(f"sqlite:///{Path(tmp) / 'plait.db'}") as mesh:
            async with runs.hosted(mesh, runs.FAILS, runs.LOOP) as host:
                service = Runs(mesh)

                async def one(on: bool) -> Slice:
                    if on:
                        telemetry.enable_tracing(runs._Dropped())
                        telemetry.enable_metrics()
                    try:
                        wall, cpu = time.perf_counter(), time.process_time()
                        rec = await runs.run_once(service, host)
                        return Slice(
                            sum(rec.visits.values()),
                            time.perf_counter() - wall,
                            time.process_time() - cpu,
                        )
                    finally:  # the batch processor's last export is not timed
                        telemetry.disable_tracing()
                        telemetry.STATE.metrics = False

                await one(True)
                await one(False)
                measured: list[tuple[Slice, Slice]] = []
                for n in range(pairs):
                    if n % 2:
                        off = await one(False)
                        on = await one(True)
                    else:
                        on = await one(True)
                        off = await one(False)
                    measured.append((on, off))
                with FlagReads() as counted:
                    flagged = await one(False)
    on_rate, off_rate = median_pair([(a.rate, b.rate) for a, b in measured])
    on_cpu, off_cpu = median_pair([(a.cpu_rate, b.cpu_rate) for a, b in measured])
    reads = counted.reads / flagged.transitions
    read_s = flag_read_s()
    per_transition = 1 / statistics.median(b.rate for _, b in measured)
    without = 1 / (per_transition - reads * read_s)
    return [
        Figure("runs", "runs_tracing_on", on_rate, "transitions/s", off_rate, 0.85,
               f"tracing and metrics off, same process: median of {pairs} adjacent pairs of "
               "runs; spans batched to a dropping exporter"),
        Figure("runs", "runs_tracing_on_cpu", on_cpu, "transitions/cpu-s", off_cpu, 0.85,
               f"the same {pairs} pairs per CPU-second of this process"),
        Figure("runs", "runs_tracing_off", 1 / per_transition, "transitions/s", without, 0.99,
               f"the off loop without its {reads:.1f} flag reads per transition "
               f"({read_s * 1e9:.0f} ns each)"),
    ]  # fmt: skip


def main() -> None:
    if len(sys.argv) == 3 and not sys.argv[1].startswith("-"):
        tree, seconds = Path(sys.argv[1]).resolve(), float(sys.argv[2])
        sys.path[:0] = [str(tree), str(tree / "bench")]
        from plait.actors import tune_gc_for_serving

        tune_gc_for_serving()
        print(asyncio.run(measure(seconds)))
        return
    sys.path[:0] = [str(Path(__file__).resolve().parent)]
    from _common import parse_args, report

    from plait.actors import tune_gc_for_serving

    args = parse_args(__doc__.splitlines()[0] if __doc__ else "tracing", sys.argv[1:])
    tune_gc_for_serving()  # as a serving process (and bench/runs.py) does
    figures = asyncio.run(tracing_figures(args.seconds))
    report(figures, as_json=args.json, title="durable runs: the cost of telemetry")


if __name__ == "__main__":
    main()
