"""PlaitSaver: a LangGraph checkpointer over a plait mesh (memory, SQLite, Redis,
PostgreSQL).

The keys it writes are laid out in :mod:`plait.langgraph._keys`. Each checkpoint is one
entry (the checkpoint with its channel values, its metadata, its parent); each pending
write is one entry; each namespace of a thread has a *head* naming its newest
checkpoint, so the latest checkpoint is two reads, however long the thread (one, when
this saver already knows the head: it reads the head and the checkpoint it names in one
multi-get). A put writes the checkpoint and moves the head in one transaction; a
checkpoint's chunks are one multi-get; a listing with ``limit`` reads the namespace
backwards and stops there.

With ``fenced=True`` the head is also the thread's fence: each put is a compare-and-swap
on the head version this saver last read or wrote, so of two processes resuming one
thread from the same checkpoint, one writes and the other gets :class:`ThreadFenced`
naming the writer that moved the head. LangGraph itself has no such guard.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from plait.errors import ConfigError, ThreadFenced, VersionConflict
from plait.ids import new_id
from plait.langgraph._bridge import LoopBridge
from plait.langgraph._chunks import join, join_all, split
from plait.langgraph._keys import (
    DEFAULT_PREFIX,
    Layout,
    esc,
    newest_checkpoint,
    scan_all,
    scan_checkpoints,
    unesc,
)
from plait.mesh import Entry, Mesh

_PUT_ATTEMPTS = 50
"""How often an unfenced put retries a head that moved under it (another writer's
put landed between its read and its commit); each retry reads the head again."""


_HEADS_KEPT = 10_000
"""How many heads a saver remembers before it forgets them all (and reads them again)."""


class PlaitSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer keeping threads in a plait mesh.

    Async methods (``aget_tuple``, ``alist``, ``aput``, ``aput_writes``,
    ``adelete_thread``, ``adelete_for_runs``, ``acopy_thread``, ``aprune``) run on the
    loop the mesh was opened on; called from another loop they hop to it. The sync
    methods (for ``graph.invoke`` and ``graph.stream``) run the async ones on that loop
    and wait, so they must be called from another thread; :func:`open_saver` gives a
    saver whose mesh lives on a loop thread of its own, for wholly sync programs.

    Args:
        mesh: an open mesh.
        prefix: the key prefix of every key this saver writes.
        fenced: make each put a compare-and-swap on the thread's head (see the module).
        writer: this saver's name in fenced heads and errors (default: a fresh id).
        serde: LangGraph's serializer (default: its JsonPlusSerializer).
        loop: the loop the mesh was opened on (default: the running one).

    Values are limited by the mesh's ``max_value_bytes`` (8 MiB by default): a
    checkpoint whose channel values encode larger raises ``ValueTooLarge``.
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        prefix: str = DEFAULT_PREFIX,
        fenced: bool = False,
        writer: str | None = None,
        serde: SerializerProtocol | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise ConfigError(
                    "PlaitSaver needs the event loop its mesh was opened on: build it "
                    "inside that loop, pass loop=, or use plait.langgraph.open_saver(url)"
                ) from None
        if not prefix or "/" in prefix:
            raise ConfigError(
                f"a PlaitSaver prefix must be a non-empty name without '/', got {prefix!r}"
            )
        self.mesh = mesh
        self.layout = Layout(prefix)
        self.fenced = fenced
        self.writer = writer or f"saver-{new_id()}"
        self._bridge = LoopBridge(loop)
        self._heads: dict[tuple[str, str], tuple[int, str]] = {}
        """The version and checkpoint id of each head this saver last read or wrote:
        the expectation of its next put (fenced), or a guess that saves a read
        (unfenced: a wrong guess costs one conflict and a read)."""

    # -- reads --------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or its namespace's newest without an id."""
        return await self._bridge.call(self._get_tuple(config))

    async def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        thread = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            entry = await self.mesh.get(self.layout.checkpoint(thread, ns, checkpoint_id))
        else:
            entry = await self._latest(thread, ns)
        if entry is None:
            return None
        return await self._tuple(entry)

    async def _latest(self, thread: str, ns: str) -> Entry | None:
        head_key = self.layout.head(thread, ns)
        known = self._heads.get((thread, ns))
        if known is not None and known[1]:
            # The head this saver last saw, and the checkpoint it named, in one read.
            guess_key = self.layout.checkpoint(thread, ns, known[1])
            head, guess = await self.mesh.get_many([head_key, guess_key])
            if head is not None and guess is not None and head.value["id"] == known[1]:
                self._remember(thread, ns, head.version, known[1])
                return guess
        else:
            head = await self.mesh.get(head_key)
        self._remember(thread, ns, head.version if head else 0, head.value["id"] if head else "")
        if head is not None:
            entry = await self.mesh.get(self.layout.checkpoint(thread, ns, head.value["id"]))
            if entry is not None:
                return entry
        return await newest_checkpoint(self.mesh, self.layout, thread, ns)

    async def _tuple(
        self, entry: Entry, writes: list[dict[str, Any]] | None = None
    ) -> CheckpointTuple:
        """The tuple of a checkpoint entry; its pending writes are read unless given."""
        thread, ns, checkpoint_id = self.layout.parse_checkpoint(entry.key)
        value = entry.value
        if writes is None:
            writes = [
                w.value
                async for w in scan_all(self.mesh, self.layout.writes(thread, ns, checkpoint_id))
            ]
        writes.sort(key=lambda w: writes_sort_key(w["p"], w["t"], w["i"]))
        parent = value["p"]
        blob = self.layout.blob(thread, ns, checkpoint_id)
        checkpoint, metadata, *values = await join_all(
            self.mesh,
            [(blob + "c", value["c"]), (blob + "m", value["m"])]
            + [(blob + "w", w["v"]) for w in writes],
        )
        return CheckpointTuple(
            config=_config(thread, ns, checkpoint_id),
            checkpoint=self.serde.loads_typed(checkpoint),
            metadata=self.serde.loads_typed(metadata),
            parent_config=_config(thread, ns, parent) if parent else None,
            pending_writes=[
                (w["t"], w["c"], self.serde.loads_typed(typed))
                for w, typed in zip(writes, values, strict=True)
            ],
        )

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first: of a thread (and namespace, if ``config`` names
        one), or of every thread; metadata ``filter``, ``before`` and ``limit`` apply."""
        found = await self._bridge.call(self._list(config, filter, before, limit))
        for item in found:
            yield item

    async def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        thread: str | None = None
        ns: str | None = None
        wanted_id = None
        if config is not None:
            conf = config["configurable"]
            thread, ns = str(conf["thread_id"]), conf.get("checkpoint_ns")
            wanted_id = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before else None
        if limit is not None and limit <= 0:
            return []
        entries: AsyncIterator[Entry] | list[Entry]
        if thread is not None and ns is not None and wanted_id:
            entry = await self.mesh.get(self.layout.checkpoint(thread, ns, wanted_id))
            entries = [entry] if entry else []
        elif thread is not None and ns is not None:
            # One namespace: its keys in time order, read backwards, so a limit stops
            # the read (a filter may skip entries, so then the limit is ours alone).
            entries = scan_checkpoints(
                self.mesh,
                self.layout.checkpoints(thread, ns),
                before=self.layout.checkpoint(thread, ns, before_id) if before_id else None,
                limit=None if filter else limit,
            )
        else:
            # Several namespaces (or threads): newest first across them all.
            entries = [e async for e in scan_all(self.mesh, self.layout.checkpoints(thread))]
            entries.sort(key=lambda e: self.layout.parse_checkpoint(e.key)[2], reverse=True)
        chosen: list[Entry] = []
        async for entry in _each(entries):
            if limit is not None and len(chosen) >= limit:
                break
            where = self.layout.parse_checkpoint(entry.key)
            checkpoint_id = where[2]
            if wanted_id and checkpoint_id != wanted_id:
                continue
            if before_id and checkpoint_id >= before_id:
                continue
            if filter:
                blob = self.layout.blob(*where) + "m"
                metadata = self.serde.loads_typed(await join(self.mesh, blob, entry.value["m"]))
                if not all(metadata.get(k) == v for k, v in filter.items()):
                    continue
            chosen.append(entry)
        if thread is None or ns is None or len(chosen) < 2:
            return [await self._tuple(entry) for entry in chosen]
        writes = await self._writes_of(thread, ns, [e.key for e in chosen])
        return [await self._tuple(e, writes.get(e.key, [])) for e in chosen]

    async def _writes_of(
        self, thread: str, ns: str, keys: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        """The pending writes of checkpoints ``keys`` of one namespace (newest first), by
        checkpoint key: one backwards read of the key range their writes span."""
        ids = [self.layout.parse_checkpoint(key)[2] for key in keys]
        wanted = dict(zip(ids, keys, strict=True))
        prefix = self.layout.writes(thread, ns)
        newest = self.layout.writes(thread, ns, ids[0])
        oldest = self.layout.writes(thread, ns, ids[-1])
        found: dict[str, list[dict[str, Any]]] = {}
        # "0" sorts just past "/": start above every write of the newest checkpoint.
        async for entry in self.mesh.scan(prefix, reverse=True, after=newest[:-1] + "0"):
            if entry.key < oldest:
                break
            checkpoint_id = unesc(entry.key[len(prefix) :].split("/")[0])
            if checkpoint_id in wanted:
                found.setdefault(wanted[checkpoint_id], []).append(entry.value)
        return found

    # -- writes -------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Write a checkpoint and move its namespace's head to it, in one transaction.

        Raises:
            ThreadFenced: ``fenced`` is set and another writer moved the head since
                this saver read or wrote it; nothing was written.
        """
        return await self._bridge.call(self._put(config, checkpoint, metadata))

    async def _put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> RunnableConfig:
        conf = config["configurable"]
        thread = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = checkpoint["id"]
        full = get_checkpoint_metadata(config, metadata)
        run = full.get("run_id")
        run_id = str(run) if run is not None else None
        blob = self.layout.blob(thread, ns, checkpoint_id)
        stored_checkpoint, chunks = split(self.mesh, blob + "c", self.serde.dumps_typed(checkpoint))
        stored_metadata, more = split(self.mesh, blob + "m", self.serde.dumps_typed(full))
        chunks.update(more)
        value: dict[str, Any] = {
            "c": stored_checkpoint,
            "m": stored_metadata,
            "p": conf.get("checkpoint_id"),
            "r": run_id,
        }
        head_key = self.layout.head(thread, ns)
        for _ in range(_PUT_ATTEMPTS):
            tx = self.mesh.transact()
            for chunk_key, chunk in chunks.items():
                tx.put(chunk_key, chunk)
            tx.put(self.layout.checkpoint(thread, ns, checkpoint_id), value)
            if run_id is not None:
                tx.put(self.layout.run(run_id, thread, ns, checkpoint_id), 1)
            known = self._heads.get((thread, ns))
            if known is None:
                head = await self.mesh.get(head_key)
                known = (head.version, head.value["id"]) if head else (0, "")
            expected, head_id = known
            moves = self.fenced or head_id <= checkpoint_id
            if moves:
                tx.put(head_key, {"id": checkpoint_id, "w": self.writer}, expected)
            try:
                result = await tx.commit()
            except VersionConflict as exc:
                if exc.key != head_key:
                    raise
                self._heads.pop((thread, ns), None)
                if self.fenced:
                    raise await self._fenced(thread, ns, exc) from None
                continue
            if moves:
                version = result.entries[head_key].version
                self._remember(thread, ns, version, checkpoint_id)
            return _config(thread, ns, checkpoint_id)
        raise VersionConflict(head_key, 0, 0)  # pragma: no cover -- 50 lost races in a row

    def _remember(self, thread: str, ns: str, version: int, head_id: str) -> None:
        if len(self._heads) >= _HEADS_KEPT:
            self._heads.clear()
        self._heads[(thread, ns)] = (version, head_id)

    def _forget(self, thread: str) -> None:
        for known in [k for k in self._heads if k[0] == thread]:
            del self._heads[known]

    async def _fenced(self, thread: str, ns: str, exc: VersionConflict) -> ThreadFenced:
        head = await self.mesh.get(self.layout.head(thread, ns))
        writer = head.value.get("w", "?") if head else "(deleted)"
        return ThreadFenced(exc.key, exc.expected, exc.actual, thread, ns, writer, self.writer)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for a checkpoint, in one transaction.

        Idempotent per (task, index): a write already stored is kept, not replaced
        (an insert-if-absent); writes to LangGraph's special channels (errors,
        interrupts) replace.
        """
        await self._bridge.call(self._put_writes(config, writes, task_id, task_path))

    async def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        conf = config["configurable"]
        thread = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = conf["checkpoint_id"]
        blob = self.layout.blob(thread, ns, checkpoint_id) + "w"
        tx = self.mesh.transact()
        for idx, (channel, value) in enumerate(writes):
            i = WRITES_IDX_MAP.get(channel, idx)
            key = self.layout.write(thread, ns, checkpoint_id, task_id, i)
            typed = self.serde.dumps_typed(value)
            if i < 0:  # a special channel: replaced, its chunks fresh
                stored_value, chunks = split(self.mesh, blob, typed)
            else:  # kept if stored: its chunks named by its key, inserted alike
                stored_value, chunks = split(self.mesh, blob, typed, f"{esc(task_id)}.{i}")
            stored = {"t": task_id, "c": channel, "v": stored_value, "p": task_path, "i": i}
            for chunk_key, chunk in chunks.items():
                (tx.put if i < 0 else tx.insert)(chunk_key, chunk)
            (tx.put if i < 0 else tx.insert)(key, stored)
        if tx.ops:
            await tx.commit()

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and head of a thread: the checkpoints in one
        transaction (no reader finds the thread after it), then the rest by prefix."""
        await self._bridge.call(self._delete_thread(str(thread_id)))

    async def _delete_thread(self, thread: str) -> None:
        # The checkpoints (read for their run index keys) go in one transaction: from
        # then on no reader finds the thread. Its heads, writes and chunks, reachable
        # only through a checkpoint, then go by prefix, unread.
        tx = self.mesh.transact()
        async for entry in scan_all(self.mesh, self.layout.checkpoints(thread)):
            tx.delete(entry.key)
            if entry.value.get("r") is not None:
                _t, ns, checkpoint_id = self.layout.parse_checkpoint(entry.key)
                tx.delete(self.layout.run(entry.value["r"], thread, ns, checkpoint_id))
        if tx.ops:
            await tx.commit()
        self._forget(thread)
        for prefix in (
            self.layout.heads(thread),
            self.layout.writes(thread),
            self.layout.blobs(thread),
        ):
            await self.mesh.delete_prefix(prefix)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) that these runs wrote, in every
        thread and namespace; heads move to the newest checkpoint left."""
        await self._bridge.call(self._delete_for_runs([str(r) for r in run_ids]))

    async def _delete_for_runs(self, run_ids: list[str]) -> None:
        doomed: dict[tuple[str, str], set[str]] = {}
        tx = self.mesh.transact()
        for run_id in run_ids:
            async for entry in scan_all(self.mesh, self.layout.runs(run_id)):
                thread, ns, checkpoint_id = self.layout.parse_run(entry.key)
                doomed.setdefault((thread, ns), set()).add(checkpoint_id)
                tx.delete(entry.key)
        leftovers: list[str] = []
        for (thread, ns), ids in doomed.items():
            leftovers += await self._drop_checkpoints(tx, thread, ns, ids, keep_run_index=True)
        if tx.ops:
            await tx.commit()
        for thread, _ns in doomed:
            self._forget(thread)
        for prefix in leftovers:
            await self.mesh.delete_prefix(prefix)

    async def _drop_checkpoints(
        self, tx: Any, thread: str, ns: str, ids: set[str], *, keep_run_index: bool = False
    ) -> list[str]:
        """Add to ``tx`` the deletes of checkpoints ``ids`` of one namespace (and of
        their run index keys), and the move of its head to the newest one left.

        Returns:
            The prefixes of the doomed checkpoints' writes and chunks, for the caller to
            delete once ``tx`` committed (unreachable from then on).
        """
        doomed = sorted(ids)
        keys = [self.layout.checkpoint(thread, ns, checkpoint_id) for checkpoint_id in doomed]
        if keep_run_index:
            for key in keys:
                tx.delete(key)
        else:
            for checkpoint_id, entry in zip(doomed, await self.mesh.get_many(keys), strict=True):
                if entry is None:
                    continue
                tx.delete(entry.key)
                if entry.value.get("r") is not None:
                    tx.delete(self.layout.run(entry.value["r"], thread, ns, checkpoint_id))
        newest: str | None = None
        async for entry in scan_checkpoints(self.mesh, self.layout.checkpoints(thread, ns)):
            checkpoint_id = self.layout.parse_checkpoint(entry.key)[2]
            if checkpoint_id not in ids:
                newest = checkpoint_id
                break
        head_key = self.layout.head(thread, ns)
        head = await self.mesh.get(head_key)
        if newest is None:
            if head is not None:
                tx.delete(head_key, head.version)
        elif head is None or head.value["id"] != newest:
            tx.put(head_key, {"id": newest, "w": self.writer}, head.version if head else 0)
        return [
            prefix
            for checkpoint_id in doomed
            for prefix in (
                self.layout.writes(thread, ns, checkpoint_id),
                self.layout.blob(thread, ns, checkpoint_id),
            )
        ]

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and head of a thread to another, in one
        transaction (what the target held already under the same ids is replaced)."""
        await self._bridge.call(self._copy_thread(str(source_thread_id), str(target_thread_id)))

    async def _copy_thread(self, source: str, target: str) -> None:
        tx = self.mesh.transact()
        async for entry in scan_all(self.mesh, self.layout.checkpoints(source)):
            _t, ns, checkpoint_id = self.layout.parse_checkpoint(entry.key)
            tx.put(self.layout.checkpoint(target, ns, checkpoint_id), entry.value)
            if entry.value.get("r") is not None:
                tx.put(self.layout.run(entry.value["r"], target, ns, checkpoint_id), 1)
        for src, dst in (
            (self.layout.writes(source), self.layout.writes(target)),
            (self.layout.heads(source), self.layout.heads(target)),
            (self.layout.blobs(source), self.layout.blobs(target)),
        ):
            async for entry in scan_all(self.mesh, src):
                tx.put(dst + entry.key[len(src) :], entry.value)
        if tx.ops:
            await tx.commit()
        self._forget(target)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads: ``"keep_latest"`` keeps each namespace's newest checkpoint
        (and its writes); ``"delete"`` deletes the threads."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        await self._bridge.call(self._prune([str(t) for t in thread_ids], strategy))

    async def _prune(self, threads: list[str], strategy: str) -> None:
        for thread in threads:
            if strategy == "delete":
                await self._delete_thread(thread)
                continue
            by_ns: dict[str, set[str]] = {}
            async for entry in scan_all(self.mesh, self.layout.checkpoints(thread)):
                _t, ns, checkpoint_id = self.layout.parse_checkpoint(entry.key)
                by_ns.setdefault(ns, set()).add(checkpoint_id)
            tx = self.mesh.transact()
            leftovers: list[str] = []
            for ns, ids in by_ns.items():
                leftovers += await self._drop_checkpoints(tx, thread, ns, ids - {max(ids)})
            if tx.ops:
                await tx.commit()
            self._forget(thread)
            for prefix in leftovers:
                await self.mesh.delete_prefix(prefix)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The next channel version: a zero-padded counter and a random tiebreak."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(current.split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- sync ---------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Sync :meth:`aget_tuple` (from a thread other than the mesh's loop)."""
        return self._bridge.call_sync(self._get_tuple(config), "PlaitSaver.get_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Sync :meth:`alist`."""
        found = self._bridge.call_sync(self._list(config, filter, before, limit), "PlaitSaver.list")
        return iter(found)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Sync :meth:`aput`."""
        return self._bridge.call_sync(self._put(config, checkpoint, metadata), "PlaitSaver.put")

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Sync :meth:`aput_writes`."""
        self._bridge.call_sync(
            self._put_writes(config, writes, task_id, task_path), "PlaitSaver.put_writes"
        )

    def delete_thread(self, thread_id: str) -> None:
        """Sync :meth:`adelete_thread`."""
        self._bridge.call_sync(self._delete_thread(str(thread_id)), "PlaitSaver.delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Sync :meth:`adelete_for_runs`."""
        self._bridge.call_sync(
            self._delete_for_runs([str(r) for r in run_ids]), "PlaitSaver.delete_for_runs"
        )

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Sync :meth:`acopy_thread`."""
        self._bridge.call_sync(
            self._copy_thread(str(source_thread_id), str(target_thread_id)),
            "PlaitSaver.copy_thread",
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Sync :meth:`aprune`."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        self._bridge.call_sync(
            self._prune([str(t) for t in thread_ids], strategy), "PlaitSaver.prune"
        )


async def _each(entries: AsyncIterator[Entry] | list[Entry]) -> AsyncIterator[Entry]:
    """The entries of a list or of a lazy scan, alike."""
    if isinstance(entries, list):
        for entry in entries:
            yield entry
    else:
        async for entry in entries:
            yield entry


def _config(thread: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
