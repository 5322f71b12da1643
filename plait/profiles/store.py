"""Agent profiles, stored in the mesh under ``agents/<name>``.

An agent named ``assistant`` always exists: when none is stored,
:data:`DEFAULT_ASSISTANT` stands in for it. Storing one under that name replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import ValidationError

from plait.errors import ConfigError
from plait.mesh import Mesh
from plait.profiles.record import AgentProfile

PREFIX = "agents/"
"""The mesh key prefix of agent profiles."""

MESH_KEYS = (PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

DEFAULT_ASSISTANT = AgentProfile(
    name="assistant",
    tools=["http_get", "read_file", "bash"],
    system_prompt=(
        "You are a helpful, careful assistant. Answer accurately and concisely, use your "
        "tools when they help, and say so plainly when you are unsure."
    ),
)
"""The profile of ``assistant`` when none is stored."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def profile_key(name: str) -> str:
    """The mesh key of the profile called ``name``.

    Raises:
        ConfigError: ``name`` is not 1-64 letters, digits, ``_``, ``.`` or ``-``
            starting with a letter or digit.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"invalid agent name {name!r}: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return PREFIX + name


async def get_profile(mesh: Mesh, name: str) -> AgentProfile:
    """The profile of agent ``name``: the stored one, else the default for ``assistant``.

    Raises:
        ConfigError: no such agent (the message says how to create one), or the
            stored profile is not a valid :class:`AgentProfile`.
    """
    key = profile_key(name)
    entry = await mesh.get(key)
    if entry is not None:
        return _decode(key, entry.value)
    if name == DEFAULT_ASSISTANT.name:
        return DEFAULT_ASSISTANT.model_copy(deep=True)
    raise ConfigError(
        f"unknown agent {name!r}: create it with `plait agents put {name} --tools a,b` "
        f"(or plait.profiles.put_profile(mesh, AgentProfile(name={name!r}, tools=[...])))"
    )


async def put_profile(mesh: Mesh, profile: AgentProfile) -> None:
    """Store ``profile`` under ``agents/<name>``, replacing any stored one.

    Raises:
        ConfigError: the profile's name is not a valid agent name.
    """
    await mesh.put(profile_key(profile.name), profile.model_dump(mode="json"))


async def list_profiles(mesh: Mesh) -> list[AgentProfile]:
    """Every stored profile, plus the default ``assistant`` if none is stored, by name.

    Raises:
        ConfigError: a stored profile is not a valid :class:`AgentProfile`.
    """
    found: dict[str, AgentProfile] = {}
    async for entry in mesh.scan(PREFIX):
        name = entry.key[len(PREFIX) :]
        if "/" not in name:  # deeper keys belong to something else
            found[name] = _decode(entry.key, entry.value)
    found.setdefault(DEFAULT_ASSISTANT.name, DEFAULT_ASSISTANT.model_copy(deep=True))
    return [found[n] for n in sorted(found)]


async def profiles_map(mesh: Mesh, names: Iterable[str]) -> dict[str, AgentProfile]:
    """The profiles of ``names``, by name.

    Raises:
        ConfigError: one or more agents are unknown; the message names all of them.
    """
    out: dict[str, AgentProfile] = {}
    unknown: list[str] = []
    for name in dict.fromkeys(names):
        try:
            out[name] = await get_profile(mesh, name)
        except ConfigError:
            if await mesh.get(profile_key(name)) is not None:
                raise  # stored but invalid: that message says more
            unknown.append(name)
    if unknown:
        listed = ", ".join(repr(n) for n in unknown)
        raise ConfigError(
            f"unknown agent(s) {listed}: create each with `plait agents put NAME --tools a,b` "
            "(or plait.profiles.put_profile(mesh, AgentProfile(name=..., tools=[...])))"
        )
    return out


def _decode(key: str, value: object) -> AgentProfile:
    try:
        return AgentProfile.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'profile'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"the agent profile at {key!r} is invalid: {problems}") from None


__all__ = [
    "DEFAULT_ASSISTANT",
    "MESH_KEYS",
    "PREFIX",
    "get_profile",
    "list_profiles",
    "profile_key",
    "profiles_map",
    "put_profile",
]
