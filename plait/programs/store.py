"""Saved program texts in the mesh, by name and immutable version; promotion by a person.

Layout::

    programs/<name>/<version>   {"text": ..., "sha256": ..., "saved_at": ...}
    programs/<name>             {"latest": N, "versions": [...], "promoted": {"N": {"by", "at"}}}

Saving a text different from the newest stores it as the next version (the version
entry created with ``if_version=0`` and the index moved with a CAS on its version, in
one transaction); saving the newest text again returns it unchanged. A stored version
never changes. Promotion is recorded in the index, by a human only.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from plait.decisions.principals import Principal, require_human
from plait.errors import ProgramError, ProgramNotFound, VersionConflict
from plait.mesh import Entry, Mesh, skip_corrupt
from plait.programs.text import compile_text

PREFIX = "programs/"
"""The mesh key prefix of saved programs."""

MESH_KEYS = (PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_MAX_ATTEMPTS = 64


class Promotion(BaseModel):
    """Who promoted a version, and when (epoch seconds)."""

    model_config = ConfigDict(frozen=True)

    by: str
    at: float


class StoredProgram(BaseModel):
    """One saved version of a program text.

    Attributes:
        name: the program's name.
        version: the version, from 1.
        sha256: the hex SHA-256 of the text's UTF-8 bytes.
        text: the program text.
        saved_at: when it was saved, in epoch seconds.
        promotion: who promoted this version and when; None if it is not promoted.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    sha256: str
    text: str
    saved_at: float
    promotion: Promotion | None = None


class _Index(BaseModel):
    latest: int
    versions: list[int]
    promoted: dict[str, Promotion] = {}


class ProgramSummary(BaseModel):
    """A saved program and its versions, as listed."""

    model_config = ConfigDict(frozen=True)

    name: str
    latest: int
    versions: list[int]
    promoted: list[int]


def program_key(name: str, version: int | None = None) -> str:
    """The mesh key of a program's index entry, or of one of its versions."""
    return f"{PREFIX}{name}" if version is None else f"{PREFIX}{name}/{version}"


def text_sha256(text: str) -> str:
    """The hex SHA-256 a saved text is pinned by."""
    return hashlib.sha256(text.encode()).hexdigest()


async def save_program(mesh: Mesh, name: str, text: str) -> StoredProgram:
    """Store ``text`` as the next version of ``name`` (or return the newest if identical).

    Raises:
        ProgramError: the name cannot be a mesh key segment, or the text does not compile.
    """
    _check_name(name)
    compile_text(text, f"{name}.py")
    sha = text_sha256(text)
    for attempt in range(1, _MAX_ATTEMPTS + 1):
        entry = await mesh.get(program_key(name))
        index = _index(entry)
        if index is not None and index.versions:
            newest = await get_program(mesh, name, index.latest)
            if newest.sha256 == sha:
                return newest
        version = (index.latest if index else 0) + 1
        saved_at = time.time()
        tx = mesh.transact()
        tx.put(
            program_key(name, version),
            {"text": text, "sha256": sha, "saved_at": saved_at},
            if_version=0,
        )
        versions = [*(index.versions if index else []), version]
        promoted = index.promoted if index else {}
        tx.put(
            program_key(name),
            _Index(latest=version, versions=versions, promoted=promoted).model_dump(mode="json"),
            if_version=entry.version if entry is not None else 0,
        )
        try:
            await tx.commit()
        except VersionConflict:
            if attempt == _MAX_ATTEMPTS:
                raise
            continue  # another save moved the index: re-read
        return StoredProgram(name=name, version=version, sha256=sha, text=text, saved_at=saved_at)
    raise AssertionError("unreachable")


async def get_program(mesh: Mesh, name: str, version: int | None = None) -> StoredProgram:
    """One saved version of ``name``; ``version=None`` means the newest.

    Raises:
        ProgramNotFound: no such program or version; the message lists what exists.
    """
    _check_name(name, ProgramNotFound)
    index = _index(await mesh.get(program_key(name)))
    if index is None or not index.versions:
        raise ProgramNotFound(
            f"no saved program {name!r} (save one with: plait programs save {name} FILE)"
        )
    wanted = index.latest if version is None else version
    found = await mesh.get(program_key(name, wanted))
    if found is None:
        listed = ", ".join(str(v) for v in index.versions)
        raise ProgramNotFound(f"program {name!r} has no version {wanted} (versions: {listed})")
    value: Any = found.value
    try:
        return StoredProgram(
            name=name,
            version=wanted,
            promotion=index.promoted.get(str(wanted)),
            **value,
        )
    except (TypeError, ValidationError) as exc:
        raise ProgramError(f"the saved program at {found.key!r} is unreadable: {exc}") from None


async def promote(mesh: Mesh, name: str, version: int, *, by: Principal) -> StoredProgram:
    """Mark version ``version`` of ``name`` promoted, recording who and when.

    Promoting a promoted version again keeps the first record.

    Raises:
        NotPermitted: ``by`` is not a human.
        ProgramNotFound: no such program or version.
    """
    human = require_human(by, "promote a program")
    for attempt in range(1, _MAX_ATTEMPTS + 1):
        stored = await get_program(mesh, name, version)
        if stored.promotion is not None:
            return stored
        entry = await mesh.get(program_key(name))
        index = _index(entry)
        assert entry is not None and index is not None  # get_program found it
        promotion = Promotion(by=human.name, at=time.time())
        promoted = {**index.promoted, str(version): promotion}
        updated = index.model_copy(update={"promoted": promoted})
        try:
            await mesh.put(
                program_key(name), updated.model_dump(mode="json"), if_version=entry.version
            )
        except VersionConflict:
            if attempt == _MAX_ATTEMPTS:
                raise
            continue
        return stored.model_copy(update={"promotion": promotion})
    raise AssertionError("unreachable")


async def list_programs(mesh: Mesh) -> list[ProgramSummary]:
    """Every saved program, by name."""
    found: list[ProgramSummary] = []
    async for entry in mesh.scan(PREFIX, on_corrupt=skip_corrupt):
        name = entry.key[len(PREFIX) :]
        if "/" in name:
            continue
        index = _index(entry)
        if index is not None and index.versions:
            found.append(
                ProgramSummary(
                    name=name,
                    latest=index.latest,
                    versions=index.versions,
                    promoted=sorted(int(v) for v in index.promoted),
                )
            )
    return sorted(found, key=lambda p: p.name)


def _check_name(name: str, error: type[ProgramError] = ProgramError) -> None:
    if not isinstance(name, str) or _NAME.match(name) is None:
        raise error(
            f"{name!r} cannot name a saved program: use 1-128 letters, digits, '_', '.' "
            "or '-', starting with a letter or digit"
        )


def _index(entry: Entry | None) -> _Index | None:
    if entry is None:
        return None
    try:
        return _Index.model_validate(entry.value)
    except ValidationError as exc:
        raise ProgramError(f"the program index at {entry.key!r} is malformed: {exc}") from None


__all__ = [
    "MESH_KEYS",
    "PREFIX",
    "ProgramSummary",
    "Promotion",
    "StoredProgram",
    "get_program",
    "list_programs",
    "program_key",
    "promote",
    "save_program",
    "text_sha256",
]
