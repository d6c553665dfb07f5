"""Where this process sits in the job (torchrun or srun) and the environment block it records.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node index),
MASTER_ADDR and MASTER_PORT. Under ``srun`` without torchrun, SLURM_PROCID, SLURM_NTASKS,
SLURM_LOCALID and SLURM_NODEID play those roles; MASTER_ADDR/MASTER_PORT must be exported by the
batch script (see ``examples/slurm_multi_node.sbatch``).
"""

from __future__ import annotations

import datetime
import os
import socket
from dataclasses import dataclass

from commmodel.errors import CalibrationError

LAUNCH_HINT = ("launch it with torchrun, e.g. "
               "`torchrun --nproc_per_node 2 -m commmodel calibrate run --out bench.csv`, or srun")


@dataclass(frozen=True)
class Placement:
    """This process's place in the job."""

    rank: int
    """Global rank."""
    world_size: int
    """Processes in the job."""
    local_rank: int
    """Index on this node (selects the GPU)."""
    node_key: str
    """Identifies the node: torchrun's GROUP_RANK, SLURM_NODEID, or the host name."""
    launcher: str
    """"torchrun", "srun" or "env"."""


def _int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise CalibrationError(f"environment variable {name}={value!r} is not a whole number; {LAUNCH_HINT}") from None


NCCL_ALGO_NAMES = ("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT")
"""What NCCL_ALGO may name (NCCL docs, Environment Variables, NCCL_ALGO: a comma-separated list, ``^`` excludes)."""
NCCL_PROTO_NAMES = ("LL", "LL128", "Simple")
"""What NCCL_PROTO may name (NCCL docs, Environment Variables, NCCL_PROTO; same list syntax)."""


def check_nccl_names(algo: str | None, proto: str | None) -> None:
    """One line for an ``--algo``/``--proto`` naming what NCCL does not know (NCCL would ignore it with a warning and
    the run would measure its own choice under a forced label), case as NCCL takes it: any."""
    for flag, value, known in (("--algo", algo, NCCL_ALGO_NAMES), ("--proto", proto, NCCL_PROTO_NAMES)):
        names = [n.strip() for n in (value or "").lstrip("^").split(",")]
        unknown = [n for n in names if value and n.lower() not in {k.lower() for k in known}]
        if unknown:
            raise CalibrationError(f"{flag} {value!r}: unknown {', '.join(map(repr, unknown))}; NCCL knows "
                                   f"{', '.join(known)} (comma-separated, or ^ to exclude)")


def check_launched(backend: str) -> None:
    """The launcher check of :func:`placement`, torch-free, for a backend that needs one (all but MPI under mpirun)."""
    from commmodel.calibrate.mpi_dist import under_mpirun

    if backend != "mpi" and not (backend == "auto" and under_mpirun()):
        placement()


def placement() -> Placement:
    """Read the launcher's variables; under srun, export RANK/WORLD_SIZE/LOCAL_RANK for ``init_process_group``."""
    host = socket.gethostname()
    if _int("RANK") is not None and _int("WORLD_SIZE") is not None:
        launcher = "torchrun" if os.environ.get("TORCHELASTIC_RUN_ID") else "env"
        node = os.environ.get("GROUP_RANK") or os.environ.get("SLURM_NODEID") or host
        return Placement(_int("RANK"), _int("WORLD_SIZE"), _int("LOCAL_RANK") or 0, f"node{node}", launcher)
    if _int("SLURM_PROCID") is not None and _int("SLURM_NTASKS") is not None:
        if not os.environ.get("MASTER_ADDR") or not os.environ.get("MASTER_PORT"):
            raise CalibrationError(
                "running under srun but MASTER_ADDR/MASTER_PORT are not set; export them in the batch script "
                "(see examples/slurm_multi_node.sbatch)"
            )
        rank, world, local = _int("SLURM_PROCID"), _int("SLURM_NTASKS"), _int("SLURM_LOCALID") or 0
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local))
        return Placement(rank, world, local, f"node{os.environ.get('SLURM_NODEID', host)}", "srun")
    raise CalibrationError(f"`calibrate run` is a distributed benchmark and found no RANK/WORLD_SIZE; {LAUNCH_HINT}")


def environment_block(torch, backend: str, world_size: int, node_keys: list[str], hostnames: list[str],
                      devices: list[str], extra: dict[str, object]) -> dict[str, object]:
    """The ``# key: value`` block written on top of the results CSV."""
    from commmodel import __version__

    nccl = ""
    if backend == "nccl":
        try:
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001 - a version string is informative only
            nccl = "unknown"
    counts: dict[str, int] = {}
    for name in devices:
        counts[name] = counts.get(name, 0) + 1
    env: dict[str, object] = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tool": f"commmodel {__version__} calibrate run",
        "torch": torch.__version__,
        "backend": backend,
        "nccl_version": nccl,
        "cuda": torch.version.cuda or "",
        "devices": ", ".join(f"{c}x {n}" for n, c in counts.items()),
        "world_size": world_size,
        "num_nodes": len(set(node_keys)),
        "hostnames": len(set(hostnames)),
        "NCCL_ALGO": os.environ.get("NCCL_ALGO", ""),
        "NCCL_PROTO": os.environ.get("NCCL_PROTO", ""),
    }
    env.update(extra)
    return env
