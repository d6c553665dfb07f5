"""The example notebooks: committed without outputs, reproducible by their builder, and they run."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ("01_collectives.ipynb", "02_planner.ipynb", "03_calibration.ipynb", "04_diagnose.ipynb")


def _builder():
    spec = importlib.util.spec_from_file_location("build_notebooks", NOTEBOOK_DIR / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name):
    nb = json.loads((NOTEBOOK_DIR / name).read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, f"{name} has no code cells"
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None, f"{name}: a cell was committed with output"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


def test_builder_reproduces_the_committed_notebooks():
    builder = _builder()
    assert set(builder.NOTEBOOKS) == set(NAMES)
    for name, cells in builder.NOTEBOOKS.items():
        assert (NOTEBOOK_DIR / name).read_text(encoding="utf-8") == builder.render(cells), (
            f"{name} differs from notebooks/build_notebooks.py; run `python notebooks/build_notebooks.py`"
        )


def test_notebooks_use_the_python_api_not_the_cli():
    for name in NAMES:
        text = (NOTEBOOK_DIR / name).read_text(encoding="utf-8")
        assert "subprocess" not in text and "!commmodel" not in text and "CliRunner" not in text


FIGURES = {"01_collectives.ipynb": 3, "02_planner.ipynb": 5, "03_calibration.ipynb": 1, "04_diagnose.ipynb": 1}
"""Figures each notebook draws: 01 two sweeps and the scaling plot; 02 breakdown, what-if, scaling and
two timelines; 03 the calibration figure; 04 the step split."""


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name, monkeypatch, capsys):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MPLBACKEND", "Agg")  # the kernel draws without a display
    start = time.perf_counter()
    nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{name}: {errors[0]['ename']}: {errors[0]['evalue']}"
    pictures = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {}))
    assert pictures == FIGURES[name], f"{name}: {pictures} figures rendered, expected {FIGURES[name]}"
    with capsys.disabled():  # the brief's target is < 60 s for all three: a figure to read, not a pass/fail check
        print(f"\n{name} executed in {time.perf_counter() - start:.1f} s")
