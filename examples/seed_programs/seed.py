"""The three program texts of the fabric seed, cut from the seed document as it is.

``fabric-graph-programs.txt`` beside this file is the seed document, unchanged. Its
programs sit between fixed lines of prose; :func:`seed_programs` cuts them out, byte
for byte, so what runs is what the document says:

- ``in_session``: the in-session graph (checks, then a review);
- ``start``: the resumable graph's start program (seeds the record, creates the actor);
- ``node``: the program the resumable graph's actor runs on every message.
"""

from __future__ import annotations

from pathlib import Path

SEED = Path(__file__).resolve().with_name("fabric-graph-programs.txt")
"""The seed document."""

_CUTS = {
    "in_session": ("In-session graph\n\n", "\n\nPass the test target"),
    "start": ("with its mesh version.\n\n", "\n\nPass the run key"),
    "node": ("The actor's node program follows this shape:\n\n", "\n\nHere each work node"),
}


def seed_programs(path: Path = SEED) -> dict[str, str]:
    """The seed's program texts by name (``in_session``, ``start``, ``node``).

    Raises:
        ValueError: the document no longer has the lines a program is cut between.
    """
    text = path.read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for name, (before, after) in _CUTS.items():
        start = text.find(before)
        end = text.find(after, start + len(before)) if start >= 0 else -1
        if start < 0 or end < 0:
            raise ValueError(f"{path}: the {name} program is no longer between its lines")
        out[name] = text[start + len(before) : end] + "\n"
    return out
