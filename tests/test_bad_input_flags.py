"""Bad input FLAGS (the flag audit of 2026-11-28): a huge integer (2^70) in any layout, search, count or iteration
option, a gradient bucket or top-k fraction past what means anything, a ZeRO stage plan's stack cannot run, a GPU
range without a power of two, a what-if where nothing fits: each is ONE stderr line naming the flag (exit 1), never a
traceback, a hang or a silent answer. The contract is :func:`tests.test_bad_input_cli.check_bad_input`."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.limits import MAX_BENCH_ITERS, MAX_GPUS, MIN_TOPK_FRACTION
from tests.test_bad_input_cli import check_bad_input, invoke

runner = CliRunner()

H = 2**70
"""A typo-sized integer: past int64, so it overflowed numpy's layout arrays (OverflowError) before these bounds."""
H100 = ["--system", "dgx-h100"]
EST = ["estimate", "--model", "1B", "--gpus", "8", *H100]
PLAN = ["plan", "--model", "1B", "--gpus", "8", *H100]
TIMELINE = ["plot", "timeline", "--model", "1B", "--gpus", "8", *H100, "--out", "{tmp}/t.png"]
DIAGNOSE = ["diagnose", "{tmp}/trace.json", "--system", "dgx-a100", "--model", "1B"]  # refused before it is read
SCALING = ["plot", "scaling", "--model", "7B", *H100, "--out", "{tmp}/s.png"]
COMPUTE = ["calibrate", "compute", "--out", "{tmp}/c.csv", "--device", "cpu"]
RUN = ["calibrate", "run", "--out", "{tmp}/r.csv"]
GPUS_RANGE = f"at most {MAX_GPUS:,}"
BATCH_RANGE = "at most 100,000,000"


def _huge(command: list[str], flag: str, bound: str = GPUS_RANGE) -> pytest.param:
    sub = f"-{command[1]}" if command[0] in ("plot", "calibrate") else ""
    return pytest.param([*command, flag, str(H)], 1, [f"{flag} {H}", bound], id=f"{command[0]}{sub}{flag}-huge")


CASES: list = [
    # 1. every integer layout / search / count option: 1 to 2^24 (a degree) or 10^8 (a batch), one line
    *[_huge(EST, flag) for flag in ("--tp", "--pp", "--cp", "--ep", "--etp", "--vpp")],
    *[_huge(PLAN, flag) for flag in ("--tp", "--pp", "--cp", "--ep", "--max-tp")],
    _huge(PLAN, "--micro-batch", BATCH_RANGE),
    *[_huge(TIMELINE, flag) for flag in ("--tp", "--pp", "--cp", "--ep", "--etp")],
    *[_huge(DIAGNOSE, flag) for flag in ("--tp", "--pp", "--cp", "--ep", "--etp")],
    _huge(DIAGNOSE, "--global-batch", BATCH_RANGE),
    _huge(SCALING, "--min-gpus"),
    _huge(SCALING, "--max-gpus"),
    _huge(["plot", "calibration", "{tmp}/m.csv", "--out", "{tmp}/c.png"], "--ranks"),
    *[_huge(["calibrate", "import", "{tmp}/n.txt", "--out", "{tmp}/x.csv"], flag) for flag in ("--ranks", "--nodes")],
    _huge(COMPUTE, "--tp"),
    _huge(COMPUTE, "--seq-len", BATCH_RANGE),
    _huge(COMPUTE, "--micro-batch", BATCH_RANGE),
    pytest.param([*EST, "--tp", str(MAX_GPUS + 1)], 1, [f"--tp {MAX_GPUS + 1}", GPUS_RANGE], id="est-tp-one-past"),
    pytest.param([*EST, "--tp", str(MAX_GPUS)], 1, ["does not divide", "!at most"], id="est-tp-at-bound-is-a-layout"),
    pytest.param([*PLAN, "--recompute", "full", "--recompute-layers", str(H)], 1,
                 [f"--recompute-layers {H}", "layers", "give 1 to"], id="plan-recompute-layers-huge"),
    # 2. benchmark iterations: at most 10^4
    *[_huge(cmd, flag, f"at most {MAX_BENCH_ITERS:,}") for cmd in (COMPUTE, RUN) for flag in ("--iters", "--warmup")],
    pytest.param([*RUN, "--iters", str(MAX_BENCH_ITERS + 1)], 1, [f"--iters {MAX_BENCH_ITERS + 1}", "at most"],
                 id="run-iters-one-past"),
    # 3. --bucket-size: 1 byte to 1 EB on every command that takes it (bits, denormals, overflow to inf)
    *[pytest.param([*EST, "--bucket-size", size], 1, ["--bucket-size", "at least 1 byte", "1 EB", "!StepOptions"],
                   id=f"est-bucket-{size}") for size in ("1e308B", "8EiB", "1e-300B", "1b", "0B")],
    pytest.param([*PLAN, "--bucket-size", "1e308B"], 1, ["--bucket-size", "1 EB"], id="plan-bucket-huge"),
    pytest.param([*TIMELINE, "--bucket-size", "1e308B"], 1, ["--bucket-size", "1 EB"], id="timeline-bucket-huge"),
    pytest.param(["compare", "--model", "1B", "--gpus", "8", *H100, "--system", "dgx-a100", "--bucket-size", "8EiB"],
                 1, ["--bucket-size", "1 EB"], id="compare-bucket-huge"),
    # 4. --topk-fraction: at least 10^-6
    *[pytest.param([*EST, "--compression", "topk", "--topk-fraction", value], 1,
                   ["--topk-fraction", f"{MIN_TOPK_FRACTION:g}", "!array("], id=f"est-topk-{value}")
      for value in ("5e-324", "1e-300", "9e-7")],
    # 5. plan refuses a ZeRO stage its stack cannot run, as estimate does
    pytest.param([*PLAN, "--stack", "ddp", "--zero", "3"], 1, ["--zero 3", "the ddp stack shards nothing"],
                 id="plan-ddp-zero3"),
    pytest.param([*PLAN, "--stack", "ddp", "--zero", "0", "--zero", "2"], 1, ["--zero 2", "shards nothing"],
                 id="plan-ddp-zero-list"),
    # 6. a step-scaling range without a power of two: the collective form's line
    *[pytest.param([*SCALING, "--min-gpus", low, "--max-gpus", high], 1,
                   [f"none of dgx-h100 gives a result for {low}..{high} GPUs", "widen --min-gpus/--max-gpus"],
                   id=f"scaling-step-{low}-{high}") for low, high in (("3", "3"), ("9", "15"))],
    # 7. a what-if where no target fits: plan's reason, not an empty figure
    pytest.param(["plot", "whatif", "--model", "gpt3-175b", "--gpus", "1", *H100, "--system", "dgx-a100", "--out",
                  "{tmp}/w.png"], 1, ["nothing to draw", "(dgx-h100, dgx-a100)", "use more GPUs"],
                 id="whatif-none-fits"),
    # 8. the factor as given, not rounded to 1
    pytest.param(["sweep", "all_reduce", "--gpus", "8", *H100, "-f", "1.000000000001"], 1,
                 ["--factor 1.000000000001 gives", "larger factor"], id="sweep-factor-digits"),
    pytest.param(["sweep", "all_reduce", "--gpus", "8", *H100, "-f", "0.99999999999"], 1,
                 ["--factor 0.99999999999 must be > 1"], id="sweep-factor-below-one-digits"),
    # 9. calibrate run: an --algo/--proto NCCL does not know is named (it said "found no RANK/WORLD_SIZE")
    pytest.param([*RUN, "--proto", "nope"], 1, ["--proto 'nope'", "LL, LL128, Simple"], id="run-proto-unknown"),
    pytest.param([*RUN, "--algo", "ring,nope"], 1, ["--algo 'ring,nope'", "unknown 'nope'"], id="run-algo-unknown"),
]


@pytest.mark.parametrize(("argv", "code", "fragments"), CASES)
def test_bad_flag_is_one_line(argv: list[str], code: int, fragments: list[str], tmp_path: Path) -> None:
    check_bad_input(invoke(argv, tmp_path), code, fragments, tmp_path)


def test_plan_refuses_ddp_zero_with_estimates_words(tmp_path: Path) -> None:
    """One owner (step/job.check_zero_stage): plan's line is estimate's, word for word."""
    plan = invoke([*PLAN, "--stack", "ddp", "--zero", "3"], tmp_path).stderr
    estimate = invoke([*EST, "--stack", "ddp", "--zero", "3"], tmp_path).stderr
    assert plan == estimate and "shards nothing" in plan


@pytest.mark.parametrize("argv", [[*COMPUTE, "--iters", str(H)], [*RUN, "--iters", str(H)]],
                         ids=["compute", "run"])
def test_huge_iterations_end_at_once(argv: list[str], tmp_path: Path) -> None:
    """`calibrate compute --iters 2^70` ran forever: now one line in a fresh process, well within its timeout."""
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    done = subprocess.run([sys.executable, "-m", "commmodel", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "--iters" in done.stderr
    assert not (tmp_path / "c.csv").exists()


@pytest.mark.parametrize("flags", [["--bucket-size", "1e18B"], ["--bucket-size", "1B"],
                                   ["--compression", "topk", "--topk-fraction", "1e-6"]], ids=["1EB", "1B", "topk"])
def test_values_at_the_bound_are_answered_without_warnings(flags: list[str]) -> None:
    """The bounds themselves are accepted, and answered without numpy RuntimeWarnings (raised as errors here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = runner.invoke(app, [*EST, *flags, "--json"], env={"COMMMODEL_DEBUG": ""})
    assert result.exit_code == 0, result.output
    assert "Warning" not in result.stderr


def test_whatif_prints_a_dash_where_a_target_does_not_fit(tmp_path: Path) -> None:
    """Some targets fit: the figure is drawn and the table says '-' (as compare does) for the others, not None."""
    result = invoke(["plot", "whatif", "--model", "13B", "--gpus", "1", "--system", "aws-p6-b300", *H100, "--out",
                     str(tmp_path / "w.png")], tmp_path)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if line.startswith("dgx-h100"))
    assert "None" not in result.stdout and row.split()[1:] == ["-"] * 4


def test_step_scaling_of_no_count_is_empty() -> None:
    """The library function the step form calls gives no row (not an IndexError) for an empty list of counts."""
    from commmodel.io.models import resolve_model
    from commmodel.io.profiles import load_system
    from commmodel.plots.plan_data import SCALING_COLUMNS, step_scaling

    frame = step_scaling(resolve_model("1B"), [load_system("dgx-h100")], [])
    assert frame.empty and list(frame.columns) == list(SCALING_COLUMNS)


@pytest.mark.parametrize(("factor", "text"), [(2.0, "2"), (1.5, "1.5"), (1.0001, "1.0001"), (1.0, "1"),
                                              (1.000000000001, "1.000000000001"), (float("inf"), "inf")])
def test_factor_text_reads_back_as_given(factor: float, text: str) -> None:
    from commmodel.sweep_sizes import factor_text

    assert factor_text(factor) == text


def test_calibrate_run_without_a_launcher_is_refused_before_torch_loads(tmp_path: Path) -> None:
    """Without torchrun/srun variables `calibrate run` imported torch (~1 s) before saying so."""
    code = ("import os, sys\nfrom typer.testing import CliRunner\nfrom commmodel.cli.app import app\n"
            "for name in ('RANK', 'WORLD_SIZE', 'SLURM_PROCID', 'SLURM_NTASKS'): os.environ.pop(name, None)\n"
            f"r = CliRunner().invoke(app, ['calibrate', 'run', '--out', {str(tmp_path / 'r.csv')!r}])\n"
            "print(r.exit_code, 'torch' in sys.modules, 'RANK/WORLD_SIZE' in r.output)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["1", "False", "True"], done.stderr


def test_step_scaling_tries_every_power_of_two_the_flags_accept(tmp_path: Path) -> None:
    """--max-gpus takes up to 2^24, but the command tried powers of two up to 2^20 only: 2^21..2^22 "gave nothing"."""
    result = invoke([*SCALING, "--min-gpus", str(2**21), "--max-gpus", str(2**22), "--json"], tmp_path)
    assert result.exit_code == 0, result.output
    assert {row["num_gpus"] for row in json.loads(result.stdout)["rows"]} == {2**21, 2**22}


@pytest.mark.parametrize(("argv", "fragments"), [
    (["--name", "a/b"], ["--name 'a/b'", "letters, digits and . _ + -"]),
    (["--name", "x\ny"], ["--name 'x\\ny'", "letters, digits"]),
    (["--name", "dgx-h100"], ["'dgx-h100' is a shipped profile's name", "dgx-h100-calibrated"]),
    (["--name", "dgx-b200"], ["shipped profile's name"]),  # an alias of a shipped profile (hgx-b200)
])
def test_a_profile_name_that_could_not_be_typed_back_or_shadows_the_catalogue_is_refused(
        argv: list[str], fragments: list[str], tmp_path: Path) -> None:
    """from-nccl and calibrate fit wrote profiles named 'a/b', 'x<newline>y' or 'dgx-h100', which then loaded."""
    topo = str(Path(__file__).parent / "fixtures" / "nccl" / "h100-ndr-topo-dump.xml")
    check_bad_input(invoke(["profiles", "from-nccl", topo, "--out", "{tmp}/d.yaml", *argv], tmp_path), 1, fragments,
                    tmp_path)
    assert not (tmp_path / "d.yaml").exists()


def test_a_draft_named_by_its_out_file_is_checked_too(tmp_path: Path) -> None:
    topo = str(Path(__file__).parent / "fixtures" / "nccl" / "h100-ndr-topo-dump.xml")
    check_bad_input(invoke(["profiles", "from-nccl", topo, "--out", "{tmp}/dgx-h100.yaml"], tmp_path), 1,
                    ["--out dgx-h100.yaml (its name names the profile)", "shipped profile's name"], tmp_path)


@pytest.mark.parametrize(("argv", "fragments"), [
    (["calibrate", "compute", "--out", "{tmp}/c.png", "--device", "cpu"],
     ["--out c.png names a PNG image", "a measurements CSV", "--out c.csv"]),
    (["calibrate", "run", "--out", "{tmp}/r.yaml"], ["--out r.yaml names a YAML file", "writes a CSV"]),
    (["calibrate", "fit", "{p5csv}", "--base", "dgx-h100", "--out", "{tmp}/new.csv"],
     ["--out new.csv names a CSV file", "a profile YAML", "--out new.yaml"]),
    (["profiles", "from-nccl", str(Path(__file__).parent / "fixtures" / "nccl" / "h100-ndr-topo-dump.xml"), "--out",
      "{tmp}/d.json"], ["--out d.json names a JSON file", "a system YAML"]),
])
def test_an_out_name_of_another_format_is_refused(argv: list[str], fragments: list[str], tmp_path: Path) -> None:
    """`calibrate import -o x.png` wrote a CSV into a .png and `calibrate fit -o new.csv` a YAML into a .csv."""
    check_bad_input(invoke(argv, tmp_path), 1, fragments, tmp_path)
    assert not any(p.suffix in (".png", ".json") or p.name in ("r.yaml", "new.csv") for p in tmp_path.iterdir())


@pytest.mark.parametrize("suffix", [".png", ".pdf", ".svg", ".jpg"])
def test_a_figure_replaces_only_a_figure_commmodel_drew(suffix: str, tmp_path: Path) -> None:
    """`plot -o thesis.pdf` replaced the user's own file; now only a figure carrying commmodel's mark is replaced."""
    out = tmp_path / f"fig{suffix}"
    argv = ["plot", "collective", "all_reduce", "--gpus", "8", *H100, "--out", str(out)]
    assert invoke(argv, tmp_path).exit_code == 0 and out.stat().st_size > 0
    assert invoke(argv, tmp_path).exit_code == 0  # its own figure: replaced
    out.write_bytes(b"the user's own work")
    check_bad_input(invoke(argv, tmp_path), 1, [f"--out {out} exists and was not drawn by commmodel"], tmp_path)
    assert out.read_bytes() == b"the user's own work"


@pytest.mark.parametrize("argv", [
    [*EST[:-2], "--system", "DGX-H100"], [*EST, "--dtype", "BF16"], [*EST, "--network", "IB-NDR:4"],
    ["compare", "--model", "1B", "--gpus", "8", *H100, "--dtype", "BF16", "--dtype", "FP16"],
])
def test_catalogue_names_are_read_in_any_case(argv: list[str], tmp_path: Path) -> None:
    """`--stack MEGATRON-CORE` was taken while `--dtype BF16`, `-s DGX-H100` and `--network IB-NDR` were refused."""
    result = invoke(argv, tmp_path)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("value", ["", ",,,", " "])
def test_a_module_list_that_names_nothing_is_refused(value: str, tmp_path: Path) -> None:
    """`--offload-modules ''` and `',,,'` were taken as "offload nothing", silently."""
    check_bad_input(invoke([*EST, "--offload-modules", value], tmp_path), 1,
                    [f"--offload-modules {value!r} names no module"], tmp_path)


def test_a_module_named_twice_counts_once(tmp_path: Path) -> None:
    result = invoke([*EST, "--offload-modules", "attn_norm,attn_norm", "--json"], tmp_path)
    assert result.exit_code == 0 and json.loads(result.stdout)["offload_modules"] == ["attn_norm"]


def test_device_cuda_without_a_gpu_driver_is_refused_before_torch(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """`calibrate compute --device cuda` on a host without a GPU imported torch (~1.2 s) before saying so."""
    from commmodel.calibrate import compute

    monkeypatch.setattr(compute, "GPU_DEVICE_NODES", (str(tmp_path / "no-such-device"),))
    check_bad_input(invoke([*COMPUTE[:-1], "cuda"], tmp_path), 1,
                    ["--device cuda but this host has no GPU device", "--device cpu"], tmp_path)
