"""Reading NCCL's topology XML: ``NCCL_TOPO_DUMP_FILE`` output and ``NCCL_TOPO_FILE`` inputs.

The format is NCCL's own (src/graph/xml.cc, ``ncclTopoDumpXmlToFile`` / ``ncclTopoGetXmlFromFile``): a
``<system version=...>`` root holding ``<cpu>`` elements, PCI trees of ``<pci busid= class= link_speed=
link_width=>``, and under a PCI device either ``<gpu dev= sm= rank= gdr=>`` (with ``<nvlink target= count=
tclass=>`` children) or ``<nic><net name= dev= speed= port= gdr=/></nic>``. Inputs such as Azure's
ndv4-topo.xml list only the PCI tree (GPUs and NICs by their PCI class); dumps add the ``gpu``/``net``
elements NCCL detected.

Parsed with expat directly, refusing any DTD or entity declaration (the defusedxml rules: no
billion-laughs, no external entities), so every element keeps its line number for the sources.
"""

from __future__ import annotations

import re
import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path

from commmodel.errors import ProfileError
from commmodel.io.yaml_read import open_user_file, read_failure

MAX_TOPO_BYTES = 16 * 2**20
"""Largest topology file read: a dump of a 72-GPU NVL72 tray is ~100 kB; 16 MiB can only be a wrong file."""

PCI_CLASS_GPU = ("0x0302", "0x0300", "0x0380")
"""PCI base class 03 (display controller): 0x0302 3D controller (datacentre GPUs), 0x0300 VGA, 0x0380 other
(AMD Instinct). PCI-SIG PCI Code and ID Assignment Specification r1.11 §1.4."""
PCI_CLASS_INFINIBAND = "0x0207"
"""Network controller subclass 07: InfiniBand (PCI Code and ID Assignment r1.11 §1.3)."""
PCI_CLASS_ETHERNET = "0x0200"
"""Network controller subclass 00: Ethernet (same table)."""
PCI_VENDOR_AMAZON = "0x1d0f"
"""Amazon.com's PCI vendor id: with a device id 0xefa* the NIC is an Elastic Fabric Adapter, whatever its
Ethernet class says (PCI ID repository, pci-ids.ucw.cz vendor 1d0f: efa0/efa1/efa2 'Elastic Fabric Adapter')."""
PCI_VENDOR_NVIDIA = "0x10de"
"""NVIDIA's PCI vendor id (PCI-SIG vendor list); RCCL dumps carry 0x1002 (AMD) or 0x1d94 (Hygon)."""
NVSWITCH_TCLASS = "0x068000"
"""``<nvlink tclass=>`` of an NVSwitch peer: PCI bridge/other, which NCCL's xml.cc maps to an NVS node."""


@dataclass(frozen=True)
class Element:
    """One XML element with its attributes, children and the line it starts on."""

    tag: str
    attrs: dict[str, str]
    line: int
    children: list["Element"] = field(default_factory=list)

    def walk(self):
        """This element and every descendant, depth first (iteratively: no recursion limit to meet)."""
        pending = [self]
        while pending:
            element = pending.pop()
            yield element
            pending.extend(reversed(element.children))


@dataclass(frozen=True)
class PciDevice:
    """A GPU or NIC slot: PCI bus id, class, link speed (GT/s) and width (lanes), and its line."""

    busid: str
    pci_class: str
    link_speed_gts: float | None
    link_width: int | None
    line: int


@dataclass(frozen=True)
class TopoGpu:
    """A GPU: its PCI slot, the ``<gpu>`` facts when the file has them, and its NVLinks."""

    pci: PciDevice
    sm: int | None
    rank: int | None
    gdr: bool | None
    nvlink_count: int
    nvswitch: bool
    line: int
    nvidia: bool = True
    """False for an RCCL dump's GPU (a ``gcn=`` attribute or a non-NVIDIA PCI vendor): its ``sm`` is no CUDA
    compute capability (RCCL writes e.g. sm="90" for gfx942)."""
    gcn: str | None = None
    """RCCL's ``<gpu gcn=...>`` (the gfx architecture)."""
    xgmi_count: int = 0
    """RCCL's ``<xgmi count=...>`` links to peers (AMD Infinity Fabric)."""


@dataclass(frozen=True)
class TopoNic:
    """A network port: PCI slot, ``<net>`` name, speed (Mb/s as NCCL writes it), and its line."""

    pci: PciDevice | None
    name: str | None
    speed_mbps: float | None
    kind: str | None
    line: int


@dataclass(frozen=True)
class Topology:
    """What one NCCL topology file states."""

    path: Path
    version: str | None
    gpus: list[TopoGpu]
    nics: list[TopoNic]
    bridges: list[PciDevice]


MAX_XML_DEPTH = 64
"""Deepest element nesting read: NCCL's dumps are under 10 deep (system > cpu > pci > pci > gpu > nvlink), so
anything far deeper is not one (and a deep file would otherwise exhaust the recursion of a tree walk)."""


def _parse_xml(path: Path, data: bytes) -> Element:
    """Expat with DTDs and entities refused; a tree of :class:`Element` with line numbers."""
    parser = xml.parsers.expat.ParserCreate()
    stack: list[Element] = []
    roots: list[Element] = []

    def refuse(*args) -> None:
        if args and args[0] == "topology":
            raise ProfileError(f"{path}: an hwloc topology (<!DOCTYPE topology>, lstopo's XML), not NCCL's; "
                               f"give the NCCL_TOPO_DUMP_FILE written by NCCL (<system version=...>)")
        raise ProfileError(f"{path}: refusing an XML DTD or entity declaration (an NCCL topology file has none)")

    def start(tag: str, attrs: dict[str, str]) -> None:
        if len(stack) >= MAX_XML_DEPTH:
            raise ProfileError(f"{path}: XML nested more than {MAX_XML_DEPTH} deep at line {parser.CurrentLineNumber}; "
                               f"an NCCL topology file is under 10 deep: give an NCCL_TOPO_DUMP_FILE")
        element = Element(tag, dict(attrs), parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(element)
        stack.append(element)

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = lambda _tag: stack.pop()
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as err:
        raise ProfileError(f"{path}: not well-formed XML ({err}); give an NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE") from None
    return roots[0]


def _speed_gts(text: str | None) -> float | None:
    """"16.0 GT/s PCIe" or "16 GT/s" -> 16.0; NCCL's "Unknown" or nothing -> None."""
    match = re.match(r"\s*([0-9.]+)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


def _pci(element: Element) -> PciDevice:
    width = element.attrs.get("link_width", "")
    return PciDevice(element.attrs.get("busid", "?"), element.attrs.get("class", "")[:6],
                     _speed_gts(element.attrs.get("link_speed")), int(width) if width.isdigit() and int(width) > 0 else None, element.line)


def _peer_links(gpu: Element | None, busid: str, tag: str = "nvlink") -> list[Element]:
    """``<nvlink>`` (RCCL: ``<xgmi>``) children that reach another device: one whose ``target`` is the GPU's own bus
    id (Azure's ncv4-topo.xml) joins the GPU to itself in NCCL's ``ncclTopoAddNvLinks`` (src/graph/topo.cc)."""
    links = [c for c in (gpu.children if gpu else []) if c.tag == tag]
    return [c for c in links if c.attrs.get("target", "").lower() != busid.lower()]


class LinkCountError(ValueError):
    """A ``<nvlink>``/``<xgmi>`` element whose ``count`` is not a whole number ≥ 1 (the reader names its line)."""


def _link_count(link: Element) -> int:
    """The links an ``<nvlink>`` / ``<xgmi>`` element stands for (``count``, 1 when absent), a whole number ≥ 1."""
    text = link.attrs.get("count", "1")
    if not text.isdigit() or int(text) < 1:
        raise LinkCountError(f"line {link.line}: <{link.tag} count={text!r}> is not a whole number of links ≥ 1")
    return int(text)


def _gpu(pci: Element) -> TopoGpu:
    gpu = next((c for c in pci.children if c.tag == "gpu"), None)
    attrs = gpu.attrs if gpu else {}
    links = _peer_links(gpu, pci.attrs.get("busid", ""))
    xgmi = _peer_links(gpu, pci.attrs.get("busid", ""), "xgmi")
    vendor = pci.attrs.get("vendor", "").lower() or None
    return TopoGpu(
        pci=_pci(pci), sm=int(attrs["sm"]) if attrs.get("sm", "").isdigit() else None,
        rank=int(attrs["rank"]) if attrs.get("rank", "").isdigit() else None,
        gdr=attrs["gdr"] == "1" if "gdr" in attrs else None,
        nvlink_count=sum(_link_count(c) for c in links),
        nvswitch=any(c.attrs.get("tclass") == NVSWITCH_TCLASS for c in links),
        line=gpu.line if gpu else pci.line,
        nvidia=vendor in (None, PCI_VENDOR_NVIDIA) and "gcn" not in attrs,
        gcn=attrs.get("gcn"), xgmi_count=sum(_link_count(c) for c in xgmi),
    )


def _nics(pci: Element) -> list[TopoNic]:
    slot = _pci(pci)
    kind = {PCI_CLASS_INFINIBAND: "infiniband", PCI_CLASS_ETHERNET: "ethernet"}.get(slot.pci_class)
    if pci.attrs.get("vendor", "").lower() == PCI_VENDOR_AMAZON and pci.attrs.get("device", "").lower().startswith("0xefa"):
        kind = "efa"
    nets = [n for nic in pci.children if nic.tag == "nic" for n in nic.children if n.tag == "net"]
    if not nets:
        return [TopoNic(slot, None, None, kind, slot.line)]
    return [TopoNic(slot, n.attrs.get("name"), float(n.attrs["speed"]) if n.attrs.get("speed", "").isdigit() else None,
                    kind, n.line) for n in nets]


def read_topology(path: Path) -> Topology:
    """Read one NCCL topology XML file; a file of another schema is a one-line :class:`ProfileError`."""
    path = Path(path)
    try:
        with open_user_file(path) as handle:
            data = handle.read(MAX_TOPO_BYTES + 1)
    except OSError as err:
        raise read_failure(path, err, ProfileError, "give an NCCL topology XML (NCCL_TOPO_DUMP_FILE)") from None
    if len(data) > MAX_TOPO_BYTES:
        raise ProfileError(f"{path}: larger than {MAX_TOPO_BYTES // 2**20} MiB; not an NCCL topology file")
    root = _parse_xml(path, data)
    if root.tag == "graphs":
        raise ProfileError(f"{path}: an NCCL graph file (<graphs>: NCCL_GRAPH_FILE / NCCL_GRAPH_DUMP_FILE channels), "
                           f"not a topology; give the NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE (<system>) instead")
    if root.tag != "system":
        hwloc = " (an hwloc/lstopo file?)" if root.tag == "topology" else ""
        raise ProfileError(f"{path}: root element <{root.tag}> is not NCCL's <system>{hwloc}; "
                           f"give an NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE (a <system version=...> of <cpu>/<pci>)")
    gpus: list[TopoGpu] = []
    nics: list[TopoNic] = []
    bridges: list[PciDevice] = []
    for element in root.walk():
        if element.tag != "pci":
            continue
        pci_class = element.attrs.get("class", "")[:6]
        if pci_class in PCI_CLASS_GPU or any(c.tag == "gpu" for c in element.children):
            try:
                gpus.append(_gpu(element))
            except LinkCountError as err:
                raise ProfileError(f"{path}: {err}; the file is damaged or was edited (NCCL writes a count)") from None
        elif pci_class in (PCI_CLASS_INFINIBAND, PCI_CLASS_ETHERNET) or any(c.tag == "nic" for c in element.children):
            nics.extend(_nics(element))
        elif pci_class.startswith("0x06"):
            bridges.append(_pci(element))
    # Network ports NCCL found outside any PCI tree (virtual NICs) sit directly under <cpu><nic>.
    for cpu in (e for e in root.walk() if e.tag == "cpu"):
        for nic in (c for c in cpu.children if c.tag == "nic"):
            nics.extend(TopoNic(None, n.attrs.get("name"), float(n.attrs["speed"])
                                if n.attrs.get("speed", "").isdigit() else None, None, n.line)
                        for n in nic.children if n.tag == "net")
    bare = [e for e in root.walk() if e.tag == "pci" and "class" not in e.attrs]
    if not gpus and not nics and bare:
        raise ProfileError(f"{path}: an NCCL_TOPO_FILE of bus ids only ({len(bare)} <pci busid=...> without class): "
                           f"NCCL fills in the devices from sysfs; give an NCCL_TOPO_DUMP_FILE from the machine")
    if not gpus and not nics:
        raise ProfileError(f"{path}: an NCCL <system> with no GPU and no NIC (no <gpu>, <net> or PCI class "
                           f"0x0302/0x0207/0x0200 device); nothing to draft a profile from")
    return Topology(path, root.attrs.get("version"), gpus, nics, bridges)
