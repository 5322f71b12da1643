"""Tools: a registry with JSON-schema arguments, approval gates, trust and workspaces.

- :class:`ToolRegistry` holds :class:`Tool` objects by name, validates arguments
  before a call and turns handler failures into :class:`~plait.errors.ToolError`.
- :func:`check_allowed` says whether an agent may use a tool at all; :func:`gate`
  whether a call may run now or needs a person's approval. Both take the caller's
  :class:`~plait.profiles.AgentProfile` as an argument; profiles live in
  :mod:`plait.profiles`.
- :mod:`plait.tools.trust` says which node calls run untrusted.
- :mod:`plait.tools.workspace` says where a tool works and what environment it gets.

Tools sit above :mod:`plait.profiles` and the mesh and below models, which are told of
them, and graphs, whose nodes call them.
"""

from __future__ import annotations

from plait.tools.approval import GateDecision, check_allowed, gate
from plait.tools.builtin import BUILTIN_TOOLS, bash, http_get, read_file
from plait.tools.loading import default_registry, load_tools, serving_registry
from plait.tools.registry import (
    DEFAULT_TIMEOUT_S,
    Tool,
    ToolContext,
    ToolHandler,
    ToolRegistry,
    model_name,
    names_match,
    tool,
)
from plait.tools.spec import ToolSpec
from plait.tools.trust import runs_trusted, tainted_after

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_TIMEOUT_S",
    "GateDecision",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolRegistry",
    "ToolSpec",
    "bash",
    "check_allowed",
    "default_registry",
    "gate",
    "http_get",
    "load_tools",
    "model_name",
    "names_match",
    "read_file",
    "runs_trusted",
    "serving_registry",
    "tainted_after",
    "tool",
]
