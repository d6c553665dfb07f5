"""Turn a :class:`ParsedQuery` into concrete inputs: systems, GPU count, model, batch — and say what was assumed.

Pure: the shipped systems, the link catalogue and the GPU catalogue come in as arguments (the CLI
loads them). Every value the query did not state is filled with a documented default and recorded
as an :class:`Assumption` naming the flag (or the words) that override it.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from commmodel.errors import QueryError
from commmodel.hardware.catalogue import LinkSpec, compose_system, with_network
from commmodel.hardware.models import System
from commmodel.query.hardware_words import CLOUD_PREFIXES, SERVER_WORDS
from commmodel.query.mentions import GpuMention, NetworkMention, ParsedQuery

DEFAULT_GPU = "h100"
"""GPU family assumed when the query names none (the most common training GPU in 2024-2025)."""
DEFAULT_MODEL = "llama2-7b"
"""Model assumed for a training question that names none (a common 7B dense model)."""
DEFAULT_COLLECTIVE_SIZE_BYTES = 2.0**30
"""Message size assumed for a collective question without one (1 GiB: bandwidth-bound on every fabric)."""

# Link chosen for a fabric named without a speed, by GPU generation: what that generation's reference
# nodes ship with (DGX A100: HDR / 200G; DGX H100, H200, B200: NDR / 400G; AWS p4d EFA v1, p5 EFA v2,
# p5e/p5en EFA v3, p6 EFA v4; GB200 NVL72 ConnectX-7 NDR).
_FAMILY_DEFAULT_LINK: dict[str, dict[str, str]] = {
    "infiniband": {"a100": "ib-hdr", "v100": "ib-edr", "*": "ib-ndr"},
    "roce": {"a100": "roce-200g", "v100": "roce-100g", "*": "roce-400g"},
    "ethernet": {"*": "eth-100g"},
    "efa": {"a100": "efa-v1", "h100": "efa-v2", "h200": "efa-v3", "b200": "efa-v4", "*": "efa-v2"},
}
# Scale-up link used to compose a node when no shipped system carries the GPU (or the query asks for
# PCIe and no shipped node with that GPU has it), by catalogue-name prefix: the GPU's own NVLink
# generation for SXM parts, its PCIe generation otherwise (NVIDIA datasheets: V100 SXM2 NVLink 2 and
# PCIe 3; A100 PCIe 4; H100/H200 PCIe 5; L40S and RTX 4090 PCIe 4 without NVLink; RTX 2080 Ti PCIe 3).
_COMPOSE_SCALE_UP: dict[str, str] = {
    "a100-pcie": "pcie4", "h100-pcie": "pcie5", "l40s": "pcie4", "v100": "nvlink2", "rtx-4090": "pcie4-host",
    "rtx-2080ti": "pcie3-host", "a100": "nvlink3", "h100": "nvlink4", "h800": "nvlink4-h800", "h200": "nvlink4", "b200": "nvlink5",
    "gh200": "nvlink4", "gb200": "nvlink5",
}
_PCIE_GENERATION: dict[str, str] = {"v100": "pcie3", "rtx-2080ti": "pcie3", "a100": "pcie4", "l40s": "pcie4",
                                    "rtx-4090": "pcie4", "*": "pcie5"}
"""PCIe generation of a GPU family's host interface (datasheets); Hopper and Blackwell are PCIe 5."""

# Network of a composed node: DGX-1 (V100) shipped 4 × EDR InfiniBand (NVIDIA DGX-1 datasheet); for
# H800 nodes 8 x 400 Gb/s InfiniBand, one per GPU (DeepSeek-V3 report, arXiv:2412.19437 §3.1 and §3.2.2:
# "IB (50 GB/s)" per GPU); for other composed (PCIe) servers one 100 GbE NIC is assumed and stated.
_COMPOSE_SCALE_OUT: dict[str, tuple[str, int]] = {"v100": ("ib-edr", 4), "h800": ("ib-ndr", 8), "*": ("eth-100g", 1)}

NVLINK2_BW = "150 GB/s"
"""NVLink 2 per V100 SXM2: 6 links × 25 GB/s per direction (NVIDIA Tesla V100 datasheet: 300 GB/s
bidirectional), used when the link catalogue has no ``nvlink2`` entry; latency and efficiency are
taken from nvlink3 (same NCCL transport)."""


def _scale_up_link(name: str, links: dict[str, LinkSpec]) -> LinkSpec:
    """Catalogue link ``name``; ``nvlink2`` is derived from nvlink3 when the catalogue lacks it."""
    if name in links:
        return links[name]
    if name == "nvlink2" and "nvlink3" in links:
        base = links["nvlink3"]
        return base.model_copy(update={
            "name": "nvlink2", "kind": "nvlink_direct", "description": "NVLink 2 (V100 SXM2), 6 links x 25 GB/s/dir",
            "bw_bytes_per_s": type(base.bw_bytes_per_s).model_validate(
                {"value": NVLINK2_BW, "source": "NVIDIA Tesla V100 datasheet: NVLink 300 GB/s bidirectional (halved)"}),
            "in_network_reduction": None})
    raise QueryError(f"scale-up link {name!r} is not in the link catalogue; pass --system PATH.yaml")


def _by_prefix(table: dict[str, Any], gpu_name: str) -> Any:
    key = next((k for k in sorted(table, key=len, reverse=True) if k != "*" and gpu_name.startswith(k)), "*")
    return table.get(key)


def compose_node(gpu_name: str, scale_up_name: str, system_gpus: dict[str, Any], links: dict[str, LinkSpec],
                 notes: "Assumptions", why: str) -> System:
    """An 8-GPU node of ``gpu_name`` over ``scale_up_name`` with the composed default network, said as assumed."""
    per_node = 8
    out_name, nics = _by_prefix(_COMPOSE_SCALE_OUT, gpu_name)
    system = compose_system(f"{per_node}x-{gpu_name}-{scale_up_name}", system_gpus[gpu_name], per_node,
                            _scale_up_link(scale_up_name, links), links[out_name], nics)
    notes.add("system", system.name, f"{why}; composed {per_node} per node over {scale_up_name} with {nics} × "
              f"{out_name}", "pass --system PATH.yaml, --gpus-per-node, or name the network (e.g. 'NDR')")
    return system


class Assumption(NamedTuple):
    """One value the query did not state."""

    field: str
    """What was assumed (gpu_type, num_gpus, model, global_batch ...)."""
    value: Any
    """The value used."""
    reason: str
    """Why this value."""
    override: str
    """The flag or the words that change it."""

    def to_json(self) -> dict:
        return {"field": self.field, "value": self.value, "reason": self.reason, "override": self.override}


@dataclass
class Assumptions:
    """The assumptions collected while resolving, in order."""

    items: list[Assumption] = field(default_factory=list)

    def add(self, field_name: str, value: Any, reason: str, override: str) -> None:
        item = Assumption(field_name, value, reason, override)
        if item not in self.items:  # a what-if resolves each target alike; say it once
            self.items.append(item)

    def replace(self, field_name: str, value: Any, reason: str, override: str) -> None:
        """Say ``field_name`` once more, in place of what was said about it (a value known only later)."""
        self.items = [a for a in self.items if a.field != field_name]
        self.add(field_name, value, reason, override)


class Target(NamedTuple):
    """A system to answer on, with the label shown for it."""

    label: str
    system: System


def gpu_names_for(mention: GpuMention, gpu_catalogue: dict[str, Any]) -> list[str]:
    """Catalogue GPU names matching a mention ("A100 40GB" -> ["a100-sxm-40gb"]), best first."""
    names = [n for n in gpu_catalogue if n == mention.family or n.startswith(mention.family + "-")
             or n.replace("-", "").startswith(mention.family.replace("-", ""))]
    if mention.memory_gb:
        names = [n for n in names if f"{mention.memory_gb}gb" in n]
    if mention.form == "pcie":
        names = [n for n in names if "pcie" in n]
    elif mention.form:
        names = [n for n in names if "pcie" not in n]
    # SXM before PCIe, then the larger memory (A100 80GB is the DGX A100 / Megatron-LM reference)
    return sorted(names, key=lambda n: ("pcie" in n, -int("".join(c for c in n.split("-")[-1] if c.isdigit()) or 0)))


def _score(system: System, gpu_names: list[str], parsed: ParsedQuery, network: NetworkMention | None) -> tuple:
    scale_up = parsed.scale_up
    kind = system.scale_up.kind
    up_ok = scale_up is None or (scale_up == "nvlink" and kind in ("nvswitch", "nvlink_direct", "nvlink_c2c")) or \
        (scale_up == "pcie" and kind.startswith("pcie")) or (scale_up == "pcie_host" and kind == "pcie_host")
    out = system.scale_out
    same_link = bool(network and network.link and out and out.link == network.link)
    same_family = bool(network and out and out.kind == network.family)
    # NVIDIA's own servers first, then other vendor-neutral nodes (gb200-nvl72), then a cloud's instance
    reference = 2 if system.name.startswith(SERVER_WORDS) else int(not system.name.startswith(CLOUD_PREFIXES))
    provider = bool(parsed.provider and system.name.startswith(parsed.provider + "-"))
    return (up_ok, provider, same_link, same_family, reference, -gpu_names.index(system.gpu.name))


def _scale_up_ok(system: System, parsed: ParsedQuery) -> bool:
    return _score(system, [system.gpu.name], parsed, None)[0]


def base_system(parsed: ParsedQuery, gpu: GpuMention | None, network: NetworkMention | None,
                systems: Mapping[str, System], links: dict[str, LinkSpec], gpus: dict[str, Any],
                notes: Assumptions) -> System:
    """The shipped system that best matches the GPU type, scale-up hint and network (or a composed one)."""
    if gpu is None:
        gpu = GpuMention(family=DEFAULT_GPU, memory_gb=None, form=None, position=-1)
        notes.add("gpu_type", DEFAULT_GPU.upper(), "the query names no GPU or system",
                  "name one in the query (e.g. 'A100', 'DGX H100') or pass --system NAME")
    names = gpu_names_for(gpu, gpus)
    if not names:
        raise QueryError(f"GPU {gpu.family.upper()}{f' {gpu.memory_gb}GB' if gpu.memory_gb else ''} is not in the GPU "
                         f"catalogue; known: {', '.join(sorted(gpus))}; or pass --system PATH.yaml")
    with_gpus = getattr(systems, "with_gpus", None)  # io.profiles.ShippedSystems validates only these
    candidates = with_gpus(names) if with_gpus else [s for s in systems.values() if s.gpu.name in names]
    if parsed.scale_up in ("pcie", "pcie_host") and not any(_scale_up_ok(s, parsed) for s in candidates):
        # "over PCIe": no shipped node with this GPU has it; use the GPU's PCIe part where the catalogue has one.
        pcie_names = gpu_names_for(GpuMention(gpu.family, gpu.memory_gb, "pcie", gpu.position), gpus) or names
        gen = _by_prefix(_PCIE_GENERATION, pcie_names[0])
        link = gen + "-host" if parsed.scale_up == "pcie_host" else gen
        return compose_node(pcie_names[0], link, gpus, links, notes,
                            f"the query asks for PCIe and no shipped {gpu.family.upper()} node has it")
    if candidates:
        best = max(candidates, key=lambda s: (_score(s, names, parsed, network), s.name))
        if len(candidates) > 1:
            notes.add("system", best.name, f"the shipped node with {best.gpu.name}"
                      f"{' and ' + network.link if network and network.link else ''} closest to the query",
                      "pass --system NAME (see `commmodel profiles list`)")
        return best
    scale_up = _by_prefix(_COMPOSE_SCALE_UP, names[0])
    if scale_up is None:
        raise QueryError(f"no shipped system has {names[0]} GPUs and its scale-up link is not known; "
                         f"pass --system PATH.yaml (see docs/profiles.md)")
    return compose_node(names[0], scale_up, gpus, links, notes, f"no shipped system has {names[0]}")


def apply_network(system: System, network: NetworkMention | None, parsed: ParsedQuery, links: dict[str, LinkSpec],
                  notes: Assumptions) -> System:
    """``system`` with the network the query names (keeping the node's NIC count unless it says one); with no network
    named but a NIC count said ("with 2 NICs per node"), the node's own link at that count."""
    if network is None:
        return _own_link_nics(system, parsed.nics_per_node, links, notes)
    if network.nic_multiplier is not None:
        return _more_nics(system, network.nic_multiplier, links, notes)
    link_name = network.link
    family = network.family
    if family == "rate":
        family = system.scale_out.kind if system.scale_out else "ethernet"
        from commmodel.query.hardware_words import link_for

        link_name = link_for(family, network.rate_gbps or 0)
        if link_name is None:
            raise QueryError(f"a {network.rate_gbps:g} Gb/s {family} link is not in the catalogue; "
                             f"name the fabric, e.g. '400G RoCE' or 'NDR'")
        notes.add("network", link_name, f"{network.rate_gbps:g} Gb/s read as {family} (the fabric of {system.name})",
                  "name the fabric: 'NDR', '400GbE', '200G RoCE' or --network LINK:N")
    elif link_name is None:
        out = system.scale_out
        if out is not None and out.kind == family:
            return system
        table = _FAMILY_DEFAULT_LINK.get(family, {})
        gen = next((g for g in table if g != "*" and system.gpu.name.startswith(g)), "*")
        link_name = table.get(gen)
        if link_name is None:
            raise QueryError(f"say which {family} link to use, e.g. '{family} 400G'; known links: {', '.join(sorted(links))}")
        notes.add("network", link_name, f"{family} without a speed: what {system.gpu.name.split('-')[0].upper()} "
                  f"nodes usually ship with", "give the speed in the query (e.g. 'NDR', '100GbE') or --network LINK:N")
    nics = network.nics_per_node or parsed.nics_per_node
    unchanged = system.scale_out is not None and system.scale_out.link == link_name
    if nics is None and (parsed.what_if or not unchanged):
        # a what-if changes the technology, not the NIC count: "from 100GbE to NDR" on 8 NICs is 8 x each
        nics, why = _kept_nics(system, links[link_name])
        notes.add("nics_per_node", nics, f"{link_name} with {why}"
                  + (" (a what-if on the network keeps the NIC count)" if parsed.what_if else ""),
                  f"say e.g. '1x {link_name}' or '8 NICs', or --network {link_name}:N")
    if unchanged and nics in (None, system.scale_out.nics_per_node):
        return system
    return with_network(system, links[link_name], nics)


def _own_link_nics(system: System, nics: int | None, links: dict[str, LinkSpec], notes: Assumptions) -> System:
    """The node with ``nics`` of its own scale-out NICs (unchanged where none is said or it already has that many)."""
    out = system.scale_out
    if nics is None or (out is not None and out.nics_per_node == nics):
        return system
    if out is None or out.link not in links:
        raise QueryError(f"{system.name} has no catalogue network to set {nics} NICs of; name the network too, e.g. "
                         f"'{nics}x NDR'")
    notes.add("nics_per_node", nics, f"{nics} of the {out.link} NICs of a {system.name} node (it ships "
              f"{out.nics_per_node})", f"--network {out.link}:N")
    return with_network(system, links[out.link], nics)


def _kept_nics(system: System, link: LinkSpec) -> tuple[int, str]:
    """(NICs, why) when ``link`` replaces a node's network: the node's NIC count, but at most one per GPU where the new
    NIC is faster than the old (nodes carry more NICs than GPUs only of slower ones: OCI BM.GPU4.8's 16 × 100G RoCE is
    two per A100; a 400G NIC per GPU is what such nodes ship with, e.g. DGX H100's 8 × 400G)."""
    out = system.scale_out
    if out is None:
        return system.gpus_per_node, f"one NIC per GPU of a {system.name} node"
    if out.nics_per_node > system.gpus_per_node and link.bw_bytes_per_s.value > out.nic_bw_bytes_per_s.value:
        return system.gpus_per_node, (f"one NIC per GPU ({system.name} has {out.nics_per_node} slower NICs, "
                                      f"two per GPU)")
    return out.nics_per_node, f"the NIC count of a {system.name} node"


def _more_nics(system: System, factor: float, links: dict[str, LinkSpec], notes: Assumptions) -> System:
    """"2x more NICs": the node's own scale-out link, ``factor`` times as many NICs (rounded, at least one more)."""
    out = system.scale_out
    if out is None or out.link not in links:
        raise QueryError(f"{system.name} has no catalogue network to add NICs to; name the network, e.g. '16x NDR'")
    nics = max(out.nics_per_node + 1, round(out.nics_per_node * factor))
    notes.add("nics_per_node", nics, f"{factor:g}x the {out.nics_per_node} {out.link} NICs of a {system.name} node",
              f"say the count, e.g. '{nics}x {out.link}', or --network {out.link}:N")
    return with_network(system, links[out.link], nics)


def global_batch(parsed: ParsedQuery, said: int | None, model: Any, num_gpus: int, per_node: int,
                 notes: Assumptions) -> int:
    """The global batch in sequences: ``said`` (--global-batch) or the query's; from its tokens ("batch of 4M
    tokens", rounded to a multiple of the nodes); from a pinned micro-batch × accumulation steps × the data-parallel
    GPUs (those outside the tp/pp/cp the query pins); else the planner's default for the model's size."""
    from commmodel.planner.search import default_global_batch

    if said or parsed.global_batch:
        return int(said or parsed.global_batch)
    unit = max(1, num_gpus // per_node)
    if parsed.batch_tokens:
        sequences = max(1, round(parsed.batch_tokens / model.seq_len / unit)) * unit
        notes.add("global_batch", sequences, f"{parsed.batch_tokens:g} tokens / seq {model.seq_len}, rounded to a "
                  f"multiple of the {unit} nodes", "say 'batch 1024' or --global-batch")
        return sequences
    if parsed.micro_batch and parsed.grad_accum_steps:
        dp = max(1, num_gpus // ((parsed.tp or 1) * (parsed.pp or 1) * (parsed.cp or 1)))
        batch = parsed.micro_batch * parsed.grad_accum_steps * dp
        notes.add("global_batch", batch, f"micro-batch {parsed.micro_batch} × {parsed.grad_accum_steps} accumulation "
                  f"steps × data-parallel {dp} (the GPUs outside the tp, pp and cp the query pins)",
                  "say 'batch 1024' or --global-batch")
        return batch
    batch = default_global_batch(model.num_params, model.seq_len, num_gpus, per_node)
    notes.add("global_batch", batch, f"~{batch * model.seq_len / 1e6:.1f}M tokens per step (GPT-3/Llama-2 practice "
              f"for this size), a multiple of the node count", "say 'batch 1024' or --global-batch")
    return batch


def _said_dp(parsed: ParsedQuery, num: int | None, notes: Assumptions) -> int | None:
    """The GPU count with a said dp: tp·pp·cp·dp when no count is said (the degrees not said are 1), else the
    count, which must be that product when tp and pp are said; dp with tp or pp free is not a pin the search has."""
    if parsed.dp is None:
        return num
    product = parsed.dp * (parsed.tp or 1) * (parsed.pp or 1) * (parsed.cp or 1)
    if num is None:
        notes.add("num_gpus", product, f"tp × pp × cp × dp = {product} (the degrees the query does not say are 1)",
                  "say e.g. '64 GPUs' or --gpus N")
        return product
    if parsed.tp is None or parsed.pp is None or product != num:
        raise QueryError(f"dp {parsed.dp} with {num} GPUs: say tp and pp too, with tp × pp × cp × dp = {num} "
                         f"(now {product}), or drop dp and let the search choose it")
    return num


def gpu_count(parsed: ParsedQuery, gpus: int | None, gpus_per_node: int | None, system: System, notes: Assumptions,
              multi_node_default: bool) -> tuple[int, int]:
    """(GPUs, GPUs per node) from the query, the flags (``gpus``, ``gpus_per_node``: --gpus, --gpus-per-node) and the
    system; with no count said, one node (two where a network is named, so that it matters)."""
    per_node = gpus_per_node or parsed.gpus_per_node
    num = _said_dp(parsed, gpus or parsed.num_gpus, notes)
    nodes = parsed.num_nodes
    if num is None and nodes is not None:
        num = nodes * (per_node or system.gpus_per_node)
        if per_node is None:
            notes.add("gpus_per_node", system.gpus_per_node, f"all GPUs of a {system.name} node",
                      "say '4 GPUs per node' or --gpus-per-node")
    elif num is not None and nodes is not None and per_node is None:
        if num % nodes:
            raise QueryError(f"{num} GPUs do not split evenly over {nodes} nodes; fix the counts")
        per_node = num // nodes
    if num is None and system.scale_up.domain_size > system.gpus_per_node:  # an NVLink rack: its domain, not a tray
        domain = system.scale_up.domain_size
        num = domain * (2 if multi_node_default else 1)
        notes.add("num_gpus", num, "the query gives no GPU count: " +
                  (f"two {domain}-GPU NVLink racks, so the network matters" if multi_node_default
                   else f"one {system.name} NVLink domain ({domain} GPUs, a rack)"),
                  "say e.g. '64 GPUs' or '2 racks', or --gpus N")
    if num is None:
        num = system.gpus_per_node * (2 if multi_node_default else 1)
        notes.add("num_gpus", num, "the query gives no GPU count: " +
                  ("two nodes, so the network matters" if multi_node_default else f"one {system.name} node"),
                  "say e.g. '64 GPUs' or '4 nodes', or --gpus N")
    if per_node is not None and per_node > system.gpus_per_node:
        raise QueryError(f"{per_node} GPUs per node is more than the {system.gpus_per_node} of a {system.name} node")
    return num, per_node or min(num, system.gpus_per_node)
