"""The HTML report: one self-contained file a person can read without the text output.

``write_report(path, evaluation=..., diagnostics=..., ...)`` writes it atomically (and refuses to
overwrite unless asked); ``render_report(...)`` returns the HTML. Plots are inline SVG drawn by
:mod:`ope.plots` (matplotlib, the ``plot`` extra), there is no JavaScript and no external
resource (no CSS, font, image or script from the network), and the print stylesheet keeps it
readable on paper. The same inputs give byte-identical HTML.

The modules: :mod:`ope.report.views` (the rows shown, read from the result objects),
:mod:`ope.report.svg` (a figure as deterministic inline SVG), :mod:`ope.report.html` (the
page). The report renders results and computes no statistics of its own.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "write_report",
    "render_report",
    "check_report_destination",
    "REPORT_SECTIONS",
    "MONITOR_SECTIONS",
]

# public name -> the submodule defining it, imported on first use: ``ope.plots`` imports
# ``ope.report.views``, which must not pull the page (and ``ope.plots``) back in
_LAZY = {name: "ope.report.html" for name in __all__}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ope.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
