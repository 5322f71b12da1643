"""How long a test waits, on a machine that may be busy with other work.

A test never asserts how fast something was (speed is measured by ``bench/``); it waits
for an event, a marker or a state, up to a deadline that only ends a test that would
otherwise hang. Those deadlines are written for a quiet machine and stretched here by
:func:`timeout_scale`, so that a loaded machine gives a slow child process more time
instead of failing the test.
"""

from __future__ import annotations

import os

MAX_SCALE = 6.0
"""The most a measured load stretches a deadline (``PLAIT_TEST_TIMEOUT_SCALE`` may say more)."""


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def timeout_scale() -> float:
    """How much to stretch a deadline now: ``PLAIT_TEST_TIMEOUT_SCALE`` if set, else the
    one-minute load average per core (at least 1, at most :data:`MAX_SCALE`).

    Read at each call: a deadline set while a neighbour's build runs gets more time.
    """
    given = os.environ.get("PLAIT_TEST_TIMEOUT_SCALE")
    if given:
        try:
            scale = float(given)
        except ValueError:
            raise ValueError(
                f"PLAIT_TEST_TIMEOUT_SCALE={given!r} is not a number; set it to e.g. 2"
            ) from None
        if scale <= 0:
            raise ValueError(f"PLAIT_TEST_TIMEOUT_SCALE={given!r} must be above 0; e.g. 2")
        return scale
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this system
        return 1.0
    return min(MAX_SCALE, max(1.0, load / cpu_count()))


def scaled(seconds: float) -> float:
    """``seconds`` stretched by :func:`timeout_scale`: a deadline for a wait in a test."""
    return seconds * timeout_scale()


def worker_count() -> int:
    """How many xdist test processes to run: ``PLAIT_TEST_WORKERS`` if set, else one per
    core, at most four (most slow tests wait on child processes, but a process per
    core more than that only makes every deadline tighter)."""
    given = os.environ.get("PLAIT_TEST_WORKERS")
    if given:
        if not given.isdigit():
            raise ValueError(f"PLAIT_TEST_WORKERS={given!r} is not a count; set it to e.g. 2")
        return int(given)
    return min(cpu_count(), 4)
