"""Decision ids are injective in the node key, visit and extra, and safe as mesh keys."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from plait.runs.mesh_ports import decision_id

SAFE = re.compile(r"[A-Za-z0-9_.~-]+")
RUN = "grun_4c77a0"

keys = st.text(min_size=1, max_size=12)
parts = st.tuples(keys, st.integers(min_value=1, max_value=10**6), st.text(max_size=8))


def test_an_instance_and_a_node_named_like_it_get_different_ids() -> None:
    assert decision_id(RUN, "ask", "fetch[0]", 1) != decision_id(RUN, "ask", "fetch_0", 1)
    assert decision_id(RUN, "ask", "fetch_0", 1) == "ask.grun_4c77a0.fetch_0.1"


@given(parts, parts)
def test_distinct_inputs_give_distinct_ids(
    a: tuple[str, int, str], b: tuple[str, int, str]
) -> None:
    if a != b:
        assert decision_id(RUN, "approve", *a) != decision_id(RUN, "approve", *b)


@given(parts)
def test_ids_stay_within_the_safe_charset(a: tuple[str, int, str]) -> None:
    assert SAFE.fullmatch(decision_id(RUN, "approve", *a))
