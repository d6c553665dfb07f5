"""Hardware words of a query: systems ("dgx-h100", "4 p5 nodes"), GPUs and their counts ("16k H100",
"2 nodes of 8 A100"), networks ("400GbE", "8x NDR", "200 Gbps InfiniBand") and scale-up words.

Each ``scan_*`` consumes its matches from a :class:`~commmodel.query.scanner.Scanner` and writes what it
read into the parser's ``found`` dict (:func:`commmodel.query.parse.parse_query` calls them in order).
"""

from __future__ import annotations

import re

from commmodel.errors import QueryError
from commmodel.limits import MAX_GPUS, MAX_GPUS_PER_NODE
from commmodel.query import vocab
from commmodel.query.mentions import GpuMention, NetworkMention, SystemMention
from commmodel.query.needles import NEEDLES
from commmodel.query.scanner import (
    COUNT, NUM, WORD_NUM, Scanner, alternation, bounded, one_of, read_integer, read_number, said_count, word_number,
)

GPU_ALT = alternation(vocab.GPU_FAMILIES)
GPU_MEMORY = r"gb(?![ ]?/[ ]?s|ps|it)"
"""The GB of a GPU's memory ("A100 80GB"), not a line rate ("A100 400 Gb/s InfiniBand")."""
GPU_PHRASE = (rf"(?P<fam>{GPU_ALT})(?:[ -]?(?P<mem1>\d{{2,3}})[ -]?{GPU_MEMORY})?(?:[ -]?(?P<form>sxm\d?|pcie|nvl))?"
               rf"(?:[ -]?(?P<mem2>\d{{2,3}})[ -]?{GPU_MEMORY})?s?(?:[ -]?gpus?)?")


def _gpu(m: re.Match[str]) -> GpuMention:
    family = next(v for p, v in vocab.GPU_FAMILIES.items() if re.fullmatch(p, m.group("fam")))
    mem = m.group("mem1") or m.group("mem2")
    form = m.group("form")
    return GpuMention(family=family, memory_gb=int(mem) if mem else None,
                      form=("sxm" if form and form.startswith("sxm") else form), position=m.start())


CLOUD_PREFIXES = ("aws-", "gcp-", "azure-", "oci-")
"""Name prefixes of the cloud providers' instance profiles (a query word may omit them: ``p5`` is aws-p5)."""

SERVER_WORDS = ("dgx", "hgx")
"""NVIDIA's DGX servers are built on its HGX baseboards: the same GPUs, NVLink and NVSwitch (NVIDIA DGX B200, DGX
H200 and DGX H100 datasheets: "NVIDIA HGX" system board, 8 GPUs on NVSwitch). So "DGX B200" reads the hgx-b200
profile and "HGX H100" the dgx-h100 one where only the other is shipped (the NICs are then the profile's; the
query's notes say so), and a bare "DGX" / "HGX" is a node word ("4 DGX nodes of H100")."""
NODE_NOUN = r"(?:nodes?|boxes|box|servers?|machines?|hosts?|instances?)"
NODE_WORD = rf"(?:(?:dgx|hgx)s?(?:[ -]?{NODE_NOUN})?|{NODE_NOUN})"
"""A node: its noun, or an NVIDIA server word with or without one."""


def _name_words(name: str) -> list[str]:
    """The words of a system name without its vendor prefix (``aws-p4d`` -> ``["p4d"]``): every match of
    :func:`_system_pattern` contains each of them as written, so a query lacking one cannot match it."""
    body = next((name[len(p):] for p in CLOUD_PREFIXES if name.startswith(p)), name)
    return [w for w in re.split(r"[-_ ]", body) if w]


def _server_twin(name: str, system_names: tuple[str, ...]) -> str | None:
    """``hgx-b200`` -> ``dgx-b200`` (and back) when that twin is not itself shipped (:data:`SERVER_WORDS`)."""
    head, _, rest = name.partition("-")
    if head not in SERVER_WORDS or not rest:
        return None
    twin = f"{SERVER_WORDS[1 - SERVER_WORDS.index(head)]}-{rest}"
    return None if twin in {n.lower() for n in system_names} else twin


def _system_pattern(name: str, twin: str | None = None) -> str:
    """``dgx-a100`` -> ``dgx[ -]?a100`` (``(?:dgx|hgx)[ -]?a100`` with a server ``twin``); a cloud name also
    matches without its vendor (``p4d``)."""
    vendor = next((prefix[:-1] for prefix in CLOUD_PREFIXES if name.startswith(prefix)), "")
    words = [re.escape(w) for w in _name_words(name)]
    if twin:
        words[0] = "(?:dgx|hgx)"
    core = r"[ -]?".join(words)
    if vendor == "aws":  # its instance type: "p5.48xlarge", "p4d.24xlarge"
        core += r"(?:\.\d{0,2}xlarge)?"
    return rf"(?:{vendor}[ -]?)?{core}" if vendor else core


def _present(words: tuple[str, ...], twin: str | None, text: str) -> bool:
    """Whether every word of a system name (its server word or its twin's) is in ``text``: else no match."""
    return all(w in text or (twin is not None and i == 0 and any(s in text for s in SERVER_WORDS))
               for i, w in enumerate(words))


def _note_twin(found: dict, said: str, name: str) -> None:
    found["notes"] = (*found.get("notes", ()), f"read {said!r} as {name}: NVIDIA's DGX servers are built on its HGX "
                      f"boards (same GPUs, NVLink and NVSwitch); the NICs are {name}'s (pass --system or --network for "
                      f"others)")


def scan_systems(sc: Scanner, found: dict, system_names: tuple[str, ...]) -> None:
    mentions: list[SystemMention] = []
    nodes: list[int] = []
    gpus: list[int] = []
    node_word = r"(?:[ ]*(?:nodes?|boxes|box|servers?|machines?|hosts?|instances?|vms?))?"
    for name in sorted(system_names, key=len, reverse=True):
        words, twin = tuple(_name_words(name.lower())), _server_twin(name.lower(), system_names)
        nvl = re.search(r"nvl(\d+)", name.lower())
        if nvl and _rack_said(words, sc.work):  # "4 racks of GB200 NVL72": the NVLink domain's GPUs per rack
            racks = _scan_racks(sc, _rack_pattern(words), words[:1])
            mentions += [SystemMention(name=name, position=at) for at, _ in racks if at is not None]
            gpus += [n * int(nvl.group(1)) for _, n in racks]
        if not _present(words, twin, sc.work):
            continue  # no match possible: skip compiling its pattern (issue 17; ~33 names per query)
        pattern = _system_pattern(name.lower(), twin)
        names_gpu = re.match(GPU_ALT, name.lower()) is not None  # "72 GB200 NVL72" counts GPUs
        needles = (*words, *SERVER_WORDS) if twin else words
        for m in sc.scan(bounded(rf"(?:{COUNT}[ ]*(?:x[ ]*)?)?{pattern}s?(?P<unit>{node_word})"
                                 rf"(?:[ ]*[x×][ ]*(?P<n2>\d+)(?P<unit2>{node_word}))?"), needles or None):
            mentions.append(SystemMention(name=name, position=m.start()))
            if twin and twin.split("-")[0] in m.group(0):
                _note_twin(found, " ".join(sc.original[m.start():m.end()].split()), name)
            if m.group("n") or m.group("w") or m.group("n2"):
                unit = (m.group("unit") + (m.group("unit2") or "")).strip()
                count = _count(m, "count")
                if nvl and not unit and _means_racks(m, count, int(nvl.group(1))):
                    gpus.append(count * int(nvl.group(1)))
                    found["notes"] = (*found.get("notes", ()), f"read {count} {name} as {count} rack(s) of "
                                      f"{nvl.group(1)} GPUs (say 'GPUs' to count GPUs)")
                    continue
                (gpus if names_gpu and not unit else nodes).append(count)
    if CPU_HOST in system_names:  # "4 CPU ranks", "two CPU processes", "8 CPUs": ranks of the CPU host profile
        for m in sc.scan(bounded(CPU_RANKS), ("cpu",)):
            if not any(x.name == CPU_HOST for x in mentions):  # "4 CPU ranks on cpu-host" names one system
                mentions.append(SystemMention(name=CPU_HOST, position=m.start()))
            gpus.append(said_count(m, "CPU rank count", MAX_GPUS))
    found["systems"] = tuple(sorted(mentions, key=lambda x: x.position))
    found["_system_nodes"] = nodes
    found["_system_gpus"] = gpus


CPU_HOST = "cpu-host"
"""The CPU host profile a query's "CPU" words name (issue 14: gloo and MPI ranks on CPUs)."""
CPU_RANKS = rf"{COUNT}[ ]*(?:x[ ]*)?(?:cpus|cpu[ -]?(?:ranks?|processes|process|workers?))(?![ -]?(?:cores?|threads?))"
"""A count of CPU ranks ("4 CPU ranks", "two CPU processes", "8 CPUs"): a count is required, so "CPU offload",
"cpu-bound" or "CPU-GPU" name no CPU host, and a core or thread count ("64 CPU cores", "8 CPUs threads") is not a
rank count: it stays unread."""


RACK_COUNT_MAX = 16
"""A count up to this before an NVLink-rack system's name with no unit ("2 GB200 NVL72") counts racks: nobody runs 2
GPUs of a 72-GPU rack product, while a multiple of the rack's GPUs ("144 GB200 NVL72") counts GPUs."""


def _means_racks(m: re.Match[str], count: int, rack_gpus: int) -> bool:
    """Whether a count said before an NVLink-rack system's name counts racks (:data:`RACK_COUNT_MAX`): "a", "one" or a
    small number, not a multiple of the rack's GPUs."""
    return bool(m.group("w")) or (count <= RACK_COUNT_MAX and count % rack_gpus != 0)


RACK_SYSTEM_WORDS = ("rack", "dgx")
"""Words that make an NVLink-rack system's GPU name alone ("2 GB200 racks", "2 DGX GB200") name the rack system:
NVIDIA sells DGX GB200 and DGX GB300 as rack-scale systems of 72 GPUs each (NVIDIA DGX GB200 and DGX GB300 product
pages: "rack-scale"), so a count of them counts racks, as a count of racks does."""


def _rack_said(words: tuple[str, ...], text: str) -> bool:
    """Whether ``text`` may say racks of the NVLink-rack system of ``words`` (its GPU word and a rack word)."""
    return bool(words) and words[0] in text and any(w in text for w in RACK_SYSTEM_WORDS)


def _rack_pattern(words: tuple[str, ...]) -> str:
    """``("gb200", "nvl72")`` -> ``(?:dgx[ -]?)?gb200(?:[ -]?nvl72)?``: the rack system said by its GPU word, with or
    without its NVLink-domain word and NVIDIA's DGX word (:data:`RACK_SYSTEM_WORDS`)."""
    rest = r"[ -]?".join(re.escape(w) for w in words[1:])
    return rf"(?:dgx[ -]?)?{re.escape(words[0])}" + (rf"(?:[ -]?{rest})?" if rest else "")


def _scan_racks(sc: Scanner, pattern: str, needles: tuple[str, ...] | None) -> list[tuple[int | None, int]]:
    """(position of the system's name, racks) of each rack count said of an NVLink-rack system: "4 racks of GB200
    NVL72", "GB200 NVL72 racks x4", "one GB200 NVL72 rack", "2 DGX GB200" (a DGX GB200 is a rack:
    :data:`RACK_SYSTEM_WORDS`); and (None, racks) for "1 rack" standing apart once such a system is named (the name
    itself is read as a mention by the caller)."""
    out = []
    # "2 DGX GB200" counts racks; "2 DGX GB200 nodes" / "trays" stays a node count (the caller's node words)
    dgx = pattern.replace("(?:dgx[ -]?)?", "dgx[ -]?", 1) + rf"s?(?![ -]?(?:{NODE_NOUN}|trays?|racks?))"
    for m in sc.scan(bounded(rf"{COUNT}[ ]*(?:racks?[ ]*(?:of[ ]*)?{pattern}s?|{pattern}[ ]*racks?|(?:x[ ]*)?{dgx})"
                             rf"|{pattern}[ ]*racks?[ ]*[x×][ ]*(?P<n2>\d+)"), needles):
        out.append((m.start(), _count(m, "rack count")))
    if out or not re.search(pattern, sc.original.lower()):
        return out
    return [(None, said_count(m, "rack count", MAX_GPUS)) for m in sc.scan(bounded(rf"{COUNT}[ ]*racks?"), ("rack",))]


def _count(m: re.Match[str], what: str) -> int:
    """A count said before a name (:data:`~commmodel.query.scanner.COUNT`) or after it as "x N" (group ``n2``)."""
    return read_integer(m.group("n2"), what, MAX_GPUS) if m.group("n2") else said_count(m, what, MAX_GPUS)


def scan_gpus(sc: Scanner, found: dict) -> None:
    counts: list[int] = []
    nodes: list[int] = []
    per_node: list[int] = []
    gpus: list[GpuMention] = []
    node_word = NODE_WORD
    for m in sc.scan(bounded(rf"{NUM}[ -]?{node_word}[ ]?(?:of|with|x|×|each with)[ ]?{NUM}[ ]?(?:x[ ]?)?(?:{GPU_PHRASE}|gpus?)")):
        nodes.append(read_integer(m.group(1), "node count", MAX_GPUS))
        per_node.append(read_integer(m.group(2), "GPUs per node", MAX_GPUS_PER_NODE))
        found["notes"] = (*found.get("notes", ()), f"read {' '.join(m.group(0).split())} as {per_node[-1]} GPUs per "
                          f"node ({nodes[-1] * per_node[-1]} in all); write '{per_node[-1]} GPUs across {nodes[-1]} "
                          f"nodes' for {per_node[-1]} in all")
        if m.group("fam"):
            gpus.append(_gpu(m))
    # "2 H100 nodes", "four A100 servers": a count of nodes of that GPU (it was read as 2 GPUs)
    for m in sc.scan(bounded(rf"(?:{NUM}|{WORD_NUM})[ ]?(?:x[ ]?)?{GPU_PHRASE}[ ]?{NODE_NOUN}")):
        nodes.append(read_integer(m.group(1), "node count", MAX_GPUS) if m.group(1) else word_number(m.group(2)))
        gpus.append(_gpu(m))
    for m in sc.scan(bounded(rf"{NUM}[ ]?(?:x[ ]?)?(?:{GPU_PHRASE}|gpus?)?[ ]?(?:per|/|a|each|in each|in a)[ ]?(?:node|box|server|machine|host)")):
        per_node.append(read_integer(m.group(1), "GPUs per node", MAX_GPUS_PER_NODE))
        if m.group("fam"):
            gpus.append(_gpu(m))
    for m in sc.scan(bounded(rf"{NUM}(?P<k>k)?[ ]?(?:x|×|\*)?[ ]?{GPU_PHRASE}")):
        counts.append(_gpu_count(m, found))
        gpus.append(_gpu(m))
    for m in sc.scan(bounded(rf"{GPU_PHRASE}[ ]?(?:x|×)[ ]?(?P<count>\d+)")):
        counts.append(read_integer(m.group("count"), "GPU count", MAX_GPUS))
        gpus.append(_gpu(m))
    for m in sc.scan(bounded(rf"{NUM}(?P<k>k)?[ ]?(?:x[ ]?)?(?:gpus?|ranks?|processes)")):
        counts.append(_gpu_count(m, found))
    for m in sc.scan(bounded(rf"{WORD_NUM}[ ]?(?:{GPU_PHRASE}|gpus?|ranks?|processes)")):  # "eight H100s"
        counts.append(word_number(m.group(1)))
        if m.group("fam"):
            gpus.append(_gpu(m))
    for m in sc.scan(bounded(rf"(?:{NUM}|{WORD_NUM})[ -]*{node_word}")):
        nodes.append(read_integer(m.group(1), "node count", MAX_GPUS) if m.group(1) else word_number(m.group(2)))
    for m in sc.scan(bounded(GPU_PHRASE)):
        gpus.append(_gpu(m))
    said = counts + found.pop("_system_gpus", [])
    if len(set(said)) > 1:  # "16 vs 64 H100": a query answers one count; the scaling figure compares counts
        low, high = min(said), max(said)
        shown = ", ".join(map(str, dict.fromkeys(said)))
        raise QueryError(f"the query gives {len(set(said))} different GPU counts ({shown}); give one, or compare "
                         f"counts with `commmodel plot scaling -m MODEL -s SYSTEM --min-gpus {low} --max-gpus {high} "
                         f"-o scaling.png`")
    found["num_gpus"] = one_of(said, "GPU counts")
    found["num_nodes"] = one_of(nodes + found.pop("_system_nodes", []), "node counts")
    found["gpus_per_node"] = one_of(per_node, "GPUs-per-node counts")
    found["gpus"] = tuple(sorted(gpus, key=lambda g: g.position))


def _gpu_count(m: re.Match[str], found: dict) -> int:
    """A GPU count, "16k" included: k is 1024 here (clusters come in powers of two: Llama 3's "16K H100" were
    16,384, arXiv:2407.21783 §3.3), said in the notes."""
    count = read_integer(m.group(1), "GPU count", MAX_GPUS)
    if m.group("k"):
        count *= 1024
        if count > MAX_GPUS:
            raise QueryError(f"GPU count {m.group(1)}k in the query must lie between 1 and {MAX_GPUS:,}")
        found["notes"] = (*found.get("notes", ()), f"read {m.group(1)}k GPUs as {count:,} (k = 1024; write "
                          f"{int(m.group(1)) * 1000} for exactly that)")
    return count


def scan_networks(sc: Scanner, found: dict) -> None:
    nets: list[NetworkMention] = []
    nic = r"(?:(?P<nics>\d{1,3})[ ]?[x×][ ]?)?"
    rate_unit = r"(?:gbit/s|gb/s|gbps|gbit|gig|gb|g)"  # longest first: a match must end at a word's edge

    def add(m: re.Match[str], family: str, link: str | None, rate: float | None) -> None:
        nics = m.groupdict().get("nics")
        nets.append(NetworkMention(family=family, link=link, rate_gbps=rate,
                                   nics_per_node=int(nics) if nics else None, position=m.start()))

    words = {"double": 2.0, "twice": 2.0, "triple": 3.0, "quadruple": 4.0}
    for m in sc.scan(bounded(r"(?:(\d+(?:\.\d+)?)[ ]?(?:x|×|times)[ ]?(?:more|as many)|(double|twice|triple|quadruple)"
                             r"(?:[ ]?(?:the|as many|our|my))?)[ ]?(?:nics?|hcas?|rails?|network cards?)")):
        factor = read_number(m.group(1), "NIC multiplier", 64) if m.group(1) else words[m.group(2)]
        found["what_if"] = True
        nets.append(NetworkMention(family=f"{factor:g}x NICs", link=None, rate_gbps=None, nics_per_node=None,
                                   position=m.start(), nic_multiplier=factor))
    ib = r"(?:infiniband|ib)"
    port = rf"(?:100|200|400|800)(?:[ ]?{rate_unit})?"  # "NDR 400Gb/s", "400G NDR": the generation's port rate
    for m in sc.scan(bounded(rf"{nic}(?:{port}[ -]?)?(?:{ib}[ -]?)?(?P<gen>edr|hdr|ndr|xdr)(?:[ -]?{port})?(?:[ -]?{ib})?")):
        link, rate = vocab.IB_GENERATIONS[m.group("gen")]
        add(m, "infiniband", link, rate)
    for m in sc.scan(bounded(rf"{nic}(?:(?P<rate>\d{{2,3}})[ -]?(?:{rate_unit}[ -]?)?(?:ethernet|eth|gbe|gige)|(?P<rate2>\d{{2,3}})ge|(?:ethernet|eth)[ -]?(?P<rate3>\d{{2,3}})[ -]?{rate_unit}?)")):
        rate = _line_rate_gbps(sc, m, float(m.group("rate") or m.group("rate2") or m.group("rate3")), found)
        link = f"eth-{int(rate)}g" if int(rate) in vocab.ETHERNET_SPEEDS_GBPS else None
        if link is None:
            raise QueryError(f"Ethernet speed {int(rate)} Gb/s is not in the link catalogue; "
                             f"known: {', '.join(f'{s}GbE' for s in vocab.ETHERNET_SPEEDS_GBPS)}")
        add(m, "ethernet", link, rate)
    for m in sc.scan(bounded(rf"{nic}(?:(?P<rate>\d{{3}})[ -]?(?:{rate_unit}[ -]?)?roce(?:[ -]?v2)?|roce(?:[ -]?v2)?[ -]?(?P<rate2>\d{{3}})[ -]?{rate_unit}?)")):
        rate = _line_rate_gbps(sc, m, float(m.group("rate") or m.group("rate2")), found)
        if int(rate) not in vocab.ROCE_SPEEDS_GBPS:
            raise QueryError(f"RoCE speed {int(rate)} Gb/s is not in the link catalogue; "
                             f"known: {', '.join(f'{s}G' for s in vocab.ROCE_SPEEDS_GBPS)}")
        add(m, "roce", f"roce-{int(rate)}g", rate)
    for pattern, (family, link) in vocab.NETWORK_WORDS.items():
        for m in sc.scan(bounded(rf"{nic}(?:{pattern})"), NEEDLES.get(pattern)):
            add(m, family, link, None)
    for m in sc.scan(bounded(rf"{nic}(?P<rate>\d+(?:\.\d+)?)[ ]?(?P<unit>gbps|gb/s|gbit/s|gbit|tbps|tb/s|g)")):
        unit_scale = 1000.0 if m.group("unit").startswith("t") else 1.0
        add(m, "rate", None, _line_rate_gbps(sc, m, float(m.group("rate")) * unit_scale, found))
    nets = _merge_rate_with_family(nets)
    # "8 HDR NICs per node": the fabric word is read above, so the count may stand apart from "NICs"
    nic_counts = [int(m.group(1)) for m in sc.scan(bounded(
        r"(\d{1,3})[ ]*(?:x[ ]*)?(?:nics?|hcas?|rails?|network cards?|ports?)(?:[ ]?per[ ]?node)?"))]
    found["nics_per_node"] = one_of(nic_counts, "NIC counts")
    found["networks"] = tuple(sorted(nets, key=lambda n: n.position))
    scale_up = [kind for pattern, kind in vocab.SCALE_UP_WORDS.items() for _ in sc.scan(bounded(pattern), NEEDLES.get(pattern))]
    if "pcie_host" in scale_up:  # "PCIe without P2P" names one interconnect, not two
        scale_up = [k for k in scale_up if k != "pcie"]
    found["scale_up"] = one_of(scale_up, "scale-up interconnects")
    found["provider"] = one_of([prefix for pattern, prefix in vocab.PROVIDERS.items() for _ in sc.scan(bounded(pattern), NEEDLES.get(pattern))],
                             "cloud providers")


BYTES_RATE = re.compile(r"\d[ ]?[GT]B(?:/s|ps)\b")
"""A rate said in bytes per second: a capital B after G or T ("50 GB/s", "400GBps"); "Gb/s", "Gbps", "gbps" are bits,
as NIC line rates are sold. The scanner lower-cases the query, so this reads the original text."""


def _line_rate_gbps(sc: Scanner, m: re.Match[str], rate: float, found: dict) -> float:
    """``rate`` as said in ``m``, in Gb/s: a rate said in bytes per second (:data:`BYTES_RATE`) is 8 times as many
    bits, said in the notes ("400 GB/s" was read as a 400 Gb/s NIC: 8 times too slow)."""
    said = sc.original[m.start():m.end()]
    if BYTES_RATE.search(said) is None:
        return rate
    known = sorted({r for _, r in vocab.IB_GENERATIONS.values()} | set(vocab.ETHERNET_SPEEDS_GBPS)
                   | set(vocab.ROCE_SPEEDS_GBPS))
    if int(rate * 8) not in known:  # "400 GB/s": a node's total, most likely; no NIC runs at 3,200 Gb/s
        rates = ", ".join(f"{r:g}" for r in known)
        raise QueryError(f"{said.strip()!r} is bytes per second, {rate * 8:g} Gb/s, and no NIC in the catalogue "
                         f"runs at that line rate ({rates} Gb/s); for a node's total say e.g. '8x 400 Gb/s'")
    found["notes"] = (*found.get("notes", ()), f"read {said.strip()!r} as {rate * 8:g} Gb/s (bytes per second, 8 bits "
                      f"each: NIC line rates are sold in Gb/s; write Gb/s for bits)")
    return rate * 8


def link_for(family: str, rate_gbps: float) -> str | None:
    """Catalogue link of a fabric family at a line rate ("infiniband", 200 -> "ib-hdr"), None if none."""
    rate = int(rate_gbps)
    if family == "infiniband":
        return next((link for link, r in vocab.IB_GENERATIONS.values() if r == rate), None)
    if family == "ethernet" and rate in vocab.ETHERNET_SPEEDS_GBPS:
        return f"eth-{rate}g"
    if family == "roce" and rate in vocab.ROCE_SPEEDS_GBPS:
        return f"roce-{rate}g"
    return None


def _merge_rate_with_family(nets: list[NetworkMention]) -> list[NetworkMention]:
    """"200 Gbps InfiniBand" is one network: a bare speed plus a fabric word without speed join up."""
    rates = [n for n in nets if n.family == "rate"]
    families = [n for n in nets if n.family != "rate" and n.link is None]
    if len(rates) != 1 or len(families) != 1:
        return nets
    rate, fam = rates[0], families[0]
    link = link_for(fam.family, rate.rate_gbps or 0)
    if link is None:
        raise QueryError(f"{fam.family} at {rate.rate_gbps:g} Gb/s is not in the link catalogue; "
                         f"run `commmodel profiles show` for the links, or name one such as ib-ndr or eth-100g")
    merged = NetworkMention(family=fam.family, link=link, rate_gbps=rate.rate_gbps,
                            nics_per_node=rate.nics_per_node or fam.nics_per_node, position=min(rate.position, fam.position))
    return [n for n in nets if n is not rate and n is not fam] + [merged]
