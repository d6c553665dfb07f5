"""A draft system profile from what NCCL saw: topology XML files and ``NCCL_DEBUG=INFO`` logs.

Each profile field is either **read** (the value and the file:line it came from) or **assumed** (the
catalogue default, :data:`DEFAULT_SYSTEM`'s value, with the reason nothing was read). The YAML is the
terse system format of ``hardware_profiles/systems/`` (catalogue names; ``profiles validate`` accepts
it) with each field's provenance as a comment and in ``sources``; a NIC speed read from a ``<net
speed=>`` also becomes ``scale_out.nic_bw_bytes_per_s`` with that file as its source.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from commmodel.errors import ProfileError
from commmodel.io.nccl_log import NcclLog, read_nccl_log
from commmodel.io.nccl_topo import Topology, read_topology
from commmodel.io.profiles import load_gpus, load_links, load_system
from commmodel.io.yaml_read import read_failure

DEFAULT_SYSTEM = "dgx-h100"
"""The shipped system whose values stand in for fields no file states (the catalogue default)."""
RCCL_DEFAULT_SYSTEM = "amd-mi300x"
"""The stand-in when the files come from RCCL (a ``<gpu gcn=...>`` or a non-NVIDIA GPU): the shipped AMD system."""

NVLINK_BY_SM = {70: "nvlink2", 80: "nvlink3", 90: "nvlink4", 100: "nvlink5", 103: "nvlink5"}
"""NVLink generation of each SXM architecture: V100 NVLink 2, A100 NVLink 3, H100/H200 NVLink 4, B200/B300
NVLink 5 (NVIDIA NVLink and NVSwitch page, nvidia.com/en-us/data-center/nvlink, generation table)."""

PCIE_GEN_BY_GTS = {8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
"""Per-lane transfer rate of each PCIe generation (PCI-SIG PCI Express Base Specification 3.0-6.0)."""

TRANSPORT_KIND = {"IB": "infiniband", "RoCE": "roce", "Socket": "ethernet", "OFI-efa": "efa"}
"""NCCL's NET/IB port suffix (/IB, /RoCE; src/transport/net_ib.cc), the NET/Socket transport or aws-ofi-nccl's
provider (``NET/OFI Selected provider is efa``) -> tier kind."""

Status = Literal["read", "assumed"]


@dataclass(frozen=True)
class DraftField:
    """One profile field: its value, whether a file stated it, and where from (or why assumed)."""

    path: str
    value: object
    status: Status
    source: str


@dataclass
class Draft:
    """The draft profile's fields and the NCCL facts that are not profile fields (version, ranks ...)."""

    files: list[str]
    base: str = DEFAULT_SYSTEM
    """The shipped system whose values stand in for what no file states."""
    fields: list[DraftField] = field(default_factory=list)
    facts: list[DraftField] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def get(self, path: str) -> DraftField | None:
        """The field at ``path`` (e.g. "scale_out.link"), or None."""
        return next((f for f in self.fields if f.path == path), None)


def _lines(numbers: list[int], limit: int = 4) -> str:
    shown = ", ".join(str(n) for n in numbers[:limit])
    return f"line{'s' if len(numbers) > 1 else ''} {shown}" + (", ..." if len(numbers) > limit else "")


def _src(path: Path, where: str) -> str:
    return f"from-nccl: {path}: {where}"


def _gpu_count(draft: Draft, topos: list[Topology], logs: list[NcclLog], default: int) -> int:
    topo = next((t for t in topos if t.gpus), None)
    if topo is not None:
        where = f"{len(topo.gpus)} GPU devices ({_lines([g.line for g in topo.gpus])})"
        draft.fields.append(DraftField("gpus_per_node", len(topo.gpus), "read", _src(topo.path, where)))
        return len(topo.gpus)
    log = next((lg for lg in logs if lg.local_ranks), None)
    if log is not None:
        count = int(log.local_ranks.value)  # type: ignore[union-attr,arg-type]
        draft.fields.append(DraftField("gpus_per_node", count, "read",
                                       _src(log.path, f"line {log.local_ranks.line}: localRanks {count}")))  # type: ignore[union-attr]
        return count
    draft.fields.append(DraftField("gpus_per_node", default, "assumed", f"assumed: {draft.base} default"))
    return default


def _gpu(draft: Draft, topos: list[Topology], default: str) -> int | None:
    """The catalogue GPU for the ``sm`` the XML states; returns that sm (or None)."""
    other = next(((t, g) for t in topos for g in t.gpus if not g.nvidia), None)
    if other is not None:
        said = f'gcn="{other[1].gcn}"' if other[1].gcn else "a non-NVIDIA PCI vendor"
        draft.fields.append(DraftField("gpu", default, "assumed", _src(other[0].path, (
            f"line {other[1].line}: an RCCL GPU ({said}), whose sm is no CUDA compute capability; "
            f"assumed: {draft.base} default, set gpu by hand"))))
        return None
    found = next(((t, g) for t in topos for g in t.gpus if g.sm is not None), None)
    if found is None:
        draft.fields.append(DraftField("gpu", default, "assumed",
                                       f"assumed: {draft.base} default (no <gpu sm=...> in the files)"))
        return None
    topo, gpu = found
    parts = [name for name, data in load_gpus().items()
             if (data.get("compute_capability") or {}).get("value") == f"sm_{gpu.sm}"]
    where = _src(topo.path, f"line {gpu.line}: <gpu sm=\"{gpu.sm}\">")
    if len(parts) == 1:
        draft.fields.append(DraftField("gpu", parts[0], "read", where))
    elif parts:
        form = [p for p in parts if ("pcie" in p) == (gpu.nvlink_count == 0)] or parts
        draft.fields.append(DraftField("gpu", form[0], "assumed", f"{where} fits {', '.join(parts)}; "
                                       f"assumed the first {'PCIe' if gpu.nvlink_count == 0 else 'SXM'} part"))
    else:
        draft.fields.append(DraftField("gpu", default, "assumed", f"{where}: no catalogue GPU is sm_{gpu.sm}; "
                                       f"assumed: {draft.base} default"))
    return gpu.sm


def _scale_up(draft: Draft, topos: list[Topology], sm: int | None, default: str, gpus: int) -> str:
    gpu_topo = next((t for t in topos if t.gpus), None)
    linked = next(((t, g) for t in topos for g in t.gpus if g.nvlink_count), None)
    dumped = gpu_topo is not None and any(g.sm is not None for g in gpu_topo.gpus)
    xgmi = next(((t, g) for t in topos for g in t.gpus if g.xgmi_count), None)
    if xgmi is not None and linked is None:
        link = default
        draft.fields.append(DraftField("scale_up.link", link, "assumed", _src(xgmi[0].path, (
            f"line {xgmi[1].line}: {xgmi[1].xgmi_count} xGMI links per GPU (<xgmi count=...>); "
            f"assumed: {draft.base} default"))))
    elif linked is not None:
        topo, gpu = linked
        link = NVLINK_BY_SM.get(sm or 0, default)
        kind = "NVSwitch" if gpu.nvswitch else "direct NVLink"
        where = _src(topo.path, f"line {gpu.line}: {gpu.nvlink_count} NVLinks per GPU to {kind} "
                                f"(<nvlink count=... tclass=...>), sm_{sm}")
        draft.fields.append(DraftField("scale_up.link", link, "read" if sm in NVLINK_BY_SM else "assumed", where))
        if not gpu.nvswitch:
            draft.notes.append("the GPUs' NVLinks do not end at an NVSwitch: the draft still uses an NVSwitch "
                               "link; check scale_up (kind nvlink_direct needs links_per_gpu)")
    elif dumped:
        gen = PCIE_GEN_BY_GTS.get(gpu_topo.gpus[0].pci.link_speed_gts or 0.0)  # type: ignore[union-attr]
        link = f"pcie{gen}" if gen else "pcie4"
        speed = gpu_topo.gpus[0].pci.link_speed_gts  # type: ignore[union-attr]
        said = f"PCIe {speed:g} GT/s" if speed else "no PCIe link speed; assumed PCIe 4"
        draft.fields.append(DraftField("scale_up.link", link, "read" if gen else "assumed", _src(
            gpu_topo.path, f"line {gpu_topo.gpus[0].line}: <gpu> without an NVLink to a peer, {said}")))  # type: ignore[union-attr]
    else:
        link = NVLINK_BY_SM.get(sm or 0, default)
        why = ("the XML lists PCI devices only (an NCCL_TOPO_FILE input: NCCL finds NVLink through NVML, "
               "and such files leave it out)" if gpu_topo else "no topology XML given")
        draft.fields.append(DraftField("scale_up.link", link, "assumed", f"assumed: {draft.base} default; {why}"))
    size = draft.get("gpus_per_node")
    draft.fields.append(DraftField("scale_up.domain_size", gpus, size.status if size else "assumed",
                                   "one domain per node: gpus_per_node"))
    return link


def _nvls(draft: Draft, logs: list[NcclLog], link: str) -> None:
    log = next((lg for lg in logs if lg.nvls is not None), None)
    has = load_links()[link].in_network_reduction is not None
    if log is None:
        return
    said = bool(log.nvls.value)  # type: ignore[union-attr]
    where = _src(log.path, f"line {log.nvls.line}: NVLS multicast support is {'' if said else 'not '}available")  # type: ignore[union-attr]
    if not said and has:
        draft.fields.append(DraftField("scale_up.in_network_reduction", None, "read", where))
    elif said and not has:
        draft.notes.append(f"NCCL reports NVLS but catalogue link {link} has no NVLS entry; add one with its source")
    else:
        draft.facts.append(DraftField("nvls", said, "read", where))


def _nic_kind(topos: list[Topology], logs: list[NcclLog]) -> tuple[str | None, str]:
    log = next((lg for lg in logs if lg.nics), None)
    if log is not None:
        transports = {t for _, t in log.nics.value}  # type: ignore[union-attr]
        kind = TRANSPORT_KIND.get(sorted(transports)[0])
        if len(transports) > 1:
            log.notes.append(f"line {log.nics.line}: ports of {len(transports)} transports "  # type: ignore[union-attr]
                             f"({', '.join(sorted(transports))}); the draft takes {sorted(transports)[0]}")
        return kind, _src(log.path, f"line {log.nics.line}: NET ports of transport "  # type: ignore[union-attr]
                                    f"{'/'.join(sorted(transports))}")
    nic = next(((t, n) for t in topos for n in t.nics if n.kind), None)
    if nic is not None:
        topo, n = nic
        return n.kind, _src(topo.path, f"line {n.line}: PCI class {n.pci.pci_class if n.pci else '?'} ({n.kind})")
    return None, ""


def _compute_nics(speeds: list[tuple], logs: list[NcclLog]) -> list[tuple]:
    """The (topology, NIC) pairs NCCL trains over: those the log names (``NET/IB : Using [0]mlx5_0...``) where it
    does, else those at the most common speed, the fastest of a tie (a node's GPU NICs outnumber its storage and
    management ports: a DGX H100 has 8 × 400G compute HCAs beside 2 storage ports)."""
    log = next((lg for lg in logs if lg.nics), None)
    if log is not None:
        used = {name.split(":")[0] for name, _ in log.nics.value}  # type: ignore[union-attr]  # "mlx5_0:1" is a port
        named = [(t, n) for t, n in speeds if n.name and n.name.split(":")[0] in used]
        if named:
            return named
    if not speeds:
        return speeds
    counts = Counter(nic.speed_mbps for _, nic in speeds)
    best = max(counts, key=lambda mbps: (counts[mbps], mbps))
    return [(t, n) for t, n in speeds if n.speed_mbps == best]


def _nic_count(draft: Draft, topos: list[Topology], logs: list[NcclLog], default: int) -> None:
    log = next((lg for lg in logs if lg.nics), None)
    if log is not None:
        names = [n for n, _ in log.nics.value]  # type: ignore[union-attr]
        draft.fields.append(DraftField("scale_out.nics_per_node", len(names), "read", _src(
            log.path, f"line {log.nics.line}: NCCL uses {len(names)} ports ({', '.join(names[:4])}"  # type: ignore[union-attr]
                      f"{', ...' if len(names) > 4 else ''})")))
        return
    topo = next((t for t in topos if t.nics), None)
    if topo is not None:
        chosen = [n for t, n in _compute_nics([(topo, n) for n in topo.nics if n.speed_mbps], logs)] or topo.nics
        left = len(topo.nics) - len(chosen)
        draft.fields.append(DraftField("scale_out.nics_per_node", len(chosen), "read", _src(
            topo.path, f"{len(chosen)} NICs ({_lines([n.line for n in chosen])})"
                       + (f"; {left} NIC(s) at another speed left out (storage or management ports)" if left else ""))))
        return
    draft.fields.append(DraftField("scale_out.nics_per_node", default, "assumed", "assumed: one NIC per GPU"))


def _scale_out(draft: Draft, topos: list[Topology], logs: list[NcclLog], default: str, gpus: int) -> None:
    kind, kind_where = _nic_kind(topos, logs)
    speeds = [(t, n) for t in topos for n in t.nics if n.speed_mbps]
    nodes = next((lg.nnodes for lg in logs if lg.nnodes), None)
    if kind is None and not speeds and nodes is not None and nodes.value == 1:
        where = _src(next(lg.path for lg in logs if lg.nnodes), f"line {nodes.line}: nNodes 1, no NIC listed")
        draft.fields.append(DraftField("scale_out", None, "read", where))
        return
    links = {name: spec for name, spec in load_links().items() if spec.tier == "scale_out"}
    speeds = _compute_nics(speeds, logs)
    if speeds and speeds[0][1].kind and not any(lg.nics for lg in logs):  # the compute NICs' kind, not the first port's
        first_topo, first = speeds[0]
        kind = first.kind
        kind_where = _src(first_topo.path, f"line {first.line}: PCI class "
                                           f"{first.pci.pci_class if first.pci else '?'} ({first.kind})")
    if speeds:
        topo, nic = speeds[0]
        rate = nic.speed_mbps * 1e6 / 8  # type: ignore[operator]  # NCCL's net speed is in Mb/s (src/include/net.h)
        same_kind = {n: s for n, s in links.items() if s.kind == (kind or links[default].kind)} or links
        name = min(same_kind, key=lambda n: abs(same_kind[n].bw_bytes_per_s.value - rate))
        where = _src(topo.path, f"line {nic.line}: <net speed=\"{nic.speed_mbps:g}\"> (Mb/s)")
        draft.fields.append(DraftField("scale_out.link", name, "read" if kind else "assumed",
                                       f"{kind_where}; {where}" if kind else f"{where}; kind assumed"))
        draft.fields.append(DraftField("scale_out.nic_bw_bytes_per_s", f"{nic.speed_mbps / 1000:g} Gb/s", "read", where))
    elif kind is not None:
        same_kind = {n: s for n, s in links.items() if s.kind == kind}
        name = min(same_kind, key=lambda n: abs(same_kind[n].bw_bytes_per_s.value - links[default].bw_bytes_per_s.value))
        draft.fields.append(DraftField("scale_out.link", name, "assumed", f"{kind_where}; the speed is not in the "
                                       f"files (a dump's <net speed=...> states it); assumed {name}, the {draft.base} NIC rate"))
    else:
        draft.fields.append(DraftField("scale_out.link", default, "assumed", f"assumed: {draft.base} default"))
    _nic_count(draft, topos, logs, gpus)


_LOG_FACTS = (("library", "library", "{} version"), ("nccl_version", "version", "version {}"), ("nranks", "nranks", "nRanks {}"),
              ("nnodes", "nnodes", "nNodes {}"), ("local_ranks", "local_ranks", "localRanks {}"),
              ("net_plugin", "network", "Using network {}"), ("channels", "channels", "{} channels"),
              ("nvls_channels", "nvls_channels", "{} nvls channels"))


def _facts(draft: Draft, topos: list[Topology], logs: list[NcclLog]) -> None:
    for key, attr, text in _LOG_FACTS:
        log = next((lg for lg in logs if getattr(lg, attr) is not None), None)
        if log is not None:
            fact = getattr(log, attr)
            draft.facts.append(DraftField(key, fact.value, "read", _src(log.path, f"line {fact.line}: "
                                                                        + text.format(fact.value))))
    for topo in topos:
        slots = sorted({(g.pci.link_speed_gts, g.pci.link_width) for g in topo.gpus if g.pci.link_speed_gts},
                       key=lambda slot: (slot[0], slot[1] or 0))  # a link_width the file lacks is None
        for speed, width in slots:
            gen = PCIE_GEN_BY_GTS.get(speed or 0.0)
            lines = [g.line for g in topo.gpus if (g.pci.link_speed_gts, g.pci.link_width) == (speed, width)]
            draft.facts.append(DraftField("gpu_pcie", f"PCIe {gen or '?'} x{width or '?'} ({speed:g} GT/s)", "read",
                                          _src(topo.path, _lines(lines))))
        gdr = [g for g in topo.gpus if g.gdr is not None]
        if gdr:
            draft.facts.append(DraftField("gpu_direct_rdma", all(g.gdr for g in gdr), "read",
                                          _src(topo.path, f"<gpu gdr=...> {_lines([g.line for g in gdr])}")))


_NCCL_LINE = re.compile(rb"NCCL (?:INFO|WARN)")
"""What marks a log line (src/debug.cc prefixes every message so); a log may begin with '<' (a redacted host name)."""


_GIVE_NCCL = "give an NCCL topology XML (NCCL_TOPO_DUMP_FILE) or an NCCL_DEBUG=INFO log"


def read_nccl_files(paths: list[Path]) -> tuple[list[Topology], list[NcclLog]]:
    """Each file read as a topology XML (its first non-blank character is '<' and it has no ``NCCL INFO`` line in
    its first 4 KiB) or else as an INFO log."""
    topos, logs = [], []
    for path in paths:
        try:
            mode = os.stat(path).st_mode
            if stat.S_ISDIR(mode):
                raise ProfileError(f"{path}: is a folder, not a file; {_GIVE_NCCL}")
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):  # /dev/zero would be read forever
                raise ProfileError(f"{path}: is a device, not a file; {_GIVE_NCCL}")
            if stat.S_ISFIFO(mode):  # read twice below (the head, then the whole file): a pipe cannot be
                raise ProfileError(f"{path}: is a pipe, not a file; {_GIVE_NCCL}")
            with open(path, "rb") as handle:
                head = handle.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()  # a UTF-8 byte-order mark too
        except OSError as err:
            raise read_failure(path, err, ProfileError, _GIVE_NCCL) from None
        if head.startswith(b"<") and not _NCCL_LINE.search(head):
            topos.append(read_topology(path))
        else:
            logs.append(read_nccl_log(path))
    return topos, logs


PCIE4_NVIDIA_SYSTEM = "dgx-a100"
"""The base of an NVIDIA draft whose GPUs state no sm but all link at PCIe Gen4 (NVIDIA A100 datasheet: PCIe Gen4;
H100 SXM: PCIe Gen5): the A100 generation's node, not :data:`DEFAULT_SYSTEM`."""


def _nvidia_base(topos: list[Topology]) -> str:
    """:data:`PCIE4_NVIDIA_SYSTEM` where no GPU states its sm and every GPU's PCIe link is Gen4, else the default."""
    gpus = [g for t in topos for g in t.gpus]
    speeds = {g.pci.link_speed_gts for g in gpus}
    if gpus and not any(g.sm for g in gpus) and speeds == {16.0}:
        return PCIE4_NVIDIA_SYSTEM
    return DEFAULT_SYSTEM


def draft_from_nccl(topos: list[Topology], logs: list[NcclLog]) -> Draft:
    """Assemble the draft profile's fields from the parsed files (read where stated, assumed otherwise); a set of
    topologies none of which lists a GPU, with no log to read the GPUs from, is refused (it describes no GPU node)."""
    if topos and not any(t.gpus for t in topos) and not logs:
        raise ProfileError(f"{', '.join(str(t.path) for t in topos)}: no <gpu> in the topology (NCCL saw no GPU); give "
                           f"the NCCL_TOPO_DUMP_FILE written on a GPU node, or add its NCCL_DEBUG=INFO log")
    rccl = any(not g.nvidia for t in topos for g in t.gpus) or any(
        lg.library is not None and lg.library.value == "RCCL" for lg in logs)
    name = RCCL_DEFAULT_SYSTEM if rccl else _nvidia_base(topos)
    base = load_system(name)
    draft = Draft(files=[str(t.path) for t in topos] + [str(lg.path) for lg in logs], base=name)
    if name == PCIE4_NVIDIA_SYSTEM:
        draft.notes.append(f"no GPU states its sm, and every GPU's PCIe link runs at 16 GT/s (Gen4): an A100-generation "
                           f"node (H100 SXM and later link at Gen5), so the draft starts from {name}")
    gpus = _gpu_count(draft, topos, logs, base.gpus_per_node)
    sm = _gpu(draft, topos, base.gpu.name)
    link = _scale_up(draft, topos, sm, base.scale_up.link, gpus)
    _nvls(draft, logs, link)
    assert base.scale_out is not None  # the default system has a network
    _scale_out(draft, topos, logs, base.scale_out.link, gpus)
    _facts(draft, topos, logs)
    for lg in logs:
        draft.notes.extend(f"{lg.path}: {note}" for note in lg.notes)
    return draft
