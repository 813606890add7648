"""pytest configuration shared by tests/ and the doctests of ope/ (pytest loads it for both).

Warnings are errors in the test suite (``filterwarnings`` in pyproject.toml). A docstring example
runs on a handful of rows, so ope's warnings about the data (a small sample, thin overlap) are
part of what it shows a user, and doctest has no way to expect a warning: in the doctests, and
only there, those two are ignored. Any other warning in an example is still an error.
"""

from __future__ import annotations

import pytest

_EXAMPLE_DATA_WARNINGS = (
    "ignore::ope.exceptions.SmallSampleWarning",
    "ignore::ope.exceptions.OverlapWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if type(item).__name__ == "DoctestItem":
            for spec in _EXAMPLE_DATA_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))
