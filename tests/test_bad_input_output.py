"""Output hygiene (DESIGN §8): ``--json`` prints one JSON document on stdout and nothing else, also when
the answer carries warnings (a layout that does not fit, systems left out, a bad file among good ones);
human output never shows numpy reprs (``np.float64(...)``, ``array(...)``) or Python warnings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app

runner = CliRunner()

H100 = ["--system", "dgx-h100"]

# (id, argv without --json, exit code): successful answers, several of them with warnings in the answer.
COMMANDS = [
    ("collective", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "16", *H100], 0),
    ("collective-all", ["collective", "all_gather", "--size", "64KiB", "--gpus", "16", *H100, "--algo", "all"], 0),
    ("collective-partial-node", ["collective", "all_reduce", "--size", "1MiB", "--gpus", "3", *H100], 0),
    ("collective-network", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "16", *H100,
                            "--network", "eth-100g:1"], 0),
    ("sweep", ["sweep", "reduce_scatter", "--gpus", "16", *H100, "--max-size", "1MiB"], 0),
    ("estimate", ["estimate", "--model", "1B", "--gpus", "8", *H100], 0),
    ("estimate-does-not-fit", ["estimate", "--model", "gpt3-175b", "--gpus", "8", *H100, "--tp", "8"], 0),
    ("estimate-comm-bound", ["estimate", "--model", "1B", "--gpus", "16", "--system", "pcie-8x-rtx4090",
                             "--network", "eth-10g:1"], 0),
    ("plan", ["plan", "--model", "1B", "--gpus", "16", *H100, "--top", "3"], 0),
    ("compare", ["compare", "--model", "1B", "--gpus", "16", *H100, "--network", "ib-ndr:8",
                 "--network", "eth-100g:1"], 0),
    ("query", ["query", "8 GPUs, 1B params, IB NDR"], 0),
    ("query-collective", ["query", "all-reduce 1GB on 16 A100 across 2 nodes with HDR"], 0),
    ("profiles-list", ["profiles", "list"], 0),
    ("profiles-show", ["profiles", "show", "gb200-nvl72"], 0),
    ("profiles-validate-mixed", ["profiles", "validate", "{good}", "{bad}"], 1),
]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    good = tmp_path / "good.yaml"
    good.write_text("name: my-box\ngpu: h100-sxm-80gb\ngpus_per_node: 8\n"
                    "scale_up: {link: nvlink4, domain_size: 8}\nscale_out: {link: ib-ndr, nics_per_node: 8}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: my-box\ngpu: h100-sxm-80gb\ngpus_per_node: 0\nscale_up: {link: nvlink4}\n")
    return {"good": str(good), "bad": str(bad)}


def _run(argv: list[str], files: dict[str, str]):
    args = [a.format(**files) if "{" in a else a for a in argv]
    return runner.invoke(app, args, env={"COMMMODEL_DEBUG": ""})


_NUMPY_REPR = re.compile(r"np\.(float|int|bool|str)\w*\(|array\(|dtype=|<numpy")


@pytest.mark.parametrize(("case_id", "argv", "code"), [pytest.param(*c, id=c[0]) for c in COMMANDS])
def test_json_stdout_is_one_document(case_id: str, argv: list[str], code: int, files: dict[str, str]) -> None:
    result = _run([*argv, "--json"], files)
    assert result.exit_code == code, result.output
    document = json.loads(result.stdout)  # raises if anything but one JSON document is on stdout
    assert isinstance(document, dict) and document
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr, result.stderr
    if code:
        assert [line.startswith("error: ") for line in result.stderr.splitlines()] == [True]


@pytest.mark.parametrize(("case_id", "argv", "code"), [pytest.param(*c, id=c[0]) for c in COMMANDS])
def test_human_output_has_no_numpy_reprs(case_id: str, argv: list[str], code: int, files: dict[str, str]) -> None:
    result = _run(argv, files)
    assert result.exit_code == code, result.output
    assert result.stdout.strip()
    assert not _NUMPY_REPR.search(result.output), _NUMPY_REPR.search(result.output)
    assert "Warning" not in result.stderr, result.stderr


def test_json_flags_in_the_answers() -> None:
    """The warnings above really are in the answers (so the hygiene tests cover them): a layout that does
    not fit says so in JSON, and a mixed validate lists the good and the bad file."""
    result = runner.invoke(app, ["estimate", "--model", "gpt3-175b", "--gpus", "8", *H100, "--tp", "8", "--json"])
    assert json.loads(result.stdout)["fits"] is False


def test_mixed_validate_json_lists_both(files: dict[str, str]) -> None:
    result = _run(["profiles", "validate", "{good}", "{bad}", "--json"], files)
    checked = json.loads(result.stdout)["checked"]
    assert [item["ok"] for item in checked] == [True, False]
    assert "gpus_per_node" in checked[1]["error"]
