"""`calibrate fit` for gloo/MPI solves the library's own call cost, α, β, γ (calibrate/host_fit.py).

Oracle: points priced by the library model itself with known numbers (2 and 4 ranks, three primitives, Open MPI's
rule switching algorithms across sizes) must give those numbers back, through the CLI and the written profile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.calibrate.host_report import with_host_values
from commmodel.cli.app import app
from commmodel.collectives import collective_cost
from commmodel.collectives.libraries.gloo import scheduler_slice_s
from commmodel.hardware.models import Sourced
from commmodel.hardware.cluster import Cluster
from commmodel.io.profiles import load_system

TRUTH = {"gloo": {"call_s": 40e-6, "message_s": 150e-6, "bw_bytes_per_s": 3.1e9, "reduce_bw_bytes_per_s": 9.0e9},
         "mpi": {"call_s": 2e-6, "message_s": 1.5e-6, "bw_bytes_per_s": 6.0e9, "reduce_bw_bytes_per_s": 12.0e9}}
OPS = ("all_reduce", "all_gather", "broadcast")
SIZES = 2.0 ** np.arange(10, 23)


def _csv(path: Path, library: str, system) -> Path:
    lines = ["# commmodel measurements v1 (collectives)", "# tool: test oracle", f"# backend: {library}",
             "# system: cpu-host",
             "op,size_bytes,num_ranks,num_nodes,group,algorithm,protocol,dtype,time_s_median,time_s_p10,time_s_p90,"
             "algbw_GBps,busbw_GBps,iters,time_stat,source"]
    for n in (2, 4):
        view = Cluster.for_gpus(system, n, n).system
        for op in OPS:
            times = collective_cost(op, SIZES, view, n, n, library=library, selection="library").time_s
            lines += [f"{op},{s:.0f},{n},1,all,auto,,float32,{t:.9e},{t:.9e},{t:.9e},1,1,10,median,oracle"
                      for s, t in zip(SIZES, times)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("library", ["gloo", "mpi"])
def test_fit_recovers_the_numbers_that_made_the_points(tmp_path, library):
    truth = with_host_values(load_system("cpu-host"), library, TRUTH[library], "test: the oracle's numbers")
    out = tmp_path / "fit.yaml"
    result = CliRunner().invoke(app, ["calibrate", "fit", str(_csv(tmp_path / "m.csv", library, truth)), "--base",
                                      "cpu-host", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"solved against {library}'s own algorithms" in result.output
    fitted = load_system(str(out)).host_libraries[library]
    for name, value in TRUTH[library].items():
        assert getattr(fitted, name).value == pytest.approx(value, rel=1e-4), name
        assert getattr(fitted, name).source.startswith("calibrated: m.csv")
    _provenance_follows_the_library(load_system(str(out)), library)


def _provenance_follows_the_library(system, library):
    """The fit records the sizes it measured; a prediction for that library inside them is calibrated, beyond them
    extrapolated (a gloo-calibrated profile said "sourced" at any size), and the device tiers' provenance never
    stands in for a host library (an NCCL-calibrated profile said "calibrated" for gloo)."""
    from commmodel.collectives.provenance import prediction_provenance

    sizes = system.host_libraries[library].calibrated_sizes
    assert sizes is not None and sizes.min_bytes < sizes.max_bytes
    inside, beyond = prediction_provenance(system, [sizes.max_bytes, 256 * sizes.max_bytes], 2, library=library)
    assert (inside.kind, beyond.kind, inside.tier) == ("calibrated", "extrapolated", f"host_libraries.{library}")
    other = "mpi" if library == "gloo" else "gloo"
    assert prediction_provenance(system, [sizes.max_bytes], 2, library=other)[0].kind == "sourced"


def test_a_nccl_csv_still_takes_the_tier_fit(tmp_path):
    """Only gloo/MPI measurements on a CPU host go to the host fit; the base decides, not the file name."""
    from commmodel.calibrate.host_fit import host_library

    cpu, h100 = load_system("cpu-host"), load_system("dgx-h100")
    assert host_library({"backend": "gloo"}, cpu) == "gloo" and host_library({"backend": "mpi"}, cpu) == "mpi"
    assert host_library({"backend": "nccl"}, cpu) is None and host_library({"backend": "gloo"}, h100) is None


def test_scheduler_slice_is_the_kernels_base_slice_scaled_by_log_cores():
    """kernel/sched/fair.c: 0.70 ms × (1 + ilog2(min(cpus, 8))): 1.4 ms on 2 cores, 2.1 ms on 4, 2.8 ms from 8."""
    cpu = load_system("cpu-host")
    for cores, slice_s in ((1, 0.70e-3), (2, 1.40e-3), (4, 2.10e-3), (6, 2.10e-3), (8, 2.80e-3), (176, 2.80e-3)):
        host = cpu.model_copy(update={"host_cores": Sourced[float](value=float(cores), source="test: cores")})
        assert scheduler_slice_s(host) == pytest.approx(slice_s)
