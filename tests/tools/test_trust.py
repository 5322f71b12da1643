"""The trust rule: taint follows what a node reads, not the whole run."""

from __future__ import annotations

from plait.tools import runs_trusted, tainted_after


def test_taint_propagates_along_a_chain_and_spares_clean_branches() -> None:
    # fetch calls an external tool: it ran trusted, but its output is tainted.
    assert runs_trusted(["input"], set())
    assert tainted_after("fetch", ["input"], True, set())

    # A reads fetch: runs untrusted, and its output is tainted with no external call.
    assert not runs_trusted(["fetch"], {"fetch"})
    assert tainted_after("A", ["fetch"], False, {"fetch"})

    # B reads only A: two hops from the page, still untrusted and tainted.
    assert not runs_trusted(["A"], {"fetch", "A"})
    assert tainted_after("B", ["A"], False, {"fetch", "A"})

    # C reads only clean state in the same run: fully trusted, clean output.
    assert runs_trusted(["input", "plan"], {"fetch", "A", "B"})
    assert not tainted_after("C", ["input", "plan"], False, {"fetch", "A", "B"})


def test_a_rerun_on_clean_state_produces_a_clean_output() -> None:
    assert tainted_after("draft", ["fetch"], False, {"fetch"})
    assert not tainted_after("draft", ["input", "verify"], False, {"draft"})


def test_a_loop_back_node_reading_its_tainted_self_stays_tainted() -> None:
    assert tainted_after("draft", ["draft"], False, {"draft"})
    assert not tainted_after("draft", ["input"], False, {"draft"})


def test_tainted_input_and_outside_content_seen_mid_call() -> None:
    assert not runs_trusted(["input"], {"input"})
    assert not runs_trusted([], set(), seen_external=True)
    assert runs_trusted([], set())
