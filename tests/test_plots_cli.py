"""``commmodel plot``: files written, JSON facts equal the model's, one-line errors, lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.collectives.topology import group_topology

runner = CliRunner()


def _png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plot_collective_json_and_png(tmp_path, dgx_h100):
    out = tmp_path / "ar.png"
    result = runner.invoke(app, ["plot", "collective", "all_reduce", "--gpus", "8", "--system", "dgx-h100",
                                 "--out", str(out), "--dpi", "50", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "collective" and doc["out"] == str(out) and doc["num_ranks"] == 8
    assert "ring" in doc["algorithms"]
    # ring-only: latency part = bandwidth part at S = α·n·B
    topo = group_topology(dgx_h100, 8)
    if doc["algorithms"] == ["ring"]:
        assert doc["balance_size_bytes"] == pytest.approx(topo.intra_latency_s * 8 * topo.intra_bw_bytes_per_s, rel=1e-6)
    assert _png_size(out) == (600, 240)  # 12 x 4.8 in at 50 dpi


def test_plot_collective_overlays_a_measured_setup(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("setup_id,collective,size_bytes,time_us,busbw_GBps\n"
                   "a,all_reduce,1048576,30,61\n"
                   "a,all_gather,1048576,20,40\n"
                   "b,all_reduce,1048576,99,9\n")
    out = tmp_path / "ar.svg"
    result = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "8", "-s", "dgx-h100", "--max-size", "1GiB",
                                 "--measured", str(csv), "--setup", "a", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"wrote {out}: all_reduce on 8 ranks (1 node(s) × 8) of dgx-h100, nccl, the "
                                    "library's choice marked")
    assert out.read_text().count("<svg") == 1
    bad = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "8", "-s", "dgx-h100",
                              "--measured", str(csv), "--setup", "zzz", "--out", str(out)])
    assert bad.exit_code == 1 and "known: a, b" in bad.stderr


def test_plot_scaling_rows_match_records(tmp_path):
    out = tmp_path / "scaling.png"
    result = runner.invoke(app, ["plot", "scaling", "all_reduce", "--size", "1GiB", "-s", "dgx-h100",
                                 "-s", "pcie-2x-rtx2080ti", "--min-gpus", "8", "--max-gpus", "64",
                                 "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [r["num_gpus"] for r in doc["rows"]] == [8, 16, 32, 64]
    assert {r["system"] for r in doc["rows"]} == {"dgx-h100"}
    assert doc["left_out"] == ["pcie-2x-rtx2080ti (no result for 8..64 GPUs in whole nodes)"]
    assert out.stat().st_size > 10_000
    # each point is what `collective` answers for that count (the library's own choice, not the fastest pair)
    for row in doc["rows"]:
        one = runner.invoke(app, ["collective", "all_reduce", "--size", "1GiB", "-n", str(row["num_gpus"]), "-s",
                                  "dgx-h100", "--json"])
        best = json.loads(one.stdout)["best"]
        assert (row["library"], row["algorithm"]) == ("nccl", best["algorithm"])
        assert row["time_s"] == pytest.approx(best["time_s"], rel=1e-12)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "{tmp}/x.txt"], "unknown extension '.txt'"),
        (["--out", "{tmp}/missing/x.png"], "does not exist"),
        (["--out", "{tmp}/x.png", "--min-size", "4 parsecs"], "--min-size"),
        (["--out", "{tmp}/x.png", "--measured", "{tmp}/none.csv"], "no such file"),
    ],
)
def test_plot_errors_are_one_line_exit_1(tmp_path, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    result = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "8", "-s", "dgx-h100", *args])
    assert result.exit_code == 1
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_cli_start_up_does_not_import_matplotlib_or_pandas():
    code = ("import sys, commmodel.cli.app; "
            "print(sorted(m for m in ('matplotlib', 'pandas', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_measured_rows_must_match_the_group_size(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("# commmodel measurements v1 (collectives)\n# backend: gloo\n"
                   "op,size_bytes,num_ranks,time_s_median,busbw_GBps\n"
                   "all_reduce,1048576,2,0.001,1.0\n")
    ok = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "2", "-s", "dgx-h100", "--measured", str(csv),
                             "--out", str(tmp_path / "ok.png"), "--json"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "8", "-s", "dgx-h100", "--measured", str(csv),
                              "--out", str(tmp_path / "bad.png")])
    assert bad.exit_code == 1 and "no all_reduce rows on 8 ranks; it has 2" in bad.stderr


def _default_stack() -> dict:
    """The planner inputs every command uses: the default stack's options, ZeRO stages and memory headroom."""
    from commmodel.planner.space import SearchSpace
    from commmodel.step.options import DEFAULT_MEMORY_HEADROOM_BYTES
    from commmodel.step.stacks import get_stack, stack_options

    return {"options": stack_options(memory_headroom_bytes=DEFAULT_MEMORY_HEADROOM_BYTES),
            "space": SearchSpace(**get_stack().search_pins)}


def test_plot_breakdown_under_a_stack_draws_plans_top_layouts(tmp_path):
    """`plot breakdown --stack fsdp2` ranks what `plan --stack fsdp2` ranks (before, it searched the stack's ZeRO
    stages only, not its recompute policies, and so missed torchtitan's op-level SAC)."""
    job = ["-m", "llama3-70b", "-n", "256", "-s", "dgx-h100", "--stack", "fsdp2", "--json"]
    drawn = runner.invoke(app, ["plot", "breakdown", *job, "--top", "3", "--out", str(tmp_path / "b.png")])
    planned = runner.invoke(app, ["plan", *job, "--top", "3"])
    assert drawn.exit_code == 0 and planned.exit_code == 0, drawn.output + planned.output
    rows, layouts = json.loads(drawn.stdout)["rows"], json.loads(planned.stdout)["layouts"]
    assert [r["recompute"] for r in rows] == [lay["recompute"] for lay in layouts]
    assert rows[0]["recompute"] == "op"
    assert [r["step_time_s"] for r in rows] == pytest.approx([lay["step_time_s"] for lay in layouts], rel=1e-12)


def test_plot_breakdown_rows_are_the_planners_top_layouts(tmp_path):
    from commmodel.io.profiles import load_system
    from commmodel.planner.search import plan
    from commmodel.workload.presets import get_model

    out = tmp_path / "breakdown.png"
    result = runner.invoke(app, ["plot", "breakdown", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--top", "4",
                                 "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    expected = plan(get_model("1.3B"), load_system("dgx-h100"), 16, **_default_stack()).records(4)
    assert [r["rank"] for r in doc["rows"]] == [1, 2, 3, 4]
    for row, want in zip(doc["rows"], expected):
        assert (row["tp"], row["pp"], row["dp"]) == (want["tp"], want["pp"], want["dp"])
        assert row["step_time_s"] == pytest.approx(want["step_time_s"])
        # the stacked segments add up to the step time (the bar's length)
        exposed = sum(v for k, v in row.items() if k.endswith("/exposed_s"))
        assert exposed == pytest.approx(row["step_time_s"], rel=1e-9)
    assert _png_size(out)[0] == 1500  # 12.5 in at 120 dpi


def test_plot_whatif_networks(tmp_path):
    """--network means what it means in compare: applied to every --system ('native': the system's own), a repeat
    comparing networks (it meant "also the first system with this network", so the two drew different grids)."""
    result = runner.invoke(app, ["plot", "whatif", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--network", "native",
                                 "--network", "eth-100g:1", "--out", str(tmp_path / "w.png"), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [r["label"] for r in rows] == ["dgx-h100", "dgx-h100+eth-100g:1"]
    said = runner.invoke(app, ["compare", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--network", "native",
                               "--network", "eth-100g:1", "--json"])
    assert [t["step_time_s"] for t in json.loads(said.stdout)["targets"]] == [r["step_time_s"] for r in rows]
    assert rows[0]["speedup_vs_baseline"] == pytest.approx(1.0)
    assert rows[1]["speedup_vs_baseline"] == pytest.approx(rows[0]["step_time_s"] / rows[1]["step_time_s"])
    assert rows[1]["step_time_s"] >= rows[0]["step_time_s"]  # a slower network never helps the best layout



@pytest.mark.parametrize("extra", [["--stack", "fsdp2"], ["--stack", "fsdp2", "--stack", "megatron-core"],
                                   ["--dtype", "bf16", "--dtype", "fp8"]])
def test_plot_whatif_draws_what_compare_answers(tmp_path, extra):
    """One question, one answer: `plot whatif` plans the same grid as `compare` (before, it searched ZeRO stages
    only, so under fsdp2 it missed the stack's op-level SAC and drew another best layout than `compare` printed)."""
    common = ["-m", "llama3-70b", "-n", "256", "-s", "dgx-h100", "-s", "hgx-b200", *extra, "--json"]
    drawn = runner.invoke(app, ["plot", "whatif", *common, "--out", str(tmp_path / "w.png")])
    said = runner.invoke(app, ["compare", *common])
    assert drawn.exit_code == 0 and said.exit_code == 0, drawn.output + said.output
    rows, targets = json.loads(drawn.stdout)["rows"], json.loads(said.stdout)["targets"]
    assert [(r["label"], r["best_label"]) for r in rows] == [(t["label"], t["best_label"]) for t in targets]
    assert [r["step_time_s"] for r in rows] == pytest.approx([t["step_time_s"] for t in targets], rel=1e-12)


def test_plot_timeline(tmp_path):
    fast = runner.invoke(app, ["plot", "timeline", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--micro-batch", "2",
                               "--out", str(tmp_path / "t.png"), "--json"])
    slow = runner.invoke(app, ["plot", "timeline", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--micro-batch", "2",
                               "--network", "eth-100g:1", "--out", str(tmp_path / "t2.png"), "--json"])
    assert fast.exit_code == 0 and slow.exit_code == 0, fast.output + slow.output
    f, s = json.loads(fast.stdout), json.loads(slow.stdout)
    # the layout estimate takes for the same flags: the stack's ZeRO stage (megatron-core: 1, the distributed
    # optimizer) and no sequence parallelism at tp 1 (cli/common.stack_layout_defaults, one rule for both)
    est = json.loads(runner.invoke(app, ["estimate", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--micro-batch", "2",
                                         "--json"]).stdout)["layout"]
    assert f["layout"] == {"tp": 1, "cp": 1, "pp": 1, "dp": 16, "ep": 1, "etp": 1, "micro_batch": 2, "zero": 1,
                           "sequence_parallel": False, "global_batch": est["global_batch"]}
    assert all(est[k] == v for k, v in f["layout"].items())  # and estimate's default global batch
    zero0 = runner.invoke(app, ["plot", "timeline", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--micro-batch", "2",
                                "--zero", "0", "--out", str(tmp_path / "t0.png"), "--json"])
    assert json.loads(zero0.stdout)["layout"]["zero"] == 0
    assert f["compute_s"] == pytest.approx(s["compute_s"])  # same GPUs, same compute
    assert s["comm_exposed_s"] > f["comm_exposed_s"]
    assert s["last_micro_batch_s"] == pytest.approx(max(s["compute_s"], s["compute_s"] + s["comm_exposed_s"]))
    bad = runner.invoke(app, ["plot", "timeline", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--tp", "3",
                              "--out", str(tmp_path / "t3.png")])
    assert bad.exit_code == 1 and "tp 3 × pp 1 = 3 does not divide 16 GPUs" in bad.stderr


def test_plot_timeline_of_a_mixture_of_experts_states_the_expert_gradients_it_does_not_draw(tmp_path):
    """The bars are the dense buckets; the expert gradients' reduction over the expert-DP group is estimate's
    ep/grad_reduce term, stated with its figures (before: left out without a word, 135 ms link here)."""
    from commmodel.io.profiles import load_system
    from commmodel.plots._style import format_time_tick
    from commmodel.step.estimate import evaluate_single
    from commmodel.step.job import job_setup
    from commmodel.step.layout import Layout
    from commmodel.workload.presets import get_model

    args = ["plot", "timeline", "-m", "qwen3-30b-a3b", "-n", "64", "-s", "gb200-nvl72", "--tp", "1"]
    out = runner.invoke(app, [*args, "--out", str(tmp_path / "moe.png"), "--json"])
    assert out.exit_code == 0, out.output
    notes = json.loads(out.stdout)["notes"]
    system = load_system("gb200-nvl72")
    _, options, model = job_setup(get_model("qwen3-30b-a3b"), system)
    row = evaluate_single(model, system, 64, Layout(tp=1, dp=64, global_batch=64, zero=1), options)
    assert row["ep/grad_reduce/link_s"] > 0
    stated = [n for n in notes if "expert gradients" in n and "ep/grad_reduce" in n]
    assert len(stated) == 1  # with the step model's own figures, as estimate prints them
    assert (f"{format_time_tick(row['ep/grad_reduce/link_s'])} link, "
            f"{format_time_tick(row['ep/grad_reduce/exposed_s'])} exposed") in stated[0]


def _write_sweep(path, num_ranks=8, a_s=20e-6, b_s_per_byte=1.75 / 100e9, system="dgx-h100"):
    from commmodel.io.measurements import write_measurements

    rows = [{"op": "all_reduce", "size_bytes": 2**k, "num_ranks": num_ranks, "num_nodes": 1, "group": "all",
             "algorithm": "auto", "protocol": "", "dtype": "float32", "time_s_median": a_s + b_s_per_byte * 2**k,
             "time_s_p10": None, "time_s_p90": None, "algbw_GBps": None, "busbw_GBps": None, "iters": 5,
             "time_stat": "median", "source": "test"} for k in range(3, 31)]
    write_measurements(path, "collectives", {"system": system} if system else {}, rows)


def test_plot_calibration_recovers_a_known_line(tmp_path):
    csv = tmp_path / "sweep.csv"
    _write_sweep(csv, system="")
    result = runner.invoke(app, ["plot", "calibration", str(csv), "--out", str(tmp_path / "c.png"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["group"] == "all_reduce on 8 ranks (1 node, auto)"
    (segment,) = doc["segments"]
    # t = a + b·S with b = wire/B, wire = 2·7/8 = 1.75: B comes back as 100 GB/s (busbw)
    assert segment["bw_bytes_per_s"] == pytest.approx(100e9, rel=1e-6)
    assert doc["r2"] == pytest.approx(1.0, abs=1e-9)
    assert all(row["max_abs_rel_err"] < 1e-5 for row in doc["rows"])  # the CSV keeps 7 significant digits


def test_plot_calibration_with_the_recorded_base_draws_profile_curves(tmp_path):
    from PIL import Image  # matplotlib depends on pillow

    csv = tmp_path / "sweep.csv"
    _write_sweep(csv)
    out = tmp_path / "c.png"
    result = runner.invoke(app, ["plot", "calibration", str(csv), "--out", str(out), "--dpi", "40"])
    assert result.exit_code == 0, result.output
    assert "alpha" in result.stdout and "busbw 100 GB/s" in result.stdout
    assert Image.open(out).size == (360, 280)
    bad = runner.invoke(app, ["plot", "calibration", str(csv), "--ranks", "4", "--out", str(out)])
    assert bad.exit_code == 1 and "no group with 4 ranks" in bad.stderr


def test_plot_scaling_of_a_model_uses_the_planners_best_layouts(tmp_path):
    from commmodel.io.profiles import load_system
    from commmodel.planner.search import plan
    from commmodel.workload.presets import get_model

    result = runner.invoke(app, ["plot", "scaling", "--model", "1.3B", "-s", "dgx-h100", "--min-gpus", "8",
                                 "--max-gpus", "32", "--global-batch", "256", "--out", str(tmp_path / "s.png"), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [r["num_gpus"] for r in rows] == [8, 16, 32]
    best = plan(get_model("1.3B"), load_system("dgx-h100"), 16, global_batch=256, **_default_stack()).row(0)
    assert rows[1]["tokens_per_s"] == pytest.approx(best["tokens_per_s"])
    assert rows[2]["tokens_per_s"] > rows[0]["tokens_per_s"]  # more GPUs, same batch: more throughput
    both = runner.invoke(app, ["plot", "scaling", "all_reduce", "--model", "1.3B", "-s", "dgx-h100",
                               "--out", str(tmp_path / "x.png")])
    assert both.exit_code == 1 and "not both" in both.stderr


def test_setup_alone_overlays_the_shipped_nccl_tests_rows(tmp_path):
    import csv

    from commmodel.io.validation_data import NCCL_TESTS_CSV

    with open(NCCL_TESTS_CSV, newline="") as handle:
        published = [r for r in csv.DictReader(handle) if r["setup_id"] == "aws-p5-1n" and r["collective"] == "all_reduce"]
    result = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "8", "-s", "aws-p5", "--setup", "aws-p5-1n",
                                 "--out", str(tmp_path / "p5.png"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["measured_points"] == len(published) == 32


def test_plot_collective_draws_the_systems_library_as_collective_prices_it(tmp_path):
    """On a CPU host the curves are gloo's (the system's library, as `collective` and `sweep` default), each at the
    time `collective --library gloo --algo NAME` gives; the one torch runs (ring) is solid, gloo's others dashed.
    Before, the plot priced NCCL's ring and tree on CPU ranks."""
    from commmodel.collectives import collective_cost
    from commmodel.hardware.cluster import Cluster
    from commmodel.io.profiles import load_system
    from commmodel.plots.sweep_data import collective_sweep, power_of_two_sizes

    result = runner.invoke(app, ["plot", "collective", "all_reduce", "--gpus", "4", "--gpus-per-node", "4", "--system",
                                 "cpu-host", "--max-size", "64MiB", "--out", str(tmp_path / "c.png"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["library"] == "gloo" and "ring" in doc["algorithms"] and "tree" not in doc["algorithms"]
    view = Cluster.for_gpus(load_system("cpu-host"), 4, 4).system
    sweep = collective_sweep("all_reduce", view, 4, power_of_two_sizes(8, 2**26), library="gloo")
    for name, rows in sweep.rows.groupby("algorithm"):
        want = collective_cost("all_reduce", rows["size_bytes"].to_numpy(), view, 4, 4, algorithm=name, library="gloo")
        assert rows["time_s"].to_numpy() == pytest.approx(want.time_s, rel=1e-12)
        assert bool(rows["nccl"].iloc[0]) == (name == "ring")  # torch's gloo all-reduce runs the ring
    bad = runner.invoke(app, ["plot", "collective", "all_reduce", "--gpus", "16", "--system", "dgx-h100", "--library",
                              "rccl", "--out", str(tmp_path / "r.png")])
    assert bad.exit_code == 1 and "RCCL runs on AMD Instinct GPUs" in bad.output


def test_a_one_size_collective_plot_warns_nothing(tmp_path):
    """--min-size equal to --max-size printed matplotlib's "identical low and high xlims" UserWarning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = runner.invoke(app, ["plot", "collective", "all_reduce", "--gpus", "16", "--system", "dgx-h100",
                                     "--min-size", "1GiB", "--max-size", "1GiB", "--out", str(tmp_path / "a.png")])
    assert result.exit_code == 0, result.output


def test_plot_collective_json_rows_hold_what_sweep_prices(tmp_path):
    """The plot's rows and its marked algorithm are what `sweep` and `collective` answer for the same question (the
    default --selection nccl: each algorithm at the protocol NCCL's tuner picks, NCCL's own choice marked); before,
    the plot priced every algorithm at its fastest protocol and marked the fastest curve (audit: tree 0.85 ms marked
    where `collective` answers ring 1.10 ms). --selection fastest keeps the old reading, never slower."""
    base = ["all_reduce", "--gpus", "64", "--system", "dgx-a100"]
    figure = ["plot", "collective", *base, "--min-size", "64KiB", "--max-size", "1GiB", "--out", str(tmp_path / "c.png"),
              "--json"]
    doc = json.loads(runner.invoke(app, figure).stdout)
    assert doc["selection"] == "nccl" and "NCCL" in doc["library_reason"]
    swept = json.loads(runner.invoke(app, ["sweep", *base, "-b", "64KiB", "-e", "1GiB", "--json"]).stdout)["rows"]
    marked = {r["size_bytes"]: r for r in doc["rows"] if r["best"]}
    for row in swept:
        assert marked[row["size_bytes"]]["algorithm"] == row["algorithm"]
        assert marked[row["size_bytes"]]["protocol"] == row["protocol"]
        assert marked[row["size_bytes"]]["time_s"] == pytest.approx(row["time_s"], rel=1e-12)
    fastest = json.loads(runner.invoke(app, [*figure, "--selection", "fastest"]).stdout)["rows"]
    at = {(r["size_bytes"], r["algorithm"]): r["time_s"] for r in doc["rows"]}
    assert all(r["time_s"] <= at[(r["size_bytes"], r["algorithm"])] * (1 + 1e-12) for r in fastest)


def test_plot_calibration_draws_a_sweep_no_form_fits(tmp_path):
    """A noisy sweep whose times fall as the size grows has no α-β fit, and `plot calibration` refused to draw it at
    all (bad-input audit): its points are drawn alone now, and the reason is said."""
    src = Path(__file__).parent / "fixtures" / "calibrate" / "gloo_2ranks_devvm.csv"
    lines = src.read_text().splitlines()
    header = [line for line in lines if line.startswith("#")]
    body = [line for line in lines if not line.startswith("#")]
    cols = body[0].split(",")
    rows = sorted((r.split(",") for r in body[1:] if r.split(",")[cols.index("op")] == "all_reduce"),
                  key=lambda r: float(r[cols.index("size_bytes")]))[:8]
    for i, row in enumerate(rows):
        row[cols.index("time_s_median")] = f"{1e-3 * (len(rows) - i):e}"  # time falls as size grows
    falling = tmp_path / "falling.csv"
    falling.write_text("\n".join([*header, body[0], *(",".join(r) for r in rows)]) + "\n")
    result = runner.invoke(app, ["plot", "calibration", str(falling), "--out", str(tmp_path / "c.png"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["note"].startswith("no α-β fit:") and "time falls as size grows" in doc["note"]
    assert len(doc["rows"]) == 8 and (tmp_path / "c.png").stat().st_size > 0


def test_plot_scaling_of_a_model_prices_each_system_in_its_own_library(tmp_path):
    """One stack's options over an NVIDIA and an AMD system: each system's points in its own library (nccl, rccl),
    said in the rows and the title; a flag of the other kind of scaling plot is refused, not ignored."""
    out = runner.invoke(app, ["plot", "scaling", "--model", "gpt3-13b", "-s", "dgx-h100", "-s", "amd-mi300x",
                              "--max-gpus", "16", "--out", str(tmp_path / "s.png"), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert {(r["system"], r["library"]) for r in doc["rows"]} == {("dgx-h100", "nccl"), ("amd-mi300x", "rccl")}
    assert doc["title"].endswith("(megatron-core, bf16, nccl/rccl)")
    for extra, says in ((["--size", "1GiB"], "--size is the collective's message"),):
        bad = runner.invoke(app, ["plot", "scaling", "--model", "gpt3-13b", "-s", "dgx-h100", *extra,
                                  "--out", str(tmp_path / "b.png")])
        assert bad.exit_code == 1 and says in bad.output
    bad = runner.invoke(app, ["plot", "scaling", "all_reduce", "--size", "1GiB", "-s", "dgx-h100", "--metric", "mfu",
                              "--out", str(tmp_path / "c.png")])
    assert bad.exit_code == 1 and "--metric applies to a model's scaling" in bad.output
