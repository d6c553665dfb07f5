"""The README's commands run as written: every `commmodel ...` line of its fenced bash blocks exits 0.

Each command goes through typer's CliRunner in its own temporary folder holding every file the README's
commands read: the profile YAML the README shows, a measured CSV and an nccl-tests log made from the test
fixtures, and what the README's earlier lines write from them (`node.yaml`, `nccl.csv`), so each command runs
alone and in any order; the file a command writes with `--out` is removed first. Lines that need a GPU, a cluster or a package install
are skipped by name, with the reason, in ``SKIPPED``; any other new kind of line fails
``test_every_readme_line_is_run_or_skipped_by_name`` until it is run or listed there.

The `commmodel ...` lines of docs/*.md run the same way (marked ``slow``: about 40 commands). A documented
command followed by an ``error: ...`` line must exit 1 and print that error (up to a trailing "...").
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIX = Path(__file__).parent / "fixtures" / "nccl_tests"

# Lines of README.md's bash blocks that are not run here, each with the reason.
SKIPPED = {
    "python3 -m venv .venv && . .venv/bin/activate":
        "makes the virtual environment the install lines run in (.ci/run runs it on a fresh clone)",
    'pip install . && commmodel query "8 GPUs, 1B params, IB NDR"':
        "installs the package (the suite runs on the installed package; the query itself is run below)",
    'pip install ".[test,calibrate]" && python -m pytest -q':
        "installs the package and runs this very suite",
    'pip install "torch==2.13.0+cpu" --extra-index-url https://download.pytorch.org/whl/cpu':
        "installs the CPU torch (tests/test_install_docs.py checks .ci/run runs the same lines)",
    "torchrun --standalone --nproc_per_node 8 -m commmodel calibrate run --out node.csv --system dgx-h100":
        "needs 8 GPUs with NCCL; node.csv is made from a published 8x H100 table instead",
}
# The query of the install line above, run on its own.
EXTRA = ['commmodel query "8 GPUs, 1B params, IB NDR"']


def fenced_blocks(text: str, languages: tuple[str, ...]) -> list[str]:
    """Bodies of the ```LANG fenced blocks of a Markdown text."""
    return [m.group(2) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M) if m.group(1) in languages]


def shell_lines(block: str) -> list[str]:
    """Command lines of a bash block: continuations joined, comments and blank lines dropped."""
    lines, current = [], ""
    for raw in block.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        current += line.strip()
        command = re.sub(r"\s+#.*$", "", current).strip() if not current.startswith("#") else ""
        if command:
            lines.append(re.sub(r"\s+", " ", command))
        current = ""
    return lines


README_TEXT = README.read_text(encoding="utf-8")
LINES = [line for block in fenced_blocks(README_TEXT, ("bash", "sh", "console")) for line in shell_lines(block)]
COMMANDS = [line for line in LINES if line.startswith("commmodel ")] + EXTRA


def readme_profile_yaml() -> str:
    """The example system YAML the README shows under 'Adding a hardware profile'."""
    found = [b for b in fenced_blocks(README_TEXT, ("yaml",)) if b.startswith("# my-h100-roce.yaml")]
    assert len(found) == 1, "README.md should show exactly one '# my-h100-roce.yaml' block"
    return found[0]


def invoke_ok(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{args}\n{result.output}"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A folder with the files the README's commands read, made as a user would have them."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "my-h100-roce.yaml").write_text(readme_profile_yaml(), encoding="utf-8")
    # what `calibrate run` on one DGX H100-like node would leave: a published 8x H100 all_reduce sweep.
    invoke_ok(["calibrate", "import", str(FIX / "aws-p5-1n_all_reduce_perf.txt"), "--out", str(folder / "node.csv"),
               "--system", "dgx-h100", "--nodes", "1"])
    invoke_ok(["calibrate", "fit", str(folder / "node.csv"), "--out", str(folder / "node.yaml")])
    # nccl-tests output with its '# Rank ... on HOST' lines (2x p4de, 16 ranks).
    shutil.copy(FIX / "aws-p4de-2n-efa_all_reduce.txt", folder / "all_reduce_perf.txt")
    invoke_ok(["calibrate", "import", str(folder / "all_reduce_perf.txt"), "--out", str(folder / "nccl.csv")])
    # docs/*.md: the same p4de log under another name, an nccl-tests -J report, the README profile as my.yaml,
    # a 2-rank sweep (the published 2x RTX 2080 Ti table stands in for the gloo run) and a small GEMM benchmark.
    shutil.copy(FIX / "aws-p4de-2n-efa_all_reduce.txt", folder / "all_reduce_perf.log")
    shutil.copy(FIX / "mle-a100-1n_all_reduce_perf.json", folder / "report.json")
    (folder / "my.yaml").write_text(readme_profile_yaml().replace("name: my-h100-roce", "name: my"), encoding="utf-8")
    invoke_ok(["calibrate", "import", str(FIX / "autodl-2080ti_5_collectives.txt"), "--out", str(folder / "cpu.csv")])
    # docs/profiles.md's `profiles from-nccl`: an NCCL topology dump and an NCCL_DEBUG=INFO log.
    shutil.copy(FIX.parent / "nccl" / "h100-ndr-topo-dump.xml", folder / "topo.xml")
    shutil.copy(FIX.parent / "nccl" / "h100-2node-info.log", folder / "nccl-info.log")
    return folder


def test_readme_shows_the_commands_it_promises():
    assert len(COMMANDS) >= 20
    for sub in ("profiles", "collective", "sweep", "estimate", "plan", "compare", "query", "validate", "plot",
                "calibrate"):
        assert any(c.split()[1] == sub for c in COMMANDS), f"README has no `commmodel {sub}` example"


def test_every_readme_line_is_run_or_skipped_by_name():
    unaccounted = [line for line in LINES if not line.startswith("commmodel ") and line not in SKIPPED]
    assert unaccounted == []
    assert set(SKIPPED) <= set(LINES), "SKIPPED names a line README.md no longer has"


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_exits_0(command, prepared, tmp_path, monkeypatch):
    workdir = tmp_path / "work"
    shutil.copytree(prepared, workdir)
    args = shlex.split(command)[1:]
    if "--out" in args:
        (workdir / args[args.index("--out") + 1]).unlink(missing_ok=True)
    monkeypatch.chdir(workdir)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{command}\n{result.output}\n{result.exception!r}"
    assert "Traceback" not in result.output


# Lines of docs/*.md that are not run here, each with the reason.
DOCS_SKIPPED = {
    "python3 -m venv .venv && . .venv/bin/activate":
        "makes the virtual environment the install lines run in (.ci/run runs it on a fresh clone)",
    "commmodel calibrate compute --out gemm.csv --hidden 8192 --tp 8 --seq-len 4096 --micro-batch 1":
        "~10 s of fp32 GEMMs on a CPU; the same command with --hidden 256 makes gemm.csv for the next line",
}


def docs_commands() -> list[tuple[str, str, str]]:
    """(file, command, documented error or '') for every `commmodel ...` line of docs/*.md's fenced blocks."""
    found = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            if m.group(1) in ("python", "yaml"):
                continue
            raw = m.group(2).splitlines()
            i = 0
            while i < len(raw):
                line = raw[i].strip()
                while line.endswith("\\") and i + 1 < len(raw):
                    i += 1
                    line = line[:-1].strip() + " " + raw[i].strip()
                i += 1
                line = line[2:] if line.startswith("$ ") else line
                if not line.startswith("commmodel "):
                    continue
                command = re.sub(r"\s+\[[^\]]*\]", "", re.sub(r"\s+#.*$", "", line)).strip()  # drop [--optional]
                error = []
                if i < len(raw) and raw[i].startswith("error:"):
                    while i < len(raw) and raw[i].strip() and not raw[i].startswith(("$", "commmodel")):
                        error.append(raw[i].strip())
                        i += 1
                if command not in DOCS_SKIPPED:
                    found.append((path.name, command, " ".join(error)))
    return found


DOCS = docs_commands()


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.slow
@pytest.mark.parametrize("doc, command, error", DOCS, ids=[f"{d}: {c}" for d, c, _ in DOCS])
def test_docs_command_runs_as_documented(doc, command, error, prepared, tmp_path, monkeypatch):
    workdir = tmp_path / "work"
    shutil.copytree(prepared, workdir)
    if "--compute gemm.csv" in command:
        gemm = workdir / "gemm.csv"
        invoke_ok(["calibrate", "compute", "--out", str(gemm), "--hidden", "256", "--tp", "8",
                   "--seq-len", "512", "--iters", "2", "--dtype", "bf16"])
        # the documented run is on the GPU of node.csv: a CPU's timings are refused against it, so the rows carry
        # the device name a GPU run writes
        gemm.write_text(gemm.read_text().replace(",cpu,", ",NVIDIA H100 80GB HBM3,"))
    args = shlex.split(command)[1:]
    if "--out" in args:
        (workdir / args[args.index("--out") + 1]).unlink(missing_ok=True)
    monkeypatch.chdir(workdir)
    result = CliRunner().invoke(app, args)
    assert "Traceback" not in result.output
    if not error:
        assert result.exit_code == 0, f"{doc}: {command}\n{result.output}\n{result.exception!r}"
        return
    assert result.exit_code == 1, f"{doc}: {command} should fail as documented\n{result.output}"
    documented = squash(error).removesuffix("...").rstrip()
    assert squash(result.output).startswith(documented), f"{doc} documents:\n{documented}\nthe command prints:\n{result.output}"


def test_docs_have_commands_to_run():
    assert len(DOCS) >= 30
    assert sum(1 for _, _, error in DOCS if error) >= 2


def test_profiles_doc_link_table_matches_the_catalogue():
    """docs/profiles.md's link snapshot: one row per catalogue link, with its current rate, efficiency and α."""
    from commmodel.io.profiles import load_links

    text = (ROOT / "docs" / "profiles.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.-]+)` \| (scale_up|scale_out) \| (\w+) \| ([\d.]+) GB/s \| ([\d.]+)[^|]* \| ([\d.]+) µs \|$",
                      text, re.M)
    links = load_links()
    assert sorted(r[0] for r in rows) == sorted(links)
    for name, tier, kind, rate_GBps, efficiency, latency_us in rows:
        link = links[name]
        assert (tier, kind) == (link.tier, link.kind), name
        assert float(rate_GBps) == pytest.approx(link.bw_bytes_per_s.value / 1e9, rel=1e-3), name
        assert float(efficiency) == pytest.approx(link.efficiency.value, rel=1e-3), name
        assert float(latency_us) == pytest.approx(link.latency_s.value * 1e6, rel=1e-3), name


def test_ci_runs_exactly_the_readme_test_command():
    test_lines = [line for line in LINES if "pytest" in line]
    assert len(test_lines) == 1, test_lines
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_lines[0] in [line.strip() for line in ci_lines]
