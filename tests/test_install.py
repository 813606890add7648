"""ope installed as a library: a plain, non-editable install works away from the repository.

The fixture builds the wheel that ``pip install .`` would build (from a copy of the sources, so
the checkout gets no ``build/`` directory), creates a fresh virtual environment, and installs
the wheel into it without dependencies. The environment borrows the test interpreter's
site-packages for numpy, pandas and the rest through a ``.pth`` line; ``.pth`` files inside a
borrowed directory are not run, so the development checkout's editable install stays invisible
and ``import ope`` can only find the installed copy, which every test checks via
``ope.__file__``. Then ``ope demo``, ``ope.load_sample()`` and notebook 01 run from a directory
outside the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Final

import pytest

#: building the wheel, a venv, installing and running the demo take about 15 s together
pytestmark = pytest.mark.slow

REPO: Final = Path(__file__).resolve().parents[1]

#: seconds any one step may take before the test fails rather than hangs
STEP_TIMEOUT: Final = 300

#: what a source build needs besides ope/: the build configuration and the long description
SOURCES: Final = ("ope", "pyproject.toml", "README.md")

#: package data a non-editable install must ship (the bundled sample and the typing marker)
PACKAGE_DATA: Final = (
    "ope/py.typed",
    "ope/data/sample_recommendation.parquet",
    "ope/data/sample_recommendation.truth.json",
)


def _run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command, failing the test with its output (not just the exit code) on an error."""
    proc = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n"
            f"--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc.stdout


def _clean_env() -> dict[str, str]:
    """The environment without anything that would point Python back at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


class Installed:
    """Paths of the built wheel and of the fresh environment it is installed into."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.wheel = next((root / "wheel").glob("ope_toolkit-*.whl"))
        self.env = root / "env"
        self.python = self.env / "bin" / "python"
        self.script = self.env / "bin" / "ope"
        self.outside = root / "elsewhere"  # a working directory outside the repository

    def python_json(self, code: str) -> dict:
        return json.loads(_run([str(self.python), "-c", code], cwd=self.outside, env=_clean_env()))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("install")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    # the wheel `pip install .` builds, in an isolated build environment
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(root / "wheel"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
    )
    if build.returncode != 0:
        if "No matching distribution found for setuptools" in build.stderr:
            pytest.skip("no package index to provide the build backend (setuptools>=77)")
        raise AssertionError(f"pip wheel failed:\n{build.stdout}\n{build.stderr}")
    _run([sys.executable, "-m", "venv", "--without-pip", str(root / "env")], cwd=root)
    inst = Installed(root)
    purelib = _run(
        [str(inst.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        cwd=root,
        env=_clean_env(),
    ).strip()
    # the dependencies (numpy, pyarrow, ...) from the test interpreter, not ope itself
    (Path(purelib) / "_borrowed_dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8"
    )
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(inst.python),
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            str(inst.wheel),
        ],
        cwd=root,
    )
    inst.outside.mkdir()
    return inst


def _inside(path: str, directory: Path) -> bool:
    return Path(path).resolve().is_relative_to(directory.resolve())


def test_the_wheel_ships_the_package_data_and_the_command(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as whl:
        names = set(whl.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = whl.read(f"{dist_info}/METADATA").decode()
        entry_points = whl.read(f"{dist_info}/entry_points.txt").decode()
    missing = [name for name in PACKAGE_DATA if name not in names]
    assert not missing, f"not in the wheel: {missing}; wheel holds {sorted(names)}"
    assert "ope/__init__.py" in names and "ope/cli.py" in names
    # only the import package: no tests, notebooks, benchmarks or the repository's datasets/
    assert {n.split("/")[0] for n in names} == {"ope", dist_info}
    assert "Name: ope-toolkit\n" in metadata  # the distribution name (ope is taken on PyPI)
    for extra in ("dask", "plot", "fast"):
        assert f"Provides-Extra: {extra}\n" in metadata
    assert "ope = ope.cli:run" in entry_points


def test_ope_is_imported_from_the_installed_copy(installed: Installed) -> None:
    got = installed.python_json(
        "import json, importlib.metadata as md, ope\n"
        "s = ope.load_sample(columns=['reward'])\n"
        "print(json.dumps({'file': ope.__file__, 'sample': str(s.path), 'rows': s.table.num_rows,"
        " 'n_events': s.truth['n_events'], 'version': ope.__version__,"
        " 'dist': md.version('ope-toolkit')}))"
    )
    assert _inside(got["file"], installed.env), got["file"]
    assert not _inside(got["file"], REPO)
    assert _inside(got["sample"], installed.env) and got["sample"].endswith(
        "ope/data/sample_recommendation.parquet"
    )
    assert got["rows"] == got["n_events"] == 100_000
    assert got["version"] == got["dist"]


def test_ope_demo_runs_from_outside_the_repository(installed: Installed) -> None:
    out = _run([str(installed.script), "demo"], cwd=installed.outside, env=_clean_env())
    assert "bundled sample sample_recommendation.parquet" in out
    assert "exact value of the learned policy" in out
    # and it is this environment's command and package that ran
    where = installed.python_json(
        "import json, shutil, ope; print(json.dumps({'file': ope.__file__}))"
    )
    assert _inside(where["file"], installed.env)


def test_notebook_01_runs_against_the_installed_copy(installed: Installed) -> None:
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = installed.outside / "01_evaluate_a_candidate.ipynb"
    shutil.copy2(REPO / "notebooks" / notebook.name, notebook)
    runner = f"""
import json, sys
from pathlib import Path
import nbclient, nbformat
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

kernels = Path({str(installed.root / "kernels")!r})
write_kernel_spec(path=kernels / "python3")  # runs this environment's interpreter
specs = KernelSpecManager(kernel_dirs=[str(kernels)], ensure_native_kernel=False)
nb = nbformat.read({str(notebook)!r}, as_version=4)
nb.cells.append(nbformat.v4.new_code_cell("import ope; print('ope from', ope.__file__)"))
km = KernelManager(kernel_name="python3", kernel_spec_manager=specs)
nbclient.NotebookClient(nb, km=km, timeout={STEP_TIMEOUT}, kernel_name="python3",
                        resources={{"metadata": {{"path": {str(installed.outside)!r}}}}}).execute()
text = []
for cell in nb.cells:
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            text.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            text.append(out.data.get("text/plain", ""))
        elif out.output_type == "error":
            text.append("ERROR " + out.ename)
print(json.dumps({{"python": sys.executable, "text": "".join(text)}}))
"""
    got = installed.python_json(runner)
    assert "ERROR " not in got["text"]
    assert "best candidate by lower bound: 'greedy'" in got["text"]
    origin = got["text"].split("ope from ")[-1].strip()
    assert _inside(origin, installed.env), origin


def test_make_sample_writes_the_bundled_files(tmp_path: Path) -> None:
    """``datasets/make_sample.py`` regenerates the package data ``load_sample`` reads: the same
    schema, labels and ids exactly, floats within 1e-12 (the order of float sums may differ)."""
    pq = pytest.importorskip("pyarrow.parquet")
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    _run(
        [sys.executable, str(REPO / "datasets" / "make_sample.py"), "--out-dir", str(tmp_path)],
        cwd=tmp_path,
    )
    bundled = REPO / "ope" / "data"
    name = "sample_recommendation"
    fresh_table = pq.read_table(tmp_path / f"{name}.parquet")
    shipped_table = pq.read_table(bundled / f"{name}.parquet")
    assert fresh_table.schema.equals(shipped_table.schema, check_metadata=True)
    for column in shipped_table.column_names:  # floats up to the order of their sums
        got, want = fresh_table.column(column), shipped_table.column(column)
        if pa.types.is_list(want.type):
            if not pa.types.is_floating(want.type.value_type):
                assert got.equals(want), column
                continue
            assert pc.list_value_length(got).equals(pc.list_value_length(want)), column
            got, want = pc.list_flatten(got), pc.list_flatten(want)
        if pa.types.is_floating(want.type):
            np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=1e-12, err_msg=column)
        else:
            assert got.equals(want), column
    fresh = json.loads((tmp_path / f"{name}.truth.json").read_text(encoding="utf-8"))
    shipped = json.loads((bundled / f"{name}.truth.json").read_text(encoding="utf-8"))
    assert fresh["policies"].keys() == shipped["policies"].keys()
    for policy, value in shipped["policies"].items():  # exact sums, up to summation order
        assert fresh["policies"][policy] == pytest.approx(value, rel=1e-12)
    assert fresh["logging"] == pytest.approx(shipped["logging"], rel=1e-12)
    assert fresh["n_events"] == shipped["n_events"] == 100_000
