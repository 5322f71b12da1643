"""Agent profiles: who an agent is, as a small record low in the house.

An :class:`AgentProfile` names an agent's model, system prompt, tools, pre-approved
tools, delegates and workspace. Graphs validate against profiles, tools gate calls by
them, agent actors run them. Profiles are stored in the mesh under ``agents/<name>``;
an ``assistant`` (:data:`DEFAULT_ASSISTANT`) exists even when none is stored.

This room sits just above the mesh: it imports the mesh and nothing else of plait.
"""

from __future__ import annotations

from plait.profiles.record import AgentProfile
from plait.profiles.store import (
    DEFAULT_ASSISTANT,
    PREFIX,
    get_profile,
    list_profiles,
    profile_key,
    profiles_map,
    put_profile,
)

__all__ = [
    "DEFAULT_ASSISTANT",
    "PREFIX",
    "AgentProfile",
    "get_profile",
    "list_profiles",
    "profile_key",
    "profiles_map",
    "put_profile",
]
