"""The trust rule: taint follows what a node reads, not the whole run."""

from __future__ import annotations

from plait.tools import mark_tainted, runs_trusted, tainted_after


def test_taint_propagates_along_a_chain_and_spares_clean_branches() -> None:
    tainted: frozenset[str] = frozenset()

    # fetch calls an external tool: it ran trusted, but its output is tainted.
    assert runs_trusted(["input"], tainted)
    tainted = mark_tainted("fetch", ["input"], True, tainted)
    assert tainted == {"fetch"}

    # A reads fetch: runs untrusted, and its output is tainted with no external call.
    assert not runs_trusted(["fetch"], tainted)
    assert tainted_after("A", ["fetch"], False, tainted)
    tainted = mark_tainted("A", ["fetch"], False, tainted)

    # B reads only A: two hops from the page, still untrusted and tainted.
    assert not runs_trusted(["A"], tainted)
    tainted = mark_tainted("B", ["A"], False, tainted)
    assert tainted == {"fetch", "A", "B"}

    # C reads only clean state in the same run: fully trusted, clean output.
    assert runs_trusted(["input", "plan"], tainted)
    tainted = mark_tainted("C", ["input", "plan"], False, tainted)
    assert "C" not in tainted


def test_a_rerun_on_clean_state_produces_a_clean_output() -> None:
    tainted = mark_tainted("draft", ["fetch"], False, {"fetch"})
    assert "draft" in tainted
    tainted = mark_tainted("draft", ["input", "verify"], False, tainted - {"fetch"})
    assert "draft" not in tainted


def test_a_loop_back_node_reading_its_tainted_self_stays_tainted() -> None:
    assert tainted_after("draft", ["draft"], False, {"draft"})
    assert not tainted_after("draft", ["input"], False, {"draft"})


def test_tainted_input_and_outside_content_seen_mid_call() -> None:
    assert not runs_trusted(["input"], {"input"})
    assert not runs_trusted([], set(), seen_external=True)
    assert runs_trusted([], set())


def test_mark_tainted_does_not_mutate_its_argument() -> None:
    before = {"x"}
    mark_tainted("y", ["x"], False, before)
    assert before == {"x"}
