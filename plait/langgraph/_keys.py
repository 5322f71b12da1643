"""Where a LangGraph thread lives in the mesh: the key layout, and the reads that walk it.

Every key starts with a prefix (``lg/`` by default) and escapes each name it holds, so a
thread ``a`` never shares a key prefix with a thread ``a/b``::

    PREFIX/cp/THREAD/NS/CHECKPOINT           a checkpoint, its metadata and parent
    PREFIX/wr/THREAD/NS/CHECKPOINT/TASK/IDX  one pending write of a task
    PREFIX/head/THREAD/NS                    the newest checkpoint id of a namespace
    PREFIX/run/RUN/THREAD/NS/CHECKPOINT      index: the checkpoints a run wrote
    PREFIX/bl/THREAD/NS/CHECKPOINT/...       chunks of values too large for one entry

Names are percent-escaped (``/`` and ``%`` at least), so ``/`` only ever separates.

Checkpoint ids are uuid6, so within a namespace key order is time order: the reads that
walk a thread (:func:`scan_checkpoints`, :func:`newest_checkpoint`) scan it backwards and
stop at the first entry, or at ``limit``, reading no more pages than that needs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import quote, unquote

from plait.mesh import Entry, Mesh

DEFAULT_PREFIX = "lg"
"""The key prefix a saver and a store use unless given another."""


def esc(name: str) -> str:
    """``name`` escaped for one key segment: it never contains ``/``."""
    if not isinstance(name, str):
        raise TypeError(f"a thread id, namespace or key must be a str, got {type(name).__name__}")
    return quote(name, safe="")


def unesc(segment: str) -> str:
    """The name :func:`esc` escaped into ``segment``."""
    return unquote(segment)


@dataclass(frozen=True, slots=True)
class Layout:
    """The keys of one saver's checkpoints under ``prefix``."""

    prefix: str = DEFAULT_PREFIX

    def checkpoint(self, thread: str, ns: str, checkpoint_id: str) -> str:
        """The key of one checkpoint."""
        return f"{self.prefix}/cp/{esc(thread)}/{esc(ns)}/{esc(checkpoint_id)}"

    def checkpoints(self, thread: str | None = None, ns: str | None = None) -> str:
        """The prefix of every checkpoint, of a thread's, or of one namespace's."""
        if thread is None:
            return f"{self.prefix}/cp/"
        if ns is None:
            return f"{self.prefix}/cp/{esc(thread)}/"
        return f"{self.prefix}/cp/{esc(thread)}/{esc(ns)}/"

    def write(self, thread: str, ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
        """The key of one pending write (``idx`` may be negative: a special channel)."""
        return f"{self.writes(thread, ns, checkpoint_id)}{esc(task_id)}/{idx:+011d}"

    def writes(self, thread: str, ns: str | None = None, checkpoint_id: str | None = None) -> str:
        """The prefix of a checkpoint's writes, a namespace's, or a thread's."""
        if ns is None:
            return f"{self.prefix}/wr/{esc(thread)}/"
        if checkpoint_id is None:
            return f"{self.prefix}/wr/{esc(thread)}/{esc(ns)}/"
        return f"{self.prefix}/wr/{esc(thread)}/{esc(ns)}/{esc(checkpoint_id)}/"

    def blob(self, thread: str, ns: str, checkpoint_id: str) -> str:
        """The prefix of a checkpoint's chunks (see :mod:`plait.langgraph._chunks`)."""
        return f"{self.prefix}/bl/{esc(thread)}/{esc(ns)}/{esc(checkpoint_id)}/"

    def blobs(self, thread: str) -> str:
        """The prefix of a thread's chunks."""
        return f"{self.prefix}/bl/{esc(thread)}/"

    def head(self, thread: str, ns: str) -> str:
        """The key naming a namespace's newest checkpoint."""
        return f"{self.prefix}/head/{esc(thread)}/{esc(ns)}"

    def heads(self, thread: str) -> str:
        """The prefix of a thread's heads."""
        return f"{self.prefix}/head/{esc(thread)}/"

    def run(self, run_id: str, thread: str, ns: str, checkpoint_id: str) -> str:
        """The index key recording that ``run_id`` wrote a checkpoint."""
        return f"{self.prefix}/run/{esc(run_id)}/{esc(thread)}/{esc(ns)}/{esc(checkpoint_id)}"

    def runs(self, run_id: str) -> str:
        """The prefix of a run's index keys."""
        return f"{self.prefix}/run/{esc(run_id)}/"

    def parse_checkpoint(self, key: str) -> tuple[str, str, str]:
        """(thread, namespace, checkpoint id) of a checkpoint key."""
        thread, ns, checkpoint_id = key[len(self.prefix) + 4 :].split("/")
        return unesc(thread), unesc(ns), unesc(checkpoint_id)

    def parse_run(self, key: str) -> tuple[str, str, str]:
        """(thread, namespace, checkpoint id) of a run index key."""
        _run, thread, ns, checkpoint_id = key[len(self.prefix) + 5 :].split("/")
        return unesc(thread), unesc(ns), unesc(checkpoint_id)


def scan_checkpoints(
    mesh: Mesh, prefix: str, *, before: str | None = None, limit: int | None = None
) -> AsyncIterator[Entry]:
    """The checkpoint entries under ``prefix``, newest first within each namespace, read
    lazily (a caller that stops early reads no further pages).

    Args:
        before: only keys below this checkpoint key.
        limit: at most this many entries.
    """
    return mesh.scan(prefix, reverse=True, after=before, limit=limit)


async def newest_checkpoint(mesh: Mesh, layout: Layout, thread: str, ns: str) -> Entry | None:
    """A namespace's newest checkpoint found without its head (a head that is missing,
    or names a deleted checkpoint): the last key of the namespace, one reverse read."""
    async for entry in mesh.scan(layout.checkpoints(thread, ns), reverse=True, limit=1):
        return entry
    return None


async def scan_all(mesh: Mesh, prefix: str) -> AsyncIterator[Entry]:
    """Every entry under ``prefix``, in key order (writes, heads, index keys)."""
    async for entry in mesh.scan(prefix):
        yield entry
