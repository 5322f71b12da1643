"""Checking a graph's templates on hostile text: linear in the text's length.

A graph holding one prompt of ``{{`` repeated (and of ``{{name`` repeated, never closed)
is validated at 5k and 80k characters. ``per_char_*`` figures are nanoseconds per
character at 80k, judged against the same at 5k (a :class:`Cost`: ratio ``baseline /
value``, about 1 when the work grows with the length, 1/16 when it grows with its
square). ``braces_20k_ms`` is the time of the 20k case the quadratic check took 4.76 s
on, judged against that figure.

Run: ``python bench/templates.py [--json] [--seconds 1.0]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from _common import Cost, Figure, parse_args, report

from plait.graphs.validate import validate_graph

BENCH = "templates"
SHAPES = {"braces": "{{", "names": "{{a"}
"""Each hostile shape: the text repeated to fill a prompt."""
QUADRATIC_20K_S = 4.76
"""What checking 20k characters of ``{{`` took before it was linear (issue 20)."""


def graph_of(prompt: str) -> dict[str, object]:
    """A one-node graph whose prompt is ``prompt``."""
    return {"name": "g", "entry": "a", "nodes": [{"id": "a", "type": "agent", "prompt": prompt}]}


def seconds_of(check: Callable[[], object], budget: float) -> float:
    """The best time of ``check()`` over the calls that fit in ``budget`` seconds (3 at least)."""
    best, spent, calls = float("inf"), 0.0, 0
    while calls < 3 or spent < budget:
        started = time.perf_counter()
        check()
        took = time.perf_counter() - started
        best, spent, calls = min(best, took), spent + took, calls + 1
    return best


def main() -> None:
    """Measure and print the figures."""
    args = parse_args(__doc__ or BENCH)
    figures: list[Figure] = []
    budget = args.seconds / 4
    for shape, unit in SHAPES.items():
        per_char = {}
        for size in (5_000, 80_000):
            data = graph_of(unit * (size // len(unit)))
            per_char[size] = seconds_of(lambda d=data: validate_graph(d), budget) / size * 1e9
        figure = Cost(
            BENCH, f"per_char_{shape}_80k", per_char[80_000], "ns/char", per_char[5_000],
            target=0.5, note="the same per character at 5k",
        )  # fmt: skip
        figures.append(figure)
    data = graph_of("{{" * 10_000)
    took = seconds_of(lambda: validate_graph(data), budget) * 1000
    figure = Cost(
        BENCH, "braces_20k_ms", took, "ms", QUADRATIC_20K_S * 1000, target=100.0,
        note="the quadratic check, as measured in issue 20",
    )  # fmt: skip
    figures.append(figure)
    report(figures, as_json=args.json, title="Template checks on hostile text")


if __name__ == "__main__":
    main()
