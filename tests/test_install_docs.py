"""Issue 16: the README's test command installs the CPU torch explicitly, and .ci/run runs exactly those lines."""

from __future__ import annotations

from pathlib import Path

from tests.test_docs_commands import fenced_blocks, shell_lines

ROOT = Path(__file__).resolve().parents[1]


def _readme_test_block() -> list[str]:
    blocks = [shell_lines(b) for b in fenced_blocks((ROOT / "README.md").read_text(encoding="utf-8"), ("bash",))]
    found = [b for b in blocks if any("python -m pytest" in line for line in b)]
    assert len(found) == 1, "README.md should have one bash block that runs the tests"
    return found[0]


def test_readme_installs_the_cpu_torch_before_the_project() -> None:
    lines = _readme_test_block()
    torch_line = next(i for i, line in enumerate(lines) if "torch==" in line)
    assert "+cpu" in lines[torch_line] and "download.pytorch.org/whl/cpu" in lines[torch_line]
    assert torch_line < next(i for i, line in enumerate(lines) if ".[test,calibrate]" in line)


def test_ci_runs_the_readme_lines_verbatim_and_in_order() -> None:
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.strip() and not line.strip().startswith("#")]
    readme = _readme_test_block()
    start = ci.index(readme[0])
    assert ci[start:start + len(readme)] == readme
