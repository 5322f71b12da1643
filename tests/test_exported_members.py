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
