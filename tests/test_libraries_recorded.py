"""The uncalibrated host-library model against recorded sweeps of this project's development VM (issue 14 target:
within ×2, median over sizes ≥ 64 KiB).

Real artefacts of ``calibrate run`` on the 2-vCPU development VM (env block on top of each file): gloo on 2 ranks
(2026-11-23, 30 iterations) and 4 ranks (2026-11-24, 10 iterations: more ranks than cores), Open MPI 4.1 through
mpi4py on 2 and 4 ranks (2026-11-24, 20 iterations; and 2026-11-27, 10 iterations, the first sweep of
``benchmarks/library_accuracy.py --keep``). The model is ``cpu-host`` with the VM's 2 cores and 32 MiB L3
(``host_cores``, ``host_llc_bytes``: facts of the machine); none of its constants was fitted to these files (they
come from ``benchmarks/host_microbench.py``, the kernel's scheduler slice and the libraries' sources). The machine is
shared, so single points scatter ±50%; the test holds the median ratio per (file, primitive).

The same VM measured Open MPI 1.3-2.1× slower on 2026-11-24 than on 2026-11-27 at the same sizes (median per
primitive over 64 KiB-4 MiB; p10 ≈ median within each sweep, so not stalls): no single uncalibrated model is
within ×2 of both days for the exchanges. The model prices the copies at the cache-resident rate microbenchmarked
on 2026-11-27 (collectives/libraries/mpi.py), so it is held within ×2 of that day's sweeps; on the older ones it is
0.35-0.79, and the test asserts that this miss is the day's drift.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.hardware.models import Sourced
from commmodel.hardware.cluster import Cluster
from commmodel.io.measurements import read_measurements
from commmodel.io.profiles import load_system

FIXTURES = Path(__file__).parent / "fixtures" / "calibrate"
FILES = ("gloo_2ranks_devvm.csv", "gloo_4ranks_devvm.csv", "mpi_2ranks_devvm_1127.csv", "mpi_4ranks_devvm_1127.csv")
DRIFTED = ("mpi_2ranks_devvm.csv", "mpi_4ranks_devvm.csv")
"""Open MPI sweeps of 2026-11-24, when the VM ran 1.3-2.1× slower than in the 2026-11-27 ones."""
OPS = ("all_reduce", "all_gather", "broadcast")
DEV_VM_LLC_BYTES = 32 * 2**20
"""The development VM's L3 (lscpu; /sys/devices/system/cpu/cpu0/cache/index3/size = 32768K)."""


def _ratio(name: str, op: str) -> float:
    data = read_measurements(FIXTURES / name)
    library, n = data.env["backend"], int(data.env["world_size"])
    dev_vm = load_system("cpu-host").model_copy(update={
        "host_cores": Sourced[float](value=2.0, source="the development VM: 2 vCPU (os.cpu_count())"),
        "host_llc_bytes": Sourced[float](value=DEV_VM_LLC_BYTES, source="the development VM: 32 MiB L3 (lscpu)")})
    rows = [r for r in data.rows if r["op"] == op and r["size_bytes"] >= 64 * 2**10]
    sizes = np.array([r["size_bytes"] for r in rows], dtype=float)
    measured = np.array([r["time_s_median"] for r in rows])
    view = Cluster.for_gpus(dev_vm, n, n).system
    model = collective_cost(op, sizes, view, n, n, library=library, selection="library").time_s
    return float(np.median(model / measured))


def _times(name: str, op: str) -> dict[float, float]:
    return {r["size_bytes"]: r["time_s_median"] for r in read_measurements(FIXTURES / name).rows
            if r["op"] == op and 64 * 2**10 <= r["size_bytes"] <= 4 * 2**20}


@pytest.fixture(scope="module")
def ratios() -> dict[tuple[str, str], float]:
    return {(name, op): _ratio(name, op) for name in FILES + DRIFTED for op in OPS}


def test_the_files_are_what_they_say():
    for name in FILES + DRIFTED:
        env = read_measurements(FIXTURES / name).env
        assert name.startswith(env["backend"]) and f"_{env['world_size']}ranks_" in name


def test_uncalibrated_host_model_within_2x_of_recorded_sweeps(ratios):
    held = {k: v for k, v in ratios.items() if k[0] in FILES}
    outside = {k: round(v, 2) for k, v in held.items() if not 0.5 <= v <= 2.0}
    assert len(outside) <= 1 and all(0.4 <= v <= 2.5 for v in outside.values()), outside
    assert 0.5 <= float(np.median(list(held.values()))) <= 2.0, held


def test_the_older_mpi_sweeps_ran_slower_and_that_drift_is_the_models_miss(ratios):
    """Model/measured on the 2026-11-24 sweeps is 0.35-0.57 for 4 ranks and 0.42-0.79 for 2; times the day's drift
    (older/newer time, median over the sizes both measured) it is the newer ratio within 25%."""
    for old, new in zip(DRIFTED, FILES[2:]):
        for op in OPS:
            before, after = _times(old, op), _times(new, op)
            drift = float(np.median([before[s] / after[s] for s in after]))
            assert 1.25 <= drift <= 2.2, (old, op, drift)
            assert ratios[(old, op)] * drift == pytest.approx(ratios[(new, op)], rel=0.25), (old, op, drift)
