"""The public surface: ``plait.__all__`` lists exactly the public names."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import plait


def test_all_lists_exactly_the_public_names() -> None:
    # The names are imported on first use, so dir() (not vars()) is the surface.
    public = {
        name
        for name in dir(plait)
        if not name.startswith("_")
        and not isinstance(getattr(plait, name), types.ModuleType)
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


def test_a_name_not_exported_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        plait.no_such_name  # noqa: B018


def test_importing_plait_imports_no_layer() -> None:
    # `import plait` is what every `plait.x` import (the CLI's first) pays for.
    code = "import sys, plait; print(sorted(m for m in sys.modules if m.startswith('plait.')))"
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert shown.strip() == "[]"
