"""Matmul micro-benchmark: layout GEMM shapes, CPU timing, matmul_efficiency written into a profile."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from commmodel.calibrate.compute import layout_shapes, matmul_efficiency, run_matmuls
from commmodel.cli.app import app
from commmodel.errors import CalibrationError
from commmodel.io.measurements import read_measurements, write_measurements
from commmodel.io.profiles import load_system

pytest.importorskip("torch")


def test_layout_shapes_megatron_split():
    # h = 4096, tp = 2, 2048 tokens: QKV 4096 -> 3·4096/2, out-proj 4096/2 -> 4096, MLP 4096 -> 4·4096/2 -> 4096.
    assert layout_shapes(4096, tp=2, seq_len=2048, micro_batch=1) == [
        ("qkv", 2048, 4096, 6144), ("attn_out", 2048, 2048, 4096),
        ("mlp_up", 2048, 4096, 8192), ("mlp_down", 2048, 8192, 4096),
    ]
    assert layout_shapes(64, tp=1, seq_len=8, micro_batch=4, ffn=96)[2] == ("mlp_up", 32, 64, 96)


@pytest.mark.parametrize("kwargs, message", [
    ({"hidden": 100, "tp": 3}, "--tp 3 must divide --hidden 100"),
    ({"hidden": 64, "tp": 0}, "--tp 0 must be ≥ 1"),
    ({"hidden": 64, "seq_len": 0}, "--seq-len 0 must be ≥ 1"),
])
def test_layout_shapes_errors(kwargs, message):
    with pytest.raises(CalibrationError, match=message):
        layout_shapes(**kwargs)


def test_cpu_matmuls_report_flops():
    rows, env = run_matmuls(layout_shapes(32, seq_len=16), "fp32", "cpu", warmup=1, iters=3)
    assert [r["kind"] for r in rows] == ["qkv", "attn_out", "mlp_up", "mlp_down"]
    for row in rows:
        flops = 2.0 * row["m"] * row["n"] * row["k"]
        assert row["tflops_median"] == pytest.approx(flops / row["time_s_median"] / 1e12)
        assert row["time_s_p10"] <= row["time_s_median"] <= row["time_s_p90"]
    assert env["device"] == "cpu" and env["dtype"] == "fp32"


def _rows(tflops, dtype="bf16"):
    return [{"kind": "qkv", "m": 1, "n": 1, "k": 1, "dtype": dtype, "device": "gpu", "tflops_median": t}
            for t in tflops]


def test_matmul_efficiency_is_best_over_peak():
    gpu = load_system("dgx-h100").gpu  # bf16 dense peak 989 TFLOP/s (H100 SXM datasheet)
    value, detail = matmul_efficiency(_rows([400.0, 794.5, 600.0]), gpu)
    assert value == pytest.approx(794.5e12 / gpu.peak_for("bf16"))  # stas00 MAMF 794.5 -> 0.803
    assert "best 794.5" in detail
    with pytest.raises(CalibrationError, match="mixes dtypes"):
        matmul_efficiency(_rows([1.0]) + _rows([1.0], "fp16"), gpu)
    with pytest.raises(CalibrationError, match="exceeds 1.5x"):
        matmul_efficiency(_rows([2000.0]), gpu)
    with pytest.raises(CalibrationError, match="no timed matmul rows"):
        matmul_efficiency([], gpu)


def test_compute_cli_then_fit_writes_matmul_efficiency(tmp_path):
    runner = CliRunner()
    compute_csv = tmp_path / "mm.csv"
    ran = runner.invoke(app, ["calibrate", "compute", "--out", str(compute_csv), "--hidden", "32", "--seq-len", "16",
                              "--dtype", "bf16", "--device", "cpu", "--iters", "2", "--warmup", "1"])
    assert ran.exit_code == 0, ran.output
    data = read_measurements(compute_csv)
    assert data.schema == "compute" and len(data.rows) == 4
    comm_csv = tmp_path / "comm.csv"
    write_measurements(comm_csv, "collectives", {"system": "dgx-h100"}, [
        {"op": "all_reduce", "size_bytes": 2**k, "num_ranks": 2, "num_nodes": 1, "group": "all", "algorithm": "auto",
         "time_s_median": 2e-5 + 2**k / 2e9} for k in range(3, 25)])
    out = tmp_path / "p.yaml"
    on_cpu = runner.invoke(app, ["calibrate", "fit", str(comm_csv), "--compute", str(compute_csv), "--out", str(out)])
    assert on_cpu.exit_code == 1 and "measured on the CPU, and h100-sxm-80gb is a GPU" in on_cpu.output
    assert not out.exists()  # CPU timings never become an H100's matmul efficiency (0.81 -> 0.01 before)
    # the same rows as a GPU run writes them (its device name): the fit path under test
    compute_csv.write_text(compute_csv.read_text().replace(",cpu,", ",NVIDIA H100 80GB HBM3,"))
    fitted = runner.invoke(app, ["calibrate", "fit", str(comm_csv), "--compute", str(compute_csv), "--out", str(out)])
    assert fitted.exit_code == 0, fitted.output
    raw = yaml.safe_load(out.read_text())
    assert raw["gpu"]["base"] == "h100-sxm-80gb"
    system = load_system(str(out))
    best = max(r["tflops_median"] for r in data.rows) * 1e12
    assert system.gpu.matmul_efficiency.value == pytest.approx(best / system.gpu.peak_for("bf16"), rel=1e-3)
    assert system.gpu.matmul_efficiency.source.startswith("calibrated: mm.csv, ")
    wrong = runner.invoke(app, ["calibrate", "fit", str(compute_csv), "--base", "dgx-h100"])
    assert wrong.exit_code == 1 and "pass it with --compute" in wrong.output


def test_fp8_on_the_host_is_refused_in_one_line_before_torch_times_anything(tmp_path):
    """FP8 GEMMs need FP8 tensor cores (sm_89+): on --device cpu the refusal comes before the CSV is made."""
    out = tmp_path / "fp8.csv"
    ran = CliRunner().invoke(app, ["calibrate", "compute", "--out", str(out), "--hidden", "32", "--seq-len", "16",
                                   "--dtype", "fp8", "--device", "cpu"])
    assert ran.exit_code == 1 and ran.output.count("\n") == 1
    assert "torch._scaled_mm, which needs a CUDA GPU of compute capability 8.9" in ran.output
    assert not out.exists()


def test_fp8_device_and_shape_rules():
    from commmodel.calibrate.compute import check_fp8_device

    shapes = layout_shapes(64, seq_len=16)
    check_fp8_device("fp8", "cuda", shapes, (9, 0), "NVIDIA H100 80GB HBM3")  # Hopper, every k and n a multiple of 16
    check_fp8_device("bf16", "cpu", layout_shapes(40, seq_len=3))  # other dtypes: no rule
    with pytest.raises(CalibrationError, match="sm_80, without FP8 tensor cores"):
        check_fp8_device("fp8", "cuda", shapes, (8, 0), "NVIDIA A100-SXM4-80GB")
    # hidden 40: the QKV GEMM's k = 40 is not a multiple of 16 (torch._scaled_mm would raise)
    with pytest.raises(CalibrationError, match=r"the qkv GEMM is 16 x 40 · 40 x 120"):
        check_fp8_device("fp8", "cuda", layout_shapes(40, seq_len=16), (9, 0))


def test_an_fp8_compute_csv_fits_matmul_efficiency_fp8_and_leaves_bf16s_alone(tmp_path):
    """A device's FP8 sweep writes gpu.matmul_efficiency_fp8 (MAMF over the 1979 TFLOP/s dense FP8 peak of an H100
    SXM); the bf16 field keeps the catalogue's value. 1403 TFLOP/s is stas00's FP8 MAMF (0.709 of the peak)."""
    compute_csv = tmp_path / "fp8.csv"
    rows = [{**r, "time_s_median": 2.0 / (r["tflops_median"] * 1e12), "iters": 10, "source": "commmodel calibrate "
             "compute"} for r in _rows([1100.0, 1403.0, 1250.0], "fp8")]  # 1 x 1 x 1 GEMMs: 2 FLOPs each
    write_measurements(compute_csv, "compute", {"device": "NVIDIA H100 80GB HBM3", "dtype": "fp8"}, rows)
    comm_csv = tmp_path / "comm.csv"
    write_measurements(comm_csv, "collectives", {"system": "dgx-h100"}, [
        {"op": "all_reduce", "size_bytes": 2**k, "num_ranks": 2, "num_nodes": 1, "group": "all", "algorithm": "auto",
         "time_s_median": 2e-5 + 2**k / 2e9} for k in range(3, 25)])
    out = tmp_path / "p.yaml"
    fitted = CliRunner().invoke(app, ["calibrate", "fit", str(comm_csv), "--compute", str(compute_csv),
                                      "--out", str(out)])
    assert fitted.exit_code == 0, fitted.output
    assert "gpu.matmul_efficiency_fp8" in fitted.output
    system, base = load_system(str(out)), load_system("dgx-h100")
    assert system.gpu.matmul_efficiency_fp8.value == pytest.approx(1403e12 / base.gpu.peak_for("fp8"), rel=1e-4)
    assert system.gpu.matmul_efficiency_fp8.value == pytest.approx(0.709, abs=0.001)
    assert system.gpu.matmul_efficiency_fp8.source.startswith("calibrated: fp8.csv, ")
    assert system.gpu.matmul_efficiency == base.gpu.matmul_efficiency
    assert system.gpu.matmul_efficiency_for("fp8") == system.gpu.matmul_efficiency_fp8.value


def test_compute_keeps_each_row_on_interrupt_and_resume_measures_only_the_rest(tmp_path, monkeypatch):
    """Rows were written only when the whole sweep ended, so Ctrl-C lost every GEMM measured (bad-input audit); and
    --resume dropped every new compute row as a duplicate (its point key read the collectives' columns)."""
    import commmodel.calibrate.compute as compute
    from typer.testing import CliRunner

    from commmodel.cli.app import app
    from commmodel.io.measurements import read_measurements

    env = {"tool": "commmodel calibrate compute", "torch": "x", "device": "cpu", "dtype": "fp32", "cuda": "",
           "warmup": 0, "iters": 1}
    seen: list[list] = []

    def fake(shapes, dtype, device, warmup, iters, start=None, stop_after=2):
        seen.append(list(shapes))
        emit = start(env)
        rows = []
        for kind, m, k, n in shapes:
            if len(rows) == stop_after:
                raise KeyboardInterrupt
            rows.append({"kind": kind, "m": m, "n": n, "k": k, "dtype": dtype, "device": "cpu", "time_s_median": 1e-3,
                         "time_s_p10": 1e-3, "time_s_p90": 1e-3, "tflops_median": 1.0, "iters": 1, "source": "t"})
            emit(rows[-1])
        return rows, env

    monkeypatch.setattr(compute, "run_matmuls", fake)
    out = tmp_path / "c.csv"
    args = ["calibrate", "compute", "-o", str(out), "--hidden", "64", "--seq-len", "64", "--device", "cpu"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 1 and "interrupted: 2 row(s) kept" in first.stderr and "--resume" in first.stderr
    assert len(read_measurements(out).rows) == 2
    again = CliRunner().invoke(app, [*args, "--resume"])
    assert again.exit_code == 0, again.output
    assert [s[0] for s in seen[1]] == [s[0] for s in seen[0][2:]]  # only the GEMMs not yet in the file
    assert len(read_measurements(out).rows) == len(seen[0])
