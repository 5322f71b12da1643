"""An in-session graph written in Python: type check and tests at once, then a review.

``checks`` runs ``mypy`` and ``pytest`` on a package in parallel through the ``bash``
tool (``plait.gather``, at most two at once); a Python-decided route sends a failure to
``failed``, which returns the failing node and its evidence, and a pass to ``review``, a
model asked for APPROVE or a list of blockers; ``verdict`` turns its reply into
``success`` or ``partial``. Passing nodes are never run again: each commits once.

Run from the repository root, with the scripted reviewer beside this file::

    python examples/review_graph.py [PACKAGE]      # default: sample_pkg (in examples/)
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, Literal

import anyio

import plait
from plait.programs import ToolsCapability

HERE = Path(__file__).resolve().parent

graph = plait.Graph("review", description="type check and test in parallel, then review")


@graph.node(on_indeterminate="retry")  # both checks only read: safe to run again
async def checks(input: str, tools: ToolsCapability) -> dict[str, Any]:
    """``mypy`` and ``pytest`` on the package ``input``, at once; both outcomes."""
    python, target = shlex.quote(sys.executable), shlex.quote(input)
    types, tests = await plait.gather(
        tools.bash(f"{python} -m mypy --strict --cache-dir=/dev/null {target}", timeout_s=120),
        tools.bash(
            f"{python} -m pytest -q -p no:cacheprovider -o addopts= {target}", timeout_s=120
        ),
        limit=2,
        fail_fast=False,
    )
    return {"ok": types["ok"] and tests["ok"], "types": _brief(types), "tests": _brief(tests)}


def after_checks(checks: dict[str, Any]) -> Literal["review", "failed"]:
    """Review only what passed both checks."""
    return "review" if checks["ok"] else "failed"


graph.route(checks, after_checks)


@graph.node
async def failed(checks: dict[str, Any]) -> dict[str, Any]:
    """The failing node and its evidence."""
    return {"status": "failed", "node": "checks", **checks}


graph.agent(
    "review",
    "Review the change to {{input}} for correctness. Type check and tests pass:\n"
    "{{checks.tests.stdout}}\nReply APPROVE or a list of blockers.",
    next="verdict",
    tools=[],
)


@graph.node
async def verdict(review: str) -> dict[str, Any]:
    """``success`` when the reviewer approves, ``partial`` with its blockers otherwise."""
    approved = review.strip().startswith("APPROVE")
    return {"status": "success" if approved else "partial", "review": review}


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    """A check's outcome with the end of its output (the evidence a failure keeps)."""
    tail = (result["stdout"] + result["stderr"]).strip().splitlines()[-12:]
    return {"ok": result["ok"], "exit_code": result["exit_code"], "stdout": "\n".join(tail)}


async def main(package: str = "sample_pkg") -> dict[str, Any]:
    """Run the graph on ``package`` (relative to examples/) and return its result."""
    run = await graph.run(
        package,
        model=f"scripted:{HERE / 'review_graph.model.yaml'}",
        approve_tools=True,  # in-session: the person running this approves both checks
        cwd=HERE,
    )
    for step in run.trajectory:
        print(f"{step.node:>14}  visit {step.visit}  {step.verdict or step.error or ''}")
    return run.output if run.status == "done" else {"status": run.status, "error": run.error}


if __name__ == "__main__":
    print(anyio.run(main, *sys.argv[1:2]))
