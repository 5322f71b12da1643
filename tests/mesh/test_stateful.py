"""Random sequences of key operations, checked against a plain dict, on every backend.

The model is the contract of :mod:`plait.mesh._base` in a few lines: ``key -> (value,
version)``; a write makes version 1 or raises it by one; a failed ``if_version`` raises
:class:`VersionConflict` and changes nothing; a transaction is all or none.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from plait.errors import VersionConflict
from plait.mesh import Mesh, open_mesh

T = TypeVar("T")
Model = dict[str, tuple[Any, int]]

SETTINGS = settings(max_examples=25, stateful_step_count=20, deadline=None, database=None)

KEYS = st.sampled_from(["a", "b", "c", "d"])
VALUES = st.one_of(
    st.none(), st.integers(), st.text(max_size=4), st.lists(st.booleans(), max_size=3)
)
MODES = st.sampled_from(["none", "zero", "right", "wrong"])
MISSES = st.sampled_from([-2, -1, 1, 2])
WRITES = st.tuples(st.sampled_from(["put", "delete"]), KEYS, VALUES, MODES, MISSES)


def version_of(model: Model, key: str) -> int:
    return model[key][1] if key in model else 0


def expectation(current: int, mode: str, miss: int) -> int | None:
    """The ``if_version`` to send: none, create-only, the right one or a wrong one."""
    if mode == "none":
        return None
    if mode == "zero":
        return 0
    if mode == "right":
        return current
    wrong = current + miss
    return wrong if wrong >= 0 else current - miss


def conflicts(current: int, if_version: int | None) -> bool:
    return if_version is not None and if_version != current


class KeysMachine(RuleBasedStateMachine):
    """Drives one fresh mesh (on its own event loop) beside a dict model."""

    def __init__(self, url: str, cleanup: Callable[[], None]) -> None:
        super().__init__()
        self.cleanup = cleanup
        self.loop = asyncio.new_event_loop()
        self.mesh: Mesh = open_mesh(url)
        self.run(self.mesh.open())
        self.model: Model = {}

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            self.run(self.mesh.close())
        finally:
            self.loop.close()
            self.cleanup()

    @rule(key=KEYS)
    def get(self, key: str) -> None:
        got = self.run(self.mesh.get(key))
        if key in self.model:
            assert got is not None and (got.value, got.version) == self.model[key]
        else:
            assert got is None

    @rule(key=KEYS, value=VALUES, mode=MODES, miss=MISSES)
    def put(self, key: str, value: Any, mode: str, miss: int) -> None:
        current = version_of(self.model, key)
        if_version = expectation(current, mode, miss)
        if conflicts(current, if_version):
            with pytest.raises(VersionConflict) as info:
                self.run(self.mesh.put(key, value, if_version=if_version))
            assert (info.value.key, info.value.expected, info.value.actual) == (
                key,
                if_version,
                current,
            )
            return
        entry = self.run(self.mesh.put(key, value, if_version=if_version))
        assert (entry.key, entry.value, entry.version) == (key, value, current + 1)
        self.model[key] = (value, current + 1)

    @rule(key=KEYS, mode=MODES, miss=MISSES)
    def delete(self, key: str, mode: str, miss: int) -> None:
        current = version_of(self.model, key)
        if_version = expectation(current, mode, miss)
        if conflicts(current, if_version):
            with pytest.raises(VersionConflict) as info:
                self.run(self.mesh.delete(key, if_version=if_version))
            assert (info.value.key, info.value.actual) == (key, current)
            return
        assert self.run(self.mesh.delete(key, if_version=if_version)) is (key in self.model)
        self.model.pop(key, None)

    @rule(writes=st.lists(WRITES, min_size=1, max_size=4))
    def transact(self, writes: list[tuple[str, str, Any, str, int]]) -> None:
        shadow = dict(self.model)
        entries: Model = {}
        conflict: tuple[str, int, int] | None = None
        tx = self.mesh.transact()
        for kind, key, value, mode, miss in writes:
            current = version_of(shadow, key)
            if_version = expectation(current, mode, miss)
            if kind == "put":
                tx.put(key, value, if_version=if_version)
            else:
                tx.delete(key, if_version=if_version)
            if conflict is None and conflicts(current, if_version):
                assert if_version is not None
                conflict = (key, if_version, current)
            elif kind == "put":
                shadow[key] = entries[key] = (value, current + 1)
            else:
                shadow.pop(key, None)
        if conflict is not None:
            with pytest.raises(VersionConflict) as info:
                self.run(tx.commit())
            assert (info.value.key, info.value.expected, info.value.actual) == conflict
            return
        result = self.run(tx.commit())
        assert {k: (e.value, e.version) for k, e in result.entries.items()} == entries
        self.model = shadow

    @invariant()
    def scan_matches_the_model(self) -> None:
        async def scan() -> list[tuple[str, Any, int]]:
            return [(e.key, e.value, e.version) async for e in self.mesh.scan()]

        assert self.run(scan()) == [(k, *self.model[k]) for k in sorted(self.model)]


def fresh_meshes(mesh_url: str) -> type[KeysMachine]:
    """The machine for this test's URL, giving each example a mesh of its own."""
    counter = itertools.count()

    def new_mesh() -> tuple[str, Callable[[], None]]:
        n = next(counter)
        if mesh_url.startswith("memory:"):
            return mesh_url, lambda: None
        if mesh_url.startswith("sqlite:"):
            path = Path(mesh_url.removeprefix("sqlite:///")).with_name(f"stateful-{n}.db")

            def remove_files() -> None:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)

            return f"sqlite:///{path}", remove_files
        parts = urlsplit(mesh_url)
        prefix = f"{parse_qs(parts.query)['prefix'][0]}{n}:"
        base = parts._replace(query="").geturl()

        def drop_prefix() -> None:
            import redis

            client = redis.Redis.from_url(base)
            try:
                keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
                if keys:
                    client.delete(*keys)
            finally:
                client.close()

        return f"{base}?prefix={prefix}", drop_prefix

    class FreshMeshMachine(KeysMachine):
        def __init__(self) -> None:
            super().__init__(*new_mesh())

    return FreshMeshMachine


@pytest.mark.parametrize(
    "mesh_url",
    ["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)],
    indirect=True,
)
@pytest.mark.timeout(300)  # only a failure needs it: shrinking replays many examples
def test_keys_follow_the_dict_model(mesh_url: str) -> None:
    run_state_machine_as_test(fresh_meshes(mesh_url), settings=SETTINGS)
