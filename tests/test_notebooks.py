"""The tutorial notebooks: stored clean, and executed end to end by the test suite.

Each notebook checks its own numbers with ``assert`` cells (estimates beside the exact truth,
coverage of the intervals); the slow test runs every cell in a fresh kernel, fails on any error,
and then looks for the key lines each notebook must print.

The kernel is the interpreter running the tests (``sys.executable``), described by a kernelspec
written to a temporary directory. Only that directory is searched, so the run works on a fresh
``.venv`` with no kernelspec installed, and never picks up a ``python3`` kernel of another
environment that happens to be installed for the user.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import pytest

nbformat = pytest.importorskip(
    "nbformat", reason="install the notebooks extra: pip install 'ope-toolkit[notebooks]'"
)

NOTEBOOK_DIR: Final = Path(__file__).resolve().parents[1] / "notebooks"

#: notebook file -> lines its outputs must contain once executed
EXPECTED_OUTPUT: Final = {
    "01_evaluate_a_candidate.ipynb": (
        "ValidationError: 4 of 1,000 rows",
        "propensity_out_of_range: 3 (rows 3, 17, 400)",
        "best candidate by lower bound: 'greedy'",
        "paired 0.0011 vs as if independent 0.0018",
    ),
    "02_estimators_and_intervals.ipynb": (
        "betting: MissingBoundsError: interval method 'betting' needs the a priori reward range",
        "bernstein: MissingBoundsError: interval method 'bernstein' needs an a priori bound on "
        "the importance weights",
        "coverage checks passed",
    ),
}

#: seconds one cell may run before the execution is abandoned (a notebook takes well under a
#: minute; the margin absorbs a loaded shared CI machine)
CELL_TIMEOUT: Final = 300


def _read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK_DIR / name, as_version=4)


def _text(cell: nbformat.NotebookNode) -> str:
    """Everything a code cell printed or displayed, as text."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.data.get("text/plain", ""))
    return "".join(parts)


def test_every_notebook_is_tested() -> None:
    on_disk = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb"))
    assert on_disk == sorted(EXPECTED_OUTPUT)


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_notebook_is_stored_clean(name: str) -> None:
    nb = _read(name)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{name} has no code cells"
    dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not dirty, (
        f"{name}: code cells {dirty} were stored with outputs; clear them before committing "
        "(notebooks are kept without outputs for small, readable diffs)."
    )
    # the first cell is the title: a notebook says what it is about before running anything
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding one ``python3`` kernelspec that runs ``sys.executable``."""
    kernelspec = pytest.importorskip("ipykernel.kernelspec")
    root = tmp_path_factory.mktemp("kernels")
    kernelspec.write_kernel_spec(path=root / "python3")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_notebook_executes(name: str, kernel_dir: Path) -> None:
    nbclient = pytest.importorskip("nbclient")
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    specs = KernelSpecManager(kernel_dirs=[str(kernel_dir)], ensure_native_kernel=False)
    assert Path(specs.get_kernel_spec("python3").argv[0]) == Path(sys.executable)
    km = KernelManager(kernel_name="python3", kernel_spec_manager=specs)

    nb = _read(name)
    client = nbclient.NotebookClient(
        nb,
        km=km,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, if a cell fails

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    printed = "\n".join(_text(c) for c in code)
    missing = [line for line in EXPECTED_OUTPUT[name] if line not in printed]
    assert not missing, f"{name}: expected output not found: {missing}"
