"""Tools: a registry with JSON-schema arguments, approval gates and agent profiles.

- :class:`ToolRegistry` holds :class:`Tool` objects by name, validates arguments
  before a call and turns handler failures into :class:`~plait.errors.ToolError`.
- :func:`check_allowed` says whether an agent may use a tool at all; :func:`gate`
  whether a call may run now or needs a person's approval.
- :mod:`plait.tools.trust` says which node calls run untrusted.
- Agent profiles live in the mesh under ``agents/<name>``.
"""

from __future__ import annotations

from plait.tools.approval import GateDecision, check_allowed, gate
from plait.tools.builtin import BUILTIN_TOOLS, bash, http_get, read_file
from plait.tools.profiles import (
    DEFAULT_ASSISTANT,
    get_profile,
    list_profiles,
    profiles_map,
    put_profile,
)
from plait.tools.registry import (
    DEFAULT_TIMEOUT_S,
    Tool,
    ToolContext,
    ToolHandler,
    ToolRegistry,
    default_registry,
    load_tools,
    serving_registry,
    tool,
)
from plait.tools.spec import AgentProfile, ToolSpec
from plait.tools.trust import mark_tainted, runs_trusted, tainted_after

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_ASSISTANT",
    "DEFAULT_TIMEOUT_S",
    "AgentProfile",
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
    "get_profile",
    "http_get",
    "list_profiles",
    "load_tools",
    "mark_tainted",
    "profiles_map",
    "put_profile",
    "read_file",
    "runs_trusted",
    "serving_registry",
    "tainted_after",
    "tool",
]
