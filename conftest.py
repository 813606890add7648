"""pytest configuration shared by tests/ and the doctests of ope/ (pytest loads it for both).

Warnings are errors in the test suite (``filterwarnings`` in pyproject.toml). A docstring example
runs on a handful of rows, so ope's warnings about the data (a small sample, thin overlap) are
part of what it shows a user, and doctest has no way to expect a warning: in the doctests, and
only there, those two are ignored. Any other warning in an example is still an error.
"""

from __future__ import annotations

import os
import tempfile

import pytest

# pandas fits the columns it shows to the terminal (``COLUMNS``): the examples' printed tables
# assume 80 columns, whatever the terminal the suite runs in
os.environ["COLUMNS"] = "80"

_EXAMPLE_DATA_WARNINGS = (
    "ignore::ope.exceptions.SmallSampleWarning",
    "ignore::ope.exceptions.OverlapWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if type(item).__name__ == "DoctestItem":
            for spec in _EXAMPLE_DATA_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture(autouse=True)
def _examples_write_in_tmp_path(request: pytest.FixtureRequest) -> object:
    """A docstring example that makes a folder with ``tempfile.mkdtemp()`` makes it under the
    test's own ``tmp_path`` (which pytest cleans up), not in the machine's temporary folder."""
    if type(request.node).__name__ != "DoctestItem":
        yield None
        return
    tmp = request.getfixturevalue("tmp_path")
    before = tempfile.tempdir
    tempfile.tempdir = str(tmp)
    try:
        yield None
    finally:
        tempfile.tempdir = before
