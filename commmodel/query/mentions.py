"""What the query parser read: the mentions it found and the :class:`ParsedQuery` that holds them.

Plain frozen records; ``None`` always means "the query did not say" (the answer step then assumes
a value and lists it).
"""

from typing import NamedTuple


class GpuMention(NamedTuple):
    """A GPU type named in the query."""

    family: str
    """Canonical family: a100, h100, h200, b200, gb200, gh200, v100, rtx-2080ti, rtx-4090, l40s."""
    memory_gb: int | None
    """Memory variant when said ("A100 40GB")."""
    form: str | None
    """Form factor when said (sxm, pcie, nvl)."""
    position: int
    """Character offset in the query (orders baselines in a comparison)."""


class SystemMention(NamedTuple):
    """A shipped system named in the query ("DGX A100", "p4d")."""

    name: str
    """Profile name."""
    position: int
    """Character offset in the query."""


class NetworkMention(NamedTuple):
    """A scale-out network named in the query."""

    family: str
    """infiniband, ethernet, roce, efa, tcpx, tcpxo, slingshot, omnipath, "rate" (a bare speed), or "Nx NICs"
    (more NICs of the node's own link, see ``nic_multiplier``)."""
    link: str | None
    """Catalogue link when the words fix it (ib-ndr, eth-100g ...); None when the speed is assumed."""
    rate_gbps: float | None
    """Line rate per NIC in Gb/s when said."""
    nics_per_node: int | None
    """NICs per node when said ("8x NDR", "1x 400GbE")."""
    position: int
    """Character offset in the query."""
    nic_multiplier: float | None = None
    """"2x more NICs": the node's own link with this many times its NICs (family is then "2x NICs")."""


class ModelMention(NamedTuple):
    """A model named in the query: a preset key, a parameter count, or both."""

    text: str
    """The words as written."""
    family: str | None
    """Normalised family prefix (llama3, gpt3 ...) or None for a bare count."""
    num_params: float | None
    """Parameter count when a size was given ("70B" -> 7e10)."""
    size_text: str | None
    """The size token normalised ("70b", "1.3b", "350m")."""

    @property
    def preset_key(self) -> str | None:
        """Family and size joined the way presets are named ("llama3-70b"), or the family alone."""
        if self.family is None:
            return None
        return f"{self.family}-{self.size_text}" if self.size_text else self.family


class ParsedQuery(NamedTuple):
    """Everything read from the query; None means "not said" (the answer step assumes and says so)."""

    text: str
    num_gpus: int | None = None
    num_nodes: int | None = None
    gpus_per_node: int | None = None
    systems: tuple[SystemMention, ...] = ()
    gpus: tuple[GpuMention, ...] = ()
    networks: tuple[NetworkMention, ...] = ()
    nics_per_node: int | None = None
    scale_up: str | None = None
    provider: str | None = None
    model: ModelMention | None = None
    collective: str | None = None
    algorithm: str | None = None
    """The collective algorithm asked for ("ring all-reduce"); None: the library's own choice."""
    library: str | None = None
    libraries: tuple[str, ...] = ()
    """The libraries a what-if compares, baseline first ("gloo vs nccl"); ``library`` is then None."""
    size_bytes: float | None = None
    global_batch: int | None = None
    batch_tokens: float | None = None
    train_tokens: float | None = None
    """Tokens the whole training run sees ("on 1T tokens"): the answer adds the time it takes."""
    micro_batch: int | None = None
    grad_accum_steps: int | None = None
    seq_len: int | None = None
    dtype: str | None = None
    dtypes: tuple[str, ...] = ()
    """The dtypes a what-if compares, baseline first ("fp8 vs bf16"); ``dtype`` is then None."""
    stack: str | None = None
    stacks: tuple[str, ...] = ()
    """The training stacks a what-if compares, baseline first ("fsdp2 vs megatron-core"); ``stack`` is then None."""
    flash_attention: bool | None = None
    """Fused attention said on ("with flash attention") or off ("unfused attention"); None: the stack's."""
    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    ep: int | None = None
    dp: int | None = None
    """Data-parallel degree said ("DP 8"): with tp, pp and cp it fixes or checks the GPU count."""
    zero: int | None = None
    recompute: str | None = None
    sequence_parallel: bool | None = None
    what_if: bool = False
    how_many: bool = False
    """"How many GPUs do I need": with no count said, the answer searches for the fewest that fit."""
    baseline_after_instead_of: int | None = None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """The ``parsed`` block of ``query --json`` (only what was said)."""
        out = {}
        for key, value in self._asdict().items():
            flag_off = value is False and key in ("what_if", "how_many")
            if key in ("text", "baseline_after_instead_of") or value is None or value == () or flag_off:
                continue
            if key == "model":
                value = {"text": self.model.text, "preset_key": self.model.preset_key,
                         "num_params": self.model.num_params}
            elif key in ("gpus", "networks", "systems"):
                value = [{k: v for k, v in item._asdict().items() if k != "position" and v is not None}
                         for item in value]
            out[key] = list(value) if isinstance(value, tuple) else value
        return out


def describe(parsed: ParsedQuery) -> str:
    """A short human summary of what was understood ("16 GPUs, A100, ib-hdr, all_reduce 1e+09 B")."""
    parts = []
    if parsed.num_gpus:
        parts.append(f"{parsed.num_gpus} GPUs")
    if parsed.num_nodes:
        parts.append(f"{parsed.num_nodes} nodes")
    if parsed.gpus_per_node:
        parts.append(f"{parsed.gpus_per_node} GPUs per node")
    parts += [s.name for s in parsed.systems]
    if parsed.provider:
        parts.append(parsed.provider)
    parts += [g.family.upper() for g in parsed.gpus]
    parts += [n.link or f"{n.family}{f' {n.rate_gbps:g} Gb/s' if n.rate_gbps else ''}" for n in parsed.networks]
    if parsed.model:
        parts.append(f"model {parsed.model.text}")
    if parsed.collective:
        parts.append(parsed.collective + (f" ({parsed.algorithm})" if parsed.algorithm else ""))
    if parsed.library:
        parts.append(f"library {parsed.library}")
    for key in ("libraries", "dtypes", "stacks"):
        if getattr(parsed, key):
            parts.append(f"{key} {' vs '.join(getattr(parsed, key))}")
    if parsed.size_bytes is not None:
        parts.append(f"size {parsed.size_bytes:g} B")
    for key in ("global_batch", "micro_batch", "grad_accum_steps", "seq_len", "dtype", "tp", "pp", "cp", "ep", "dp",
                "zero", "recompute", "sequence_parallel", "flash_attention", "train_tokens"):
        value = getattr(parsed, key)
        if value is not None:
            parts.append(f"{key} {value}")
    if parsed.what_if:
        parts.append("what-if")
    return ", ".join(parts)
