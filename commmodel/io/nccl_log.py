"""Reading ``NCCL_DEBUG=INFO`` logs: what NCCL says about the job's hardware at init.

Lines look like ``host:pid:tid [dev] NCCL INFO <message>`` (NCCL src/debug.cc); the messages read here
are printed by NCCL 2.1x-2.2x's init code (src/init.cc, src/transport/net_ib.cc, net_socket.cc):

- ``NCCL version 2.18.3+cuda12.2``; RCCL: ``RCCL version : 2.27.7-HEAD:0d2c4fd``
- ``comm 0x... rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0`` (older: ``nranks 16``)
- ``NVLS multicast support is available on dev 0`` / ``... is not available on dev 4``
- ``Using network IB`` (``IBext``, ``Socket``, ``AWS Libfabric``...: the NET plugin)
- ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ...`` and ``NET/Socket : Using [0]eth0:10.0.0.1<0>``
- aws-ofi-nccl: ``NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)`` (src/nccl_ofi_net.cpp
  @ 2daf7d3; older releases omit the fabric)
- ``32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer``
  and ``Channel 00/32 : 0 1 2 ...`` (the ring channels)

Each fact keeps the line number it came from. A file without one NCCL line is an error naming it.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from commmodel.errors import ProfileError
from commmodel.io.yaml_read import open_user_file, read_failure

MAX_LOG_BYTES = 256 * 2**20
"""Read at most this much of a log: NCCL's init lines come first, and a job log can be many GB."""


@dataclass(frozen=True)
class Fact:
    """A value read from the log and the 1-based line it came from."""

    value: object
    line: int


@dataclass
class NcclLog:
    """What one INFO log states (each fact the first time it appears, NICs as listed by the NET line)."""

    path: Path
    version: Fact | None = None
    library: Fact | None = None
    """"NCCL" or "RCCL" (RCCL logs ``NCCL INFO RCCL version : 2.27.7-HEAD:0d2c4fd``)."""
    nranks: Fact | None = None
    nnodes: Fact | None = None
    local_ranks: Fact | None = None
    nvls: Fact | None = None
    network: Fact | None = None
    nics: Fact | None = None
    """A list of (name, transport) pairs: ("mlx5_0:1", "IB"), ("mlx5_bond_1:1", "RoCE"), ("eth0", "Socket")."""
    channels: Fact | None = None
    nvls_channels: Fact | None = None
    nccl_lines: int = 0
    notes: list[str] = field(default_factory=list)
    comm_sizes: set[int] = field(default_factory=set)
    """nRanks of every communicator the log opens (the facts keep the largest)."""
    other_nics: dict[tuple, int] = field(default_factory=dict)
    """NET port lists that differ from the first (a log of several hosts or NCCL versions), with their first line."""


_VERSION = re.compile(r"\b([NR])CCL version\s*:?\s*([0-9]+\.[0-9]+\.[0-9]+\S*)")
_RANKS = re.compile(r"\bn[Rr]anks (\d+)(?: nNodes (\d+) localRanks (\d+))?")
_NVLS = re.compile(r"NVLS multicast support is (not )?available")
_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_NET_IB = re.compile(r"NET/IB\s*: Using (.*?)(?:;|$)")
_NET_SOCKET = re.compile(r"NET/Socket\s*: Using (.*?)$")
_NET_OFI = re.compile(r"NET/OFI Selected [Pp]rovider is (\w[\w-]*).*?\(found (\d+) nics?\)")
_IB_PORT = re.compile(r"\[\d+\](\S+?:\d+)/(IB|RoCE)")
_SOCKET_PORT = re.compile(r"\[\d+\]([^:\s]+):")
_COLL_CHANNELS = re.compile(r"(\d+) coll channels,.*?(\d+) nvls channels")
_RING_CHANNEL = re.compile(r"Channel \d+/(\d+) :(?:\s+\d+)+\s*$")
"""A ring line of src/graph/rings.cc ("Channel %02d/%02d :" then the ranks); not a connection line
("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", whose /0 is a connection index)."""


def _nics(line: str) -> list[tuple[str, str]] | None:
    ofi = _NET_OFI.search(line)
    if ofi:  # aws-ofi-nccl names no port, only how many NICs the provider found
        return [(f"{ofi.group(1)}#{i}", "OFI-" + ofi.group(1)) for i in range(int(ofi.group(2)))] or None
    ib = _NET_IB.search(line)
    if ib:
        return [(name, transport) for name, transport in _IB_PORT.findall(ib.group(1))] or None
    sock = _NET_SOCKET.search(line)
    if sock:
        return [(name, "Socket") for name in _SOCKET_PORT.findall(sock.group(1))] or None
    return None


def _first(log: NcclLog, name: str, value: object, number: int) -> None:
    if getattr(log, name) is None:
        setattr(log, name, Fact(value, number))


def _largest_comm(log: NcclLog, match: re.Match, number: int) -> None:
    """Keep the ranks of the largest communicator: a job's first communicator may be a TP or PP group, whose
    localRanks is not the GPUs of the node."""
    nranks = int(match.group(1))
    log.comm_sizes.add(nranks)
    if log.nranks is not None and nranks <= log.nranks.value:  # type: ignore[operator]
        if log.local_ranks is None and match.group(2) and nranks == log.nranks.value:
            log.nnodes, log.local_ranks = Fact(int(match.group(2)), number), Fact(int(match.group(3)), number)
        return
    log.nranks = Fact(nranks, number)
    if match.group(2):
        log.nnodes, log.local_ranks = Fact(int(match.group(2)), number), Fact(int(match.group(3)), number)


def _read_line(log: NcclLog, line: str, number: int) -> None:
    if (match := _VERSION.search(line)):
        _first(log, "version", match.group(2), number)
        _first(log, "library", f"{match.group(1)}CCL", number)
    if (match := _RANKS.search(line)):
        _largest_comm(log, match, number)
    if (match := _NVLS.search(line)):
        _first(log, "nvls", match.group(1) is None, number)
    if (match := _NETWORK.search(line)):
        _first(log, "network", match.group(1), number)
    if (nics := _nics(line)) is not None:
        _first(log, "nics", nics, number)
        if nics != log.nics.value:  # type: ignore[union-attr]
            log.other_nics.setdefault(tuple(nics), number)
    if (match := _COLL_CHANNELS.search(line)):
        _first(log, "channels", int(match.group(1)), number)
        _first(log, "nvls_channels", int(match.group(2)), number)
    elif (match := _RING_CHANNEL.search(line)):
        _first(log, "channels", int(match.group(1)), number)


def read_nccl_log(path: Path) -> NcclLog:
    """Read the facts of one ``NCCL_DEBUG=INFO`` log; a log with no NCCL line is a :class:`ProfileError`."""
    path = Path(path)
    log = NcclLog(path)
    try:
        with io.TextIOWrapper(open_user_file(path), encoding="utf-8", errors="replace") as handle:
            read = 0
            for number, line in enumerate(handle, start=1):
                read += len(line)
                if read > MAX_LOG_BYTES:
                    log.notes.append(f"read the first {MAX_LOG_BYTES // 2**20} MiB only")
                    break
                if "NCCL" not in line:
                    continue
                log.nccl_lines += 1
                _read_line(log, line, number)
    except OSError as err:
        raise read_failure(path, err, ProfileError, "give the job's NCCL_DEBUG=INFO log") from None
    if len(log.comm_sizes) > 1:
        log.notes.append(f"communicators of {', '.join(str(n) for n in sorted(log.comm_sizes))} ranks; the ranks, "
                         f"nodes and localRanks are the largest one's (line {log.nranks.line})")  # type: ignore[union-attr]
    if log.other_nics:
        lines = ", ".join(str(n) for n in list(log.other_nics.values())[:4])
        log.notes.append(f"the NET lines disagree: {len(log.other_nics) + 1} different port lists (others from line(s) "
                         f"{lines}); the first, line {log.nics.line}, is used: give one host's log")  # type: ignore[union-attr]
    if log.nccl_lines == 0:
        raise ProfileError(f"{path}: no NCCL lines (expected 'NCCL INFO ...' from a run with NCCL_DEBUG=INFO); "
                           f"give the job's NCCL_DEBUG=INFO log or an NCCL topology XML")
    return log
