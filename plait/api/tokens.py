"""Bearer tokens of the HTTP API, each mapped to a principal, stored hashed in the mesh.

Layout::

    tokens/<id>   {"id", "kind": "human" | "service", "name", "sha256", "created_at", "revoked_at"}

A token is ``plait_<id>_<secret>``: the id finds its record in one read, the secret (32
bytes from :mod:`secrets`) is kept only as its SHA-256, compared in constant time. A
human token acts as :class:`~plait.decisions.Human`, a service token as
:class:`~plait.decisions.Agent`: automation that may start and read runs but never
decide.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Literal

from pydantic import BaseModel, ValidationError

from plait.decisions import Agent, Human, Principal
from plait.errors import ConfigError, VersionConflict
from plait.ids import new_id
from plait.mesh import Mesh, skip_corrupt, skip_unreadable

PREFIX = "tokens/"
"""Where token records live: ``tokens/<id>``."""

MESH_KEYS = (PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

TOKEN_PREFIX = "plait_"
"""How every token begins, so one found in a log is recognised."""

TokenKind = Literal["human", "service"]
"""``human``: a person, who may answer decisions; ``service``: automation, who may not."""


class TokenRecord(BaseModel):
    """A token as stored: never the secret itself.

    Attributes:
        id: the token's public id (shown by ``plait tokens list``).
        kind: ``human`` or ``service``.
        name: the principal's name.
        sha256: hex SHA-256 of the secret.
        created_at: epoch seconds.
        revoked_at: when it was revoked (None while it works).
    """

    id: str
    kind: TokenKind
    name: str
    sha256: str
    created_at: float
    revoked_at: float | None = None

    def principal(self) -> Principal:
        """Who this token acts as."""
        return Human(self.name) if self.kind == "human" else Agent(self.name)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


async def create_token(mesh: Mesh, kind: TokenKind, name: str) -> tuple[TokenRecord, str]:
    """Store a new token for a principal; its record and the token (shown only now).

    Raises:
        ConfigError: ``name`` is empty.
    """
    if not name.strip():
        raise ConfigError(f"a {kind} token needs a non-empty name, got {name!r}")
    token_id = new_id()
    secret = secrets.token_urlsafe(32)
    record = TokenRecord(
        id=token_id, kind=kind, name=name, sha256=_digest(secret), created_at=time.time()
    )
    await mesh.put(PREFIX + token_id, record.model_dump(), if_version=0)
    return record, f"{TOKEN_PREFIX}{token_id}_{secret}"


async def list_tokens(mesh: Mesh) -> list[TokenRecord]:
    """Every token record, oldest first."""
    found = []
    async for entry in mesh.scan(PREFIX, on_corrupt=skip_corrupt):
        try:
            found.append(TokenRecord.model_validate(entry.value))
        except ValidationError as exc:
            skip_unreadable(entry.key, f"not a token ({exc.error_count()} problems)")
    return sorted(found, key=lambda t: t.created_at)


async def revoke_token(mesh: Mesh, token_id: str) -> TokenRecord:
    """Revoke a token: it is refused from now on (its record stays, for the list).

    Raises:
        ConfigError: there is no token with this id.
    """
    while True:
        entry = await mesh.get(PREFIX + token_id)
        if entry is None:
            raise ConfigError(f"no token has the id {token_id!r}: see `plait tokens list`")
        record = TokenRecord.model_validate(entry.value)
        if record.revoked_at is not None:
            return record
        record.revoked_at = time.time()
        try:
            await mesh.put(PREFIX + token_id, record.model_dump(), if_version=entry.version)
        except VersionConflict:
            continue  # revoked meanwhile: the next read says so
        return record


async def authenticate(mesh: Mesh, token: str) -> Principal | None:
    """The principal a token acts as; None if it is malformed, unknown or revoked."""
    body = token.removeprefix(TOKEN_PREFIX)
    token_id, _, secret = body.partition("_")
    if body == token or not token_id or not secret or "/" in token_id:
        return None
    entry = await mesh.get(PREFIX + token_id)
    if entry is None:
        return None
    try:
        record = TokenRecord.model_validate(entry.value)
    except ValidationError:
        return None
    if record.revoked_at is not None or not hmac.compare_digest(record.sha256, _digest(secret)):
        return None
    return record.principal()


__all__ = [
    "MESH_KEYS",
    "PREFIX",
    "TOKEN_PREFIX",
    "TokenKind",
    "TokenRecord",
    "authenticate",
    "create_token",
    "list_tokens",
    "revoke_token",
]
