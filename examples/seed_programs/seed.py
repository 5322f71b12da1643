"""The three program texts of the fabric seed, cut from the seed document as it is.

    python -m examples.seed_programs.seed OUT --run r1

writes them to ``OUT`` (``in_session.py``, ``start.py``, ``node.py``) beside
``model.json``, a scripted model standing in for the model: it approves the in-session
review, and answers every message of the actor ``graph-<run>`` by calling ``exec`` with
the node program (its payloads ``{"run": run}``), as the seed's instructions ask.

``fabric-graph-programs.txt`` beside this file is the seed document, unchanged. Its
programs sit between fixed lines of prose; :func:`seed_programs` cuts them out, byte
for byte, so what runs is what the document says:

- ``in_session``: the in-session graph (checks, then a review);
- ``start``: the resumable graph's start program (seeds the record, creates the actor);
- ``node``: the program the resumable graph's actor runs on every message.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

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


def model_rules(run: str, review: str = "APPROVE: the change is correct.") -> list[dict[str, Any]]:
    """Scripted-model rules: the in-session review answers ``review``; each message of
    the exec actor ``graph-<run>`` is answered by one ``exec`` of the node program, but
    an event carrying a ``fabricProgram``, which the actor only notes (it runs nothing
    by itself)."""
    actor = "graph-" + run
    node = {"program": seed_programs()["node"], "payloads": {"run": run}}
    return [
        {"node": actor, "match": "fabricProgram", "text": "noted; the graph record decides"},
        {"node": actor, "tool_calls": [{"name": "exec", "arguments": node}]},
        {"match": "Review the change to", "text": review},
    ]


def write(out: Path, run: str) -> list[Path]:
    """Write the three programs and ``model.json`` for ``run`` to ``out``; the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in seed_programs().items():
        path = out / f"{name}.py"
        path.write_text(text, encoding="utf-8")
        written.append(path)
    model = out / "model.json"
    model.write_text(json.dumps({"rules": model_rules(run)}, indent=2), encoding="utf-8")
    return [*written, model]


def main() -> None:
    """Write the seed's programs and the scripted model to a directory."""
    parser = argparse.ArgumentParser(description="Cut the fabric seed's programs out.")
    parser.add_argument("out", type=Path, help="the directory to write them to")
    parser.add_argument("--run", default="r1", help="the resumable graph's run key")
    args = parser.parse_args()
    for path in write(args.out, args.run):
        print(path)


if __name__ == "__main__":
    main()
