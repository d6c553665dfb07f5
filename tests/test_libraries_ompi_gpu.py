"""Open MPI on GPU buffers: reductions staged through host memory (coll/cuda), the rest CUDA-aware.

Source: open-mpi/ompi@ea8f4d03 (v4.1.8) ompi/mca/coll/cuda/coll_cuda_allreduce.c and
coll_cuda_reduce_scatter_block.c copy each device buffer whole into a malloc'd host buffer, run coll/tuned's host
algorithm (reduction on the CPU) and copy the result back; all-gather and broadcast are not intercepted.
"""

import numpy as np
import pytest

from commmodel.collectives.libraries import get_library, host_library_cost, host_transport
from commmodel.collectives.libraries.host import PCIE5_STAGING_BW_BYTES_PER_S, staging_bw_bytes_per_s
from commmodel.collectives.libraries.mpi import (OMPI_STAGED_OPS, SHM_BW_BYTES_PER_S, SHM_RENDEZVOUS_S,
                                                 ompi_stages)
from commmodel.io.profiles import load_system

S_BYTES = float(2**26)  # 64 MiB
HOST_MEMORY_BW_BYTES_PER_S = 614.4e9  # gloo.DEFAULT_HOST_MEMORY_BW_BYTES_PER_S: dgx-h100 states none
REDUCE_BW_BYTES_PER_S = HOST_MEMORY_BW_BYTES_PER_S / 8 / 3  # one rank's share of 8, two reads and one write
H100_STAGING_BW_BYTES_PER_S = 64e9 * 55.4 / 63  # the H100 SXM's PCIe Gen5 x16 host link at nvbandwidth's 88%


def _cost(library: str, op: str, system: str = "dgx-h100", ranks: float = 2.0) -> tuple[float, float, str]:
    lat, bw, _, names = host_library_cost(get_library(library), op, np.asarray(S_BYTES), load_system(system),
                                          np.asarray(ranks), np.asarray(8.0))
    return float(lat), float(bw), str(names)


def test_open_mpi_all_reduce_on_gpus_is_staged_reduced_on_the_cpu_and_copied_back() -> None:
    """2 ranks of one H100 node, 64 MiB: Rabenseifner (Open MPI's choice above 256 KiB at 2-4 ranks) over shared
    memory on the host copies, = 2 rendezvous messages + S streamed at the shm rate + S/2 reduced at the rank's
    host memory share + 2·S of copies in and out over PCIe."""
    lat, bw, name = _cost("mpi", "all_reduce")
    assert name == "rabenseifner"
    assert lat == pytest.approx(2 * SHM_RENDEZVOUS_S)
    assert bw == pytest.approx(S_BYTES / SHM_BW_BYTES_PER_S + S_BYTES / 2 / REDUCE_BW_BYTES_PER_S
                               + 2 * S_BYTES / H100_STAGING_BW_BYTES_PER_S, rel=1e-9)
    assert bw == pytest.approx(15.86e-3, rel=1e-3)  # 4.2 GB/s of busbw where NCCL gives hundreds


def test_open_mpi_reduce_scatter_on_gpus_is_staged_too() -> None:
    """Ring reduce-scatter on the host copies: S/2 streamed and reduced, 2·S staged."""
    _, bw, name = _cost("mpi", "reduce_scatter")
    assert name == "ring"
    assert bw == pytest.approx(S_BYTES / 2 / SHM_BW_BYTES_PER_S + S_BYTES / 2 / REDUCE_BW_BYTES_PER_S
                               + 2 * S_BYTES / H100_STAGING_BW_BYTES_PER_S, rel=1e-9)


@pytest.mark.parametrize("op", ["all_gather", "broadcast"])
def test_open_mpis_other_collectives_stay_on_the_gpu_buffers(op: str) -> None:
    """Not intercepted by coll/cuda: point-to-point over CUDA IPC on NVLink, no staging (> 100 GB/s of the
    64 MiB moved, where the staged path's PCIe copies alone would cap it at 27.7 GB/s)."""
    _, bw, _ = _cost("mpi", op)
    assert S_BYTES / 2 / bw > 100e9
    assert not ompi_stages(load_system("dgx-h100"), op)


def test_staging_is_open_mpis_gpu_rule_only() -> None:
    """CPU hosts have nothing to stage (the path is unchanged); MPICH is priced CUDA-aware for every collective."""
    assert OMPI_STAGED_OPS == {"all_reduce", "reduce", "reduce_scatter"}
    cpu = load_system("cpu-host")
    assert not ompi_stages(cpu, "all_reduce")
    spans, per_node = np.asarray(False), np.asarray(2.0)
    assert host_transport(get_library("mpi"), cpu, spans, per_node, "all_reduce") == host_transport(
        get_library("mpi"), cpu, spans, per_node)
    _, mpich_bw, _ = _cost("mpich", "all_reduce")
    _, ompi_bw, _ = _cost("mpi", "all_reduce")
    assert mpich_bw < ompi_bw / 20


@pytest.mark.parametrize(("system", "rate_bytes_per_s"), [
    ("dgx-a100", 32e9 * 55.4 / 63),   # PCIe Gen4 x16: 28.1 GB/s
    ("dgx-h100", 64e9 * 55.4 / 63),   # PCIe Gen5 x16: 56.3 GB/s
    ("gb200-nvl72", 225e9 * 55.4 / 63),  # each GPU's share of the superchip's NVLink-C2C
])
def test_staged_copies_run_at_the_gpus_own_host_link(system: str, rate_bytes_per_s: float) -> None:
    """gloo's and Open MPI's staging copies move at the system's GPU-host link × the 88% a pinned copy reached on
    PCIe Gen5 (nvbandwidth, 55.4 of 63 GB/s), not at one Gen5 figure for every GPU."""
    gpu_system = load_system(system)
    assert staging_bw_bytes_per_s(gpu_system) == pytest.approx(rate_bytes_per_s)
    # a GPU that states no host link (and a system that adds none) stages at the measured Gen5 copy
    unstated = gpu_system.model_copy(update={"host_link_bw_bytes_per_s": None, "gpu": gpu_system.gpu.model_copy(
        update={"host_link_bw_bytes_per_s": None})})
    assert unstated.host_link() is None
    assert staging_bw_bytes_per_s(unstated) == PCIE5_STAGING_BW_BYTES_PER_S == pytest.approx(55.4e9)


def test_collective_says_how_a_host_library_moves_gpu_buffers() -> None:
    """collective and sweep print (and --json carries) the buffer path the figure includes: staged with the copy
    rate for gloo and for Open MPI's reductions, CUDA-aware for Open MPI's all-gather, nothing for NCCL or CPU ranks."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    def run(*args: str) -> dict:
        result = CliRunner().invoke(app, ["collective", *args, "--size", "64MiB", "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    staged = run("all_reduce", "--system", "dgx-a100", "--gpus", "8", "--library", "mpi")["buffer_path"]
    assert "staged through host memory" in staged and "28.1 GB/s" in staged and staged.endswith("summed on the CPU")
    gathered = run("all_gather", "--system", "dgx-h100", "--gpus", "8", "--library", "gloo")["buffer_path"]
    assert "56.3 GB/s" in gathered and "summed" not in gathered
    assert run("all_gather", "--system", "dgx-h100", "--gpus", "8", "--library", "mpi")["buffer_path"].startswith(
        "CUDA-aware")
    assert run("all_reduce", "--system", "dgx-h100", "--gpus", "8")["buffer_path"] is None
    assert run("all_reduce", "--system", "cpu-host", "--gpus", "4", "--library", "mpi")["buffer_path"] is None
    human = CliRunner().invoke(app, ["collective", "all_reduce", "--system", "dgx-h100", "--gpus", "8", "--size",
                                     "64MiB", "--library", "mpi"])
    assert "\nbuffers: GPU buffers staged through host memory" in human.output
