"""plait: a durable actor-mesh runtime for LLM agent graphs."""

from __future__ import annotations

from plait.mesh import open_mesh

__all__ = ["open_mesh"]
