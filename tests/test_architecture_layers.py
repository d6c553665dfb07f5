"""The layering rules of issue 10, read from the source with ``ast`` (imports anywhere in a module count,
lazy ones inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "commmodel"
MAX_FUNCTION_LINES = 80
"""STYLE.md / issue 10: no function longer than 80 lines."""
CHECKED_LENGTH_DIRS = ("",)  # the whole package: no function in commmodel/ is longer than MAX_FUNCTION_LINES


def _modules(folder: str = "") -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every ``commmodel...`` module a file imports (``from commmodel.cli import plot`` counts as cli.plot)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("commmodel"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("commmodel"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def test_nothing_outside_cli_imports_the_cli() -> None:
    offenders = {_name(p): sorted(i for i in _imports(p) if i.startswith("commmodel.cli"))
                 for p in _modules() if "cli" not in p.relative_to(PACKAGE).parts[:1]}
    offenders.pop("commmodel.__main__", None)  # the entry point runs cli.app.main
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("path", [p for p in _modules("cli") if p.stem not in ("app", "__init__")], ids=lambda p: p.stem)
def test_cli_commands_import_only_the_shared_cli_modules(path: Path) -> None:
    # leaf helpers every command may use: options and output (common, stdout), the step commands' stack-knob flags,
    # plot output, CSV wording
    shared = {"commmodel.cli.common", "commmodel.cli.plot_common", "commmodel.cli.stdout", "commmodel.cli.csv_words",
              "commmodel.cli.grid", "commmodel.cli.stack_flags"}
    cli_imports = {i for i in _imports(path) if i.startswith("commmodel.cli.")}
    stray = {i for i in cli_imports if not any(i == s or i.startswith(s + ".") for s in shared)}
    assert stray == set(), f"{path.name} imports other cli modules: {sorted(stray)} (register in cli/app.py)"
    if path.stem in ("plot_common", "common", "stdout", "csv_words", "grid", "stack_flags"):  # the shared helpers form no cycle
        assert {i for i in cli_imports if not i.startswith(("commmodel.cli.common", "commmodel.cli.stdout"))} == set()


@pytest.mark.parametrize("path", _modules("io"), ids=lambda p: p.stem)
def test_io_stays_a_low_layer(path: Path) -> None:
    upward = ("commmodel.step", "commmodel.planner", "commmodel.collectives", "commmodel.validation",
              "commmodel.cli", "commmodel.query", "commmodel.plots")
    assert sorted(i for i in _imports(path) if i.startswith(upward)) == []


def test_no_long_functions() -> None:
    long = []
    for folder in CHECKED_LENGTH_DIRS:
        for path in _modules(folder):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{_name(path)}.{node.name}: {lines} lines")
    assert long == []


SHELLS = ("plots", "query", "evidence")
STEP_INTERNALS = ("commmodel.step.comm", "commmodel.step.grouping", "commmodel.step.overlap", "commmodel.step.evaluate",
                  "commmodel.step.terms", "commmodel.step.buckets", "commmodel.step.context_parallel")


@pytest.mark.parametrize("path", [p for folder in SHELLS for p in _modules(folder)], ids=lambda p: _name(p))
def test_shells_use_the_step_models_public_results(path: Path) -> None:
    """plots/, query/ and evidence/ ask the step model (commmodel.step, step.estimate, step.gradients, step.layout,
    step.placement) instead of rebuilding its collectives from its internals."""
    inner = sorted(i for i in _imports(path) if i.startswith(STEP_INTERNALS))
    assert inner == [], f"{path.name} reaches into the step model's internals: {inner}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: _name(p))
def test_no_import_guards_around_our_own_modules(path: Path) -> None:
    """`try: from commmodel... except ImportError` hides a broken import behind a silent fallback."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    guarded = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers):
            guarded += [n.module for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("commmodel")]
    assert guarded == []
