"""The MPI backend of ``calibrate run``: mpi4py behind the small part of ``torch.distributed`` the sweep uses.

The sweep (:mod:`.bench`), the primitives (:mod:`.bench_ops`) and the CSV writer stay the same for every
backend; this adapter answers the calls they make — ``all_reduce``, ``all_gather_single``,
``reduce_scatter_single``, ``all_to_all_single``, ``broadcast``, ``reduce``, ``batch_isend_irecv``,
``barrier``, ``new_group`` and the two object collectives — with the matching MPI call on the CPU tensor's
memory (``tensor.numpy()`` shares it: no copy). Ranks in calls are global, as in torch; a sub-group
translates them to its own communicator's ranks.

Launch: ``mpirun -np N python -m commmodel calibrate run --backend mpi --out bench.csv``. The MPI library
chooses its own algorithm per call (Open MPI ``coll/tuned``, MPICH's thresholds), as applications see it.
mpi4py is imported only here and only when the backend is mpi (``pip install 'commmodel[mpi]'``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from commmodel.calibrate.launch import Placement
from commmodel.errors import CalibrationError

MPI_DTYPES = ("float32",)
"""Element types the MPI backend measures: MPI has no predefined 16-bit float type (MPI-4.1 §3.2.2) and NumPy no
bfloat16, so a float16/bfloat16 reduction would need a user-defined op, which measures Python, not MPI."""


def import_mpi() -> Any:
    """mpi4py's ``MPI`` module, or a one-line error saying how to get it."""
    try:
        from mpi4py import MPI
    except ImportError as err:
        raise CalibrationError(f"--backend mpi needs mpi4py and an MPI library ({err}); "
                               "`pip install 'commmodel[mpi]'` with Open MPI or MPICH installed, "
                               "then launch with `mpirun -np 2 python -m commmodel calibrate run --backend mpi ...`"
                               ) from None
    return MPI


def under_mpirun() -> bool:
    """Whether an MPI launcher (Open MPI's mpirun, MPICH/Hydra, Slurm's PMI) started this process."""
    return any(os.environ.get(name) for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def mpi_placement(mpi: Any) -> Placement:
    """This process's place from MPI itself: the rank, the size, the node (processor name) and its index there."""
    comm = mpi.COMM_WORLD
    node_comm = comm.Split_type(mpi.COMM_TYPE_SHARED)
    local = node_comm.Get_rank()
    node_comm.Free()
    return Placement(comm.Get_rank(), comm.Get_size(), local, f"node-{mpi.Get_processor_name()}", "mpirun")


def mpi_versions(mpi: Any) -> dict[str, str]:
    """The environment block's MPI lines: the library's own version string and mpi4py's."""
    import mpi4py

    library = " ".join(mpi.Get_library_version().replace("\0", " ").split())[:120]  # Open MPI ends it with NUL
    major, minor = mpi.Get_version()
    return {"mpi_library": library, "mpi_standard": f"{major}.{minor}", "mpi4py": mpi4py.__version__}


@dataclass(frozen=True)
class _Group:
    comm: Any
    """The sub-group's communicator."""
    ranks: tuple[int, ...]
    """Its members' global ranks, in order."""


@dataclass(frozen=True)
class P2POp:
    """torch.distributed.P2POp's shape: (isend or irecv, tensor, global peer rank, group)."""

    op: Any
    tensor: Any
    peer: int
    group: Any = None


class ReduceOp:
    """The two reductions the sweep uses."""

    SUM = "sum"
    MAX = "max"


class MpiDist:
    """``torch.distributed``'s calls the sweep makes, answered by mpi4py on CPU tensors."""

    ReduceOp = ReduceOp
    P2POp = P2POp

    def __init__(self, mpi: Any) -> None:
        self.mpi = mpi
        self.world = mpi.COMM_WORLD
        self._ops = {ReduceOp.SUM: mpi.SUM, ReduceOp.MAX: mpi.MAX}

    def _comm(self, group: _Group | None) -> Any:
        return self.world if group is None else group.comm

    @staticmethod
    def _local(group: _Group | None, rank: int) -> int:
        return rank if group is None else group.ranks.index(rank)

    def new_group(self, ranks: list[int]) -> _Group:
        """A communicator of ``ranks`` (collective over the world, like torch's ``new_group``)."""
        members = tuple(ranks)
        group = self.world.group.Incl(list(members))
        comm = self.world.Create_group(group)
        group.Free()
        return _Group(comm, members)

    def barrier(self, group: _Group | None = None) -> None:
        self._comm(group).Barrier()

    def all_gather_object(self, out: list, obj: Any, group: _Group | None = None) -> None:
        out[:] = self._comm(group).allgather(obj)

    def broadcast_object_list(self, objects: list, src: int = 0, group: _Group | None = None) -> None:
        objects[:] = self._comm(group).bcast(objects, root=self._local(group, src))

    def all_reduce(self, tensor: Any, op: str = ReduceOp.SUM, group: _Group | None = None) -> None:
        self._comm(group).Allreduce(self.mpi.IN_PLACE, tensor.numpy(), op=self._ops[op])

    def all_gather_single(self, output: Any, input: Any, group: _Group | None = None) -> None:  # noqa: A002
        self._comm(group).Allgather(input.numpy(), output.numpy())

    def reduce_scatter_single(self, output: Any, input: Any, group: _Group | None = None) -> None:  # noqa: A002
        self._comm(group).Reduce_scatter_block(input.numpy(), output.numpy(), op=self.mpi.SUM)

    def all_to_all_single(self, output: Any, input: Any, group: _Group | None = None) -> None:  # noqa: A002
        self._comm(group).Alltoall(input.numpy(), output.numpy())

    def broadcast(self, tensor: Any, src: int, group: _Group | None = None) -> None:
        self._comm(group).Bcast(tensor.numpy(), root=self._local(group, src))

    def reduce(self, tensor: Any, dst: int, group: _Group | None = None) -> None:
        comm, root = self._comm(group), self._local(group, dst)
        buf = tensor.numpy()
        if comm.Get_rank() == root:
            comm.Reduce(self.mpi.IN_PLACE, buf, op=self.mpi.SUM, root=root)
        else:
            comm.Reduce(buf, None, op=self.mpi.SUM, root=root)

    def isend(self, tensor: Any, peer: int, group: _Group | None = None) -> Any:
        return self._comm(group).Isend(tensor.numpy(), dest=self._local(group, peer))

    def irecv(self, tensor: Any, peer: int, group: _Group | None = None) -> Any:
        return self._comm(group).Irecv(tensor.numpy(), source=self._local(group, peer))

    def batch_isend_irecv(self, ops: list[P2POp]) -> list[Any]:
        """Post every send and receive, then hand back requests with torch's ``wait()``."""
        return [_Request(p.op(p.tensor, p.peer, p.group)) for p in ops]


@dataclass(frozen=True)
class _Request:
    request: Any

    def wait(self) -> None:
        self.request.Wait()
