"""PlaitStore against LangGraph's InMemoryStore: the same operations give the same
answers on every mesh backend; TTL, escaping and sync calls on top."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

pytest.importorskip("langgraph.store.memory")

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from plait.langgraph import PlaitStore
from plait.mesh import open_mesh
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio

ITEMS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("a",), "k1", {"n": 1, "kind": "note"}),
    (("a", "b"), "k2", {"n": 2, "kind": "note", "meta": {"lang": "en", "tags": ["x"]}}),
    (("a", "b", "c"), "k3", {"n": 3, "kind": "todo"}),
    (("a/b",), "k4", {"n": 4, "kind": "note"}),
    (("ab",), "k5", {"n": 5, "kind": "note"}),
    (("docs", "user/1"), "k/6", {"n": 6, "kind": "doc", "meta": {"lang": "fr"}}),
    (("docs", "user/2"), "k7", {"n": 7, "kind": "doc"}),
    (("users", "u1", "prefs"), "k8", {"n": 8, "kind": "pref"}),
]


def _shape(result: Any) -> Any:
    if result is None:
        return None
    if isinstance(result, list):
        return [_shape(r) for r in result]
    if isinstance(result, tuple):
        return result
    return (result.namespace, result.key, result.value)


async def _answers(store: BaseStore) -> list[Any]:
    for namespace, key, value in sorted(ITEMS):
        await store.aput(namespace, key, value)
    await store.aput(("a",), "k1", {"n": 10, "kind": "note"})  # replaced
    await store.aput(("a", "b", "c"), "gone", {"n": 0})
    await store.adelete(("a", "b", "c"), "gone")
    answers: list[Any] = [
        await store.aget(("a",), "k1"),
        await store.aget(("a", "b", "c"), "gone"),
        await store.aget(("a/b",), "k4"),
        await store.aget(("docs", "user/1"), "k/6"),
        await store.aget(("a",), "k2"),  # lives in ("a", "b"), not ("a",)
    ]
    for prefix, kwargs in [
        (("a",), {}),
        (("a", "b"), {}),
        ((), {}),
        ((), {"filter": {"kind": "note"}}),
        ((), {"filter": {"kind": "note", "n": 4}}),
        ((), {"filter": {"n": {"$gt": 4}}}),
        ((), {"filter": {"n": {"$gte": 3, "$lt": 7}}}),
        ((), {"filter": {"n": {"$ne": 5}, "kind": "doc"}}),
        ((), {"filter": {"meta": {"lang": "en"}}}),
        ((), {"filter": {"meta": {"tags": ["x"]}}}),
        ((), {"limit": 3}),
        ((), {"limit": 3, "offset": 2}),
        (("docs",), {"offset": 1}),
        (("nothing",), {}),
    ]:
        found = await store.asearch(prefix, **kwargs)
        answers.append(sorted(_shape(found)) if not kwargs.get("limit") else _shape(found))
    for kwargs in [
        {},
        {"prefix": ("a",)},
        {"prefix": ("docs", "*")},
        {"suffix": ("prefs",)},
        {"prefix": ("users", "*", "prefs")},
        {"max_depth": 1},
        {"prefix": ("a",), "max_depth": 2},
        {"limit": 2, "offset": 1},
    ]:
        answers.append(await store.alist_namespaces(**kwargs))
    return [_shape(a) if not isinstance(a, list) else a for a in answers]


async def test_plait_store_answers_as_the_in_memory_store_does(mesh_url: str) -> None:
    expected = await _answers(InMemoryStore())
    async with open_mesh(mesh_url) as mesh:
        got = await _answers(PlaitStore(mesh))
    assert got == expected
    assert expected[0] == (("a",), "k1", {"n": 10, "kind": "note"})
    assert expected[4] is None


async def test_items_with_a_ttl_expire_and_a_get_refreshes_them(mesh_url: str) -> None:
    async with open_mesh(mesh_url) as mesh:
        store = PlaitStore(mesh)
        await store.aput(("t",), "short", {"v": 1}, ttl=0.001)  # 60 ms
        await store.aput(("t",), "long", {"v": 2}, ttl=10)
        await store.aput(("t",), "forever", {"v": 3})
        with anyio.fail_after(scaled(10)):
            while await store.aget(("t",), "short", refresh_ttl=False) is not None:
                await asyncio.sleep(0.01)
        assert [i.key for i in await store.asearch(("t",))] == ["forever", "long"]
        assert await mesh.get(store._key(("t",), "short")) is None  # deleted once found
        assert await store.alist_namespaces() == [("t",)]
        key = store._key(("t",), "long")
        before = (await mesh.get(key)).value["x"]  # type: ignore[union-attr]
        with anyio.fail_after(scaled(10)):
            while (await mesh.get(key)).value["x"] == before:  # type: ignore[union-attr]
                assert await store.aget(("t",), "long") is not None
                await asyncio.sleep(0.005)
        unrefreshed = (await mesh.get(key)).value["x"]  # type: ignore[union-attr]
        await store.aget(("t",), "long", refresh_ttl=False)
        assert (await mesh.get(key)).value["x"] == unrefreshed  # type: ignore[union-attr]


async def test_sync_calls_work_from_another_thread(mesh_url: str) -> None:
    async with open_mesh(mesh_url) as mesh:
        store = PlaitStore(mesh)
        await asyncio.to_thread(store.put, ("s",), "k", {"v": 1})
        item = await asyncio.to_thread(store.get, ("s",), "k")
        assert item is not None and item.value == {"v": 1}
        assert [i.key for i in await asyncio.to_thread(store.search, ("s",))] == ["k"]
        with pytest.raises(RuntimeError, match="synchronous calls are not allowed"):
            store.get(("s",), "k")
