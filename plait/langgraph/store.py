"""PlaitStore: LangGraph's long-term memory store (``BaseStore``) over a plait mesh.

Items live at ``PREFIX/st/NS1/NS2/.../=/KEY``, each namespace label and the key
percent-escaped, so a namespace ``("a",)`` never holds the items of ``("a/b",)`` and a
search of ``("a",)`` reads only its own subtree. Values are dicts of what msgpack
encodes (JSON-like data).

Supported: ``put``/``get``/``delete``, ``search`` by namespace prefix with ``filter``
(equality, nested dicts, ``$eq $ne $gt $gte $lt $lte``), ``limit``/``offset``,
``list_namespaces`` with prefix/suffix conditions (``*`` wildcards), ``max_depth``, and
TTL (minutes; an expired item is hidden, and deleted by the ``get`` or ``search`` that
finds it; ``get`` refreshes a TTL when asked). Not
supported: vector (semantic) search. A ``query`` is ignored, as ``InMemoryStore``
ignores it without an index; search results come in (namespace, key) order, unscored.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from plait.errors import ConfigError, VersionConflict
from plait.langgraph._bridge import LoopBridge
from plait.langgraph._keys import DEFAULT_PREFIX, esc, scan_all, unesc
from plait.mesh import Entry, Mesh

_KEY_MARK = "="
"""The segment between a namespace and a key; :func:`esc` never yields it."""


class PlaitStore(BaseStore):
    """A LangGraph ``BaseStore`` keeping items in a plait mesh (see the module).

    Args:
        mesh: an open mesh.
        prefix: the key prefix of every key the store writes.
        loop: the loop the mesh was opened on (default: the running one).
    """

    supports_ttl = True

    def __init__(
        self,
        mesh: Mesh,
        *,
        prefix: str = DEFAULT_PREFIX,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise ConfigError(
                    "PlaitStore needs the event loop its mesh was opened on: build it "
                    "inside that loop or pass loop="
                ) from None
        self.mesh = mesh
        self.prefix = prefix
        self._bridge = LoopBridge(loop)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (from a thread other than the mesh's loop)."""
        return self._bridge.call_sync(self._batch(list(ops)), "PlaitStore.batch")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; each result at its op's index."""
        return await self._bridge.call(self._batch(list(ops)))

    async def _batch(self, ops: list[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(op))
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            else:
                raise ValueError(f"unknown store operation: {type(op).__name__}")
        return results

    # -- keys ---------------------------------------------------------------------

    def _ns_prefix(self, namespace: tuple[str, ...]) -> str:
        return "".join(f"{esc(label)}/" for label in namespace)

    def _key(self, namespace: tuple[str, ...], key: str) -> str:
        return f"{self.prefix}/st/{self._ns_prefix(namespace)}{_KEY_MARK}/{esc(key)}"

    def _parse(self, full: str) -> tuple[tuple[str, ...], str]:
        parts = full[len(self.prefix) + 4 :].split("/")
        return tuple(unesc(p) for p in parts[:-2]), unesc(parts[-1])

    # -- ops ----------------------------------------------------------------------

    async def _get(self, op: GetOp) -> Item | None:
        key = self._key(tuple(op.namespace), op.key)
        entry = await self.mesh.get(key)
        if entry is None:
            return None
        if _expired(entry):
            await self._forget(entry)
            return None
        value = entry.value
        if op.refresh_ttl and value.get("t") is not None:
            refreshed = {**value, "x": _now_ms() + int(value["t"] * 60_000)}
            await self.mesh.put(key, refreshed)
        return self._item(entry)

    async def _put(self, op: PutOp) -> None:
        key = self._key(tuple(op.namespace), op.key)
        if op.value is None:
            await self.mesh.delete(key)
            return
        at = _now_ms()
        ttl = op.ttl if isinstance(op.ttl, int | float) else None
        value = {
            "v": dict(op.value),
            "c": at,
            "u": at,
            "t": ttl,
            "x": at + int(ttl * 60_000) if ttl is not None else None,
        }
        await self.mesh.put(key, value)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = f"{self.prefix}/st/{self._ns_prefix(tuple(op.namespace_prefix))}"
        matching: list[Item] = []
        async for entry in scan_all(self.mesh, prefix):
            if _expired(entry):
                await self._forget(entry)
                continue
            if op.filter and not all(
                _matches(entry.value["v"].get(k), v) for k, v in op.filter.items()
            ):
                continue
            matching.append(self._item(entry))
        matching.sort(key=lambda item: (item.namespace, item.key))
        return [
            SearchItem(
                namespace=item.namespace,
                key=item.key,
                value=item.value,
                created_at=item.created_at,
                updated_at=item.updated_at,
            )
            for item in matching[op.offset : op.offset + op.limit]
        ]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces: set[tuple[str, ...]] = set()
        async for entry in scan_all(self.mesh, f"{self.prefix}/st/"):
            if not _expired(entry):
                namespaces.add(self._parse(entry.key)[0])
        chosen = [
            ns
            for ns in namespaces
            if all(_namespace_matches(c, ns) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            chosen = list({ns[: op.max_depth] for ns in chosen})
        return sorted(chosen)[op.offset : op.offset + op.limit]

    async def _forget(self, entry: Entry) -> None:
        """Delete an expired item, unless it was written again since it was read."""
        with contextlib.suppress(VersionConflict):
            await self.mesh.delete(entry.key, entry.version)

    def _item(self, entry: Entry) -> Item:
        namespace, key = self._parse(entry.key)
        value = entry.value
        return Item(
            value=value["v"],
            key=key,
            namespace=namespace,
            created_at=datetime.fromtimestamp(value["c"] / 1000, UTC),
            updated_at=datetime.fromtimestamp(value["u"] / 1000, UTC),
        )


def _now_ms() -> int:
    """Wall-clock milliseconds: what TTL expiries are written and judged in."""
    return time.time_ns() // 1_000_000


def _expired(entry: Entry) -> bool:
    expires = entry.value.get("x")
    return expires is not None and bool(expires <= _now_ms())


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    if not path:
        return True
    return all(p == "*" or p == label for label, p in zip(labels, path, strict=True))


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": lambda a, b: float(a) > float(b),
    "$gte": lambda a, b: float(a) >= float(b),
    "$lt": lambda a, b: float(a) < float(b),
    "$lte": lambda a, b: float(a) <= float(b),
}


def _matches(value: Any, wanted: Any) -> bool:
    """Whether a stored value matches a filter value, as ``InMemoryStore`` compares."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            for name, operand in wanted.items():
                if name not in _OPERATORS:
                    raise ValueError(f"unsupported filter operator {name!r}")
                if not _OPERATORS[name](value, operand):
                    return False
            return True
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_matches(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)
