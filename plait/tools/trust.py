"""The trust rule: which node calls run untrusted.

Outside content (a fetched page, an uploaded document) may carry instructions meant to
hijack an agent. Trust is tracked per node output, not per run:

- A node's output is *tainted* if, on the visit that produced it, the node read
  (through its templates) a tainted output, or itself called an external tool.
- A node *runs untrusted* if it reads a tainted output. An untrusted call loses its
  agent's pre-approvals (see :func:`plait.tools.gate`); nothing else changes.
- A node reading only clean state runs trusted, even in a run where another branch
  touched outside content.
- A node that runs again and reads only clean state produces a clean output: taint
  belongs to an output, and a new visit writes a new one.

The run's ``input`` counts as clean unless the caller puts ``"input"`` in the tainted
set (for instance when the input is an uploaded document). Reads name what templates
name: node ids, ``input``, fan-out instance ids such as ``fetch[0]``.
"""

from __future__ import annotations

from collections.abc import Iterable


def runs_trusted(
    reads: Iterable[str], tainted: Iterable[str], *, seen_external: bool = False
) -> bool:
    """Whether a node call runs trusted.

    Args:
        reads: the outputs the node's templates read.
        tainted: the outputs currently tainted.
        seen_external: the call already got an external tool's result back (an agent
            turn mid-way); from then on the rest of that call runs untrusted.

    Returns:
        True if the call reads no tainted output and has seen no outside content.
    """
    return not seen_external and set(tainted).isdisjoint(reads)


def tainted_after(
    node_id: str, reads: Iterable[str], used_external_tool: bool, tainted: Iterable[str]
) -> bool:
    """Whether the output ``node_id`` just produced is tainted.

    Args:
        node_id: the node that ran; its own earlier output counts only if it is in
            ``reads`` (a loop-back node reading its previous draft).
        reads: the outputs the node's templates read on this visit.
        used_external_tool: the node called an external tool on this visit.
        tainted: the outputs tainted before this visit.
    """
    return used_external_tool or not runs_trusted(reads, tainted)


__all__ = ["runs_trusted", "tainted_after"]
