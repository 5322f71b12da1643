"""The public surface: ``plait.__all__`` lists exactly the public names."""

from __future__ import annotations

import types

import plait


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name
        for name, value in vars(plait).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert set(plait.__all__) == public
    for name in plait.__all__:
        assert getattr(plait, name).__doc__, f"{name} has no docstring"


def test_earlier_public_names_still_name_the_same_classes() -> None:
    # Renamed in the public API; code written against the earlier names keeps working.
    assert plait.RunHost is plait.OwnerServices  # old-name alias
    assert plait.DecisionBoard is plait.DecisionAsker  # old-name alias
    assert plait.DecisionDesk is plait.DecisionAnswerer  # old-name alias
