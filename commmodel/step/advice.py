"""Advice: concrete changes to a layout, its options or its network, each re-evaluated (DESIGN §5).

Candidates are neighbours of the current configuration that address what the breakdown shows
(accumulation, compression, overlap, bucket size, TP inside the node, moving a factor of two between
tp/pp/dp, micro-batch, interleaving, sequence parallelism, recompute, ZeRO, asynchronous updates,
all-reduce instead of a parameter server, a faster network). Every candidate goes through the same
vectorised evaluator; those that fit, are valid and raise tokens/s by at least ``MIN_GAIN`` are
returned, best first. Gains are in throughput (tokens/s), so a larger global batch competes fairly.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from commmodel.hardware.catalogue import LinkSpec, with_network
from commmodel.hardware.models import System
from commmodel.step.buckets import effective_bucket_bytes
from commmodel.step.evaluate import evaluate_layouts
from commmodel.step.layout import Layout, LayoutArrays
from commmodel.step.layout_rules import layout_divisibility_masks
from commmodel.step.options import DEFAULT_MEMORY_HEADROOM_BYTES, FIXED_BUCKET, StepOptions
from commmodel.step.placement import Placement
from commmodel.units import format_size
from commmodel.workload.model import TransformerModel

MIN_GAIN = 0.01
"""Only changes that raise tokens/s by at least 1% are advised (any change that makes a layout
that does not fit fit is advised, ranked by throughput)."""

MAX_ADVICE = 6
"""At most this many pieces of advice."""


class Advice(NamedTuple):
    """One suggested change and what the model predicts for it."""

    change: str
    """What to change, in words (e.g. "tp 8 → 4, dp 4 → 8")."""
    layout: Layout
    """The changed layout (the same as before for option or network changes)."""
    options: StepOptions
    """The changed options."""
    system: str
    """System (network) the prediction is for."""
    step_time_s: float
    """Predicted step time after the change."""
    tokens_per_s: float
    """Predicted throughput after the change."""
    gain_pct: float
    """Throughput gain over the current configuration, in percent."""
    note: str = ""
    """Caveat (lossy, changes the optimisation, needs hardware)."""

    def to_json(self) -> dict[str, Any]:
        """JSON record of the advice."""
        return {"change": self.change, "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s,
                "gain_pct": self.gain_pct, "system": self.system, "layout": self.layout.model_dump(),
                "note": self.note}


def _layout_candidates(model: TransformerModel, system: System, layout: Layout) -> list[tuple[str, Layout, str]]:
    x = layout
    out: list[tuple[str, Layout, str]] = []

    def add(change: str, note: str = "", **update: Any) -> None:
        out.append((change, x.model_copy(update=update), note))

    gpn = system.gpus_per_node
    if x.tp > gpn:
        factor = x.tp // gpn
        add(f"move TP inside the node: tp {x.tp} → {gpn}, dp {x.dp} → {x.dp * factor}", tp=gpn, dp=x.dp * factor,
            sequence_parallel=x.sequence_parallel and gpn > 1)
    for a_name, b_name in (("tp", "dp"), ("dp", "tp"), ("pp", "dp"), ("dp", "pp"), ("tp", "pp"), ("pp", "tp")):
        a_val, b_val = getattr(x, a_name), getattr(x, b_name)
        if a_val % 2 == 0:
            update = {a_name: a_val // 2, b_name: b_val * 2}
            if update.get("tp", 2) == 1:
                update["sequence_parallel"] = False
            if update.get("pp", 2) == 1:
                update["vpp"] = 1
            if update.get("dp", 2) == 1:
                update["zero"] = 0
            add(f"{a_name} {a_val} → {a_val // 2}, {b_name} {b_val} → {b_val * 2}", **update)
    if x.micro_batch > 1:
        add(f"micro-batch {x.micro_batch} → {x.micro_batch // 2}", micro_batch=x.micro_batch // 2)
    add(f"micro-batch {x.micro_batch} → {x.micro_batch * 2}", micro_batch=x.micro_batch * 2)
    add(f"global batch {x.global_batch} → {x.global_batch * 2} (twice the gradient accumulation)",
        "a larger batch changes the optimisation (learning-rate schedule)", global_batch=x.global_batch * 2)
    if x.pp > 1:
        for v in (2, 3, 4):
            if v != x.vpp:
                add(f"interleaved pipeline: vpp {x.vpp} → {v}", vpp=v)
    if x.tp > 1 and not x.sequence_parallel:
        add("turn on sequence parallelism", sequence_parallel=True)
    for rc in ("none", "selective"):
        if rc != x.recompute:
            add(f"recompute {x.recompute} → {rc}", recompute=rc)
    if x.dp > 1:
        for z in range(4):
            if z != x.zero:
                add(f"ZeRO stage {x.zero} → {z}", zero=z)
    # Memory rescues: several savers at once (single changes rarely recover a large overshoot), each named by what
    # it changes in this layout (nothing changed: not offered)
    sp = x.tp > 1
    savers = [{"recompute": "selective", "sequence_parallel": sp, "zero": 1 if x.dp > 1 else 0},
              {"recompute": "full", "sequence_parallel": sp, "zero": 3 if x.dp > 1 else 0}]
    savers += [{"pp": x.pp * f, "dp": x.dp // f, "recompute": "selective", "sequence_parallel": sp,
                "zero": x.zero if x.dp // f > 1 else 0} for f in (2, 4, 8) if x.dp % f == 0]
    for update in savers:
        label = _change_words(x, x.model_copy(update=update))
        if label:
            add(label, **update)
    return out


_RECOMPUTE_ORDER = {"none": 0, "selective": 1, "full": 2}
"""Recompute policies by how little they keep (op and moe, partial policies, are not ranked: no "save memory")."""


def _change_words(old: Layout, new: Layout) -> str:
    """What ``new`` changes in ``old``, in words ("pp 1 → 2, dp 8 → 4, recompute full → selective"), prefixed "save
    memory: " when every change keeps less (more pipeline stages, more recompute, sequence parallelism on, a higher
    ZeRO stage); "" when nothing changes."""
    words, saves = [], True
    for field in ("pp", "dp", "recompute", "sequence_parallel", "zero"):
        a, b = getattr(old, field), getattr(new, field)
        if a == b:
            continue
        if field == "sequence_parallel":
            words.append(f"sequence parallelism {'on' if b else 'off'}")
            saves &= bool(b)
        elif field == "recompute":
            words.append(f"recompute {a} → {b}")
            saves &= _RECOMPUTE_ORDER.get(b, -1) > _RECOMPUTE_ORDER.get(a, 99)
        else:
            words.append(f"{'ZeRO stage' if field == 'zero' else field} {a} → {b}")
            saves &= field == "dp" or b > a
    return ("save memory: " if saves else "") + ", ".join(words) if words else ""


EXPOSED_A2A_FLAG = 0.05
"""The MoE all-to-all is flagged when its exposed time exceeds this fraction of the step."""


def moe_flags(system: System, layout: Layout, row: dict[str, Any]) -> list[str]:
    """Say so when the expert all-to-all is exposed, where its group sits and what would change it."""
    exposed = row.get("ep/all_to_all/exposed_s", 0.0)
    share = exposed / row["step_time_s"]
    if share <= EXPOSED_A2A_FLAG:
        return []
    place = Placement(system, tp=layout.tp, cp=layout.cp, dp=layout.dp, pp=layout.pp, ep=layout.ep, etp=layout.etp)
    where = ("leaves the NVLink domain: ep × etp beyond the domain sends (n−r)/n of every dispatch over the network; "
             "keep EP inside the NVLink domain (lower ep or etp)") if bool(place.crosses_domains("ep")) else (
            "stays inside the NVLink domain; overlap dispatch/combine with the other micro-batch's compute "
            "(--moe-a2a-overlap: Megatron --overlap-moe-expert-parallel-comm)")
    return [f"MoE all-to-all is exposed: {share:.0%} of the step (ep {layout.ep}); the EP group {where}"]


def straddle_flags(system: System, layout: Layout) -> list[str]:
    """Say so where EP (ep·etp ranks) or TP groups that fit one NVLink domain straddle a domain boundary: they are priced as if
    inside one (:meth:`Placement.straddles_domain`), which holds only if the job places whole groups per domain."""
    place = Placement(system, tp=layout.tp, cp=layout.cp, dp=layout.dp, pp=layout.pp, ep=layout.ep, etp=layout.etp)
    out = []
    for group, size in (("tp", layout.tp), ("ep", layout.ep * layout.etp)):
        if bool(place.straddles_domain(group)):
            domain = system.scale_up.domain_size
            out.append(f"{group} groups of {size} GPUs do not tile the {domain}-GPU NVLink domains: packed "
                       f"{domain} per domain, some would straddle two; priced as if each sat inside one, which needs "
                       f"{domain - domain % size} GPUs used per domain (e.g. Slurm --segment, whole groups per rack)")
    return out


def _moe_candidates(model: TransformerModel, system: System, x: Layout) -> list[tuple[str, Layout, str]]:
    """Expert-parallel changes: halve or double ep (more ep cuts expert memory, fewer keeps the all-to-all
    inside the NVLink domain)."""
    if not model.is_moe:
        return []
    out = [(f"ep {x.ep} → {x.ep // 2}", x.model_copy(update={"ep": x.ep // 2}), _smaller_ep_note(system, x))] \
        if x.ep > 1 else []
    out.append((f"ep {x.ep} → {x.ep * 2}", x.model_copy(update={"ep": x.ep * 2}),
                "a larger EP group cuts expert weights, gradients and optimizer states per GPU"))
    return out


def _inside_domain(system: System, x: Layout, ep: int) -> bool:
    """Whether an EP group of ``ep`` ranks of layout ``x`` sits inside one NVLink domain (:class:`Placement`)."""
    place = Placement(system, tp=x.tp, cp=x.cp, dp=x.dp, pp=x.pp, ep=ep, etp=x.etp)
    return bool(np.all(place.ranks_per_domain("ep") >= ep))


def _smaller_ep_note(system: System, x: Layout) -> str:
    """Why halving ep can pay: the all-to-all moves inside the NVLink domain where it leaves it now; else each rank
    holds twice the experts, so the busiest rank's share of the routed tokens is nearer the mean (the imbalance term,
    :func:`~commmodel.step.experts.rank_imbalance`). Either way more expert memory per GPU."""
    if not _inside_domain(system, x, x.ep) and _inside_domain(system, x, x.ep // 2):
        return "a smaller EP group keeps the all-to-all inside the NVLink domain; more expert memory per GPU"
    return ("each rank holds twice the experts, so its share of the routed tokens is nearer the mean (less load "
            "imbalance); more expert memory per GPU")


def _moe_option_candidates(options: StepOptions, layout: Layout, row: dict[str, Any]
                           ) -> list[tuple[str, StepOptions, str]]:
    """Where the expert all-to-all is exposed: overlap it with the other micro-batch's compute (only where
    Megatron-Core runs the overlap: :func:`~.layout_rules.check_a2a_overlap`), and with the all-to-all dispatcher a
    flex one (DeepEP; HybridEP on NVL72-class racks): one copy of a token per remote domain instead of one per
    expert, which matters where the EP group leaves the NVLink domain."""
    from commmodel.errors import LayoutError
    from commmodel.step.layout_rules import check_a2a_overlap

    if row.get("ep/all_to_all/exposed_s", 0.0) <= 0:
        return []
    out: list[tuple[str, StepOptions, str]] = []
    if not options.moe_a2a_overlap:
        try:
            check_a2a_overlap(layout, True, options.schedule)
            out.append(("overlap MoE dispatch/combine with compute",
                        options.model_copy(update={"moe_a2a_overlap": True}),
                        "Megatron --overlap-moe-expert-parallel-comm (--moe-a2a-overlap)"))
        except LayoutError:
            pass  # Megatron-Core refuses it for this layout: not advice
    if options.moe_dispatcher == "alltoall":
        out.append(("token dispatcher alltoall → deepep", options.model_copy(update={"moe_dispatcher": "deepep"}),
                    "Megatron --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep "
                    "(--moe-dispatcher deepep): one copy of a token per remote NVLink domain"))
    return out


def _option_candidates(options: StepOptions, layout: Layout, row: dict[str, Any]) -> list[tuple[str, StepOptions, str]]:
    out = _moe_option_candidates(options, layout, row)
    if layout.dp < 2:
        return out
    if not options.overlap:
        out.append(("overlap the gradient reduction with the backward pass", options.model_copy(update={"overlap": True}), ""))
    else:
        bucket = float(effective_bucket_bytes(options, layout.dp))
        for factor in (4.0, 0.25):  # an explicit bucket: no growth with dp on top of it
            out.append((f"bucket size {format_size(bucket)} → {format_size(bucket * factor)}",
                        options.model_copy(update={"bucket_size_bytes": bucket * factor, **FIXED_BUCKET}), ""))
    if options.grad_wire_bytes_per_element > 2:
        out.append(("compress gradients: bf16", options.model_copy(update={"compression": "bf16"}),
                    "lossy: bf16 gradients lose precision; check convergence"))
    if options.grad_wire_bytes_per_element > 1 and options.compression != "topk":
        out.append(("compress gradients: int8", options.model_copy(update={"compression": "int8"}),
                    "lossy: int8 quantisation needs error feedback; check convergence"))
    if options.compression != "topk":
        out.append(("compress gradients: top-1% sparsification", options.model_copy(update={"compression": "topk", "topk_fraction": 0.01}),
                    "lossy: top-k drops 99% of the gradient each step (needs error feedback); check convergence"))
    if options.dp_mode == "parameter_server":
        out.append(("replace the parameter server with a ring all-reduce",
                    options.model_copy(update={"dp_mode": "all_reduce"}), ""))
    if options.synchronous and options.straggler_cv > 0:
        out.append(("asynchronous updates (do not wait for stragglers)", options.model_copy(update={"synchronous": False}),
                    "stale gradients: convergence may suffer"))
    return out


NETWORK_UPGRADE_LINKS: tuple[str, ...] = ("ib-ndr", "ib-xdr")
"""Catalogue networks the advice offers a multi-node job, one NIC per GPU as NVIDIA's 8-GPU servers carry them (DGX
H100 / B200 datasheets: eight ConnectX-7 400 Gb/s ports for eight GPUs); ``estimate`` and ``query`` both ask
:func:`faster_networks`, so one question gets one list."""


def faster_networks(system: System, num_gpus: int, links: Mapping[str, LinkSpec]) -> dict[str, System]:
    """The same node with each :data:`NETWORK_UPGRADE_LINKS` network, one NIC per GPU, where that is faster than its
    own scale-out (per-node bandwidth over 1% above); none for a job inside one node, which never uses it. Keyed by
    the ``--network`` spelling that asks for it ("network ib-xdr:8")."""
    if system.scale_out is None or num_gpus <= system.gpus_per_node:
        return {}
    current_bytes_per_s = system.scale_out.node_bw_bytes_per_s
    offers = {}
    for name in (n for n in NETWORK_UPGRADE_LINKS if n in links):
        candidate = with_network(system, links[name], system.gpus_per_node)
        if candidate.scale_out is not None and candidate.scale_out.node_bw_bytes_per_s > 1.01 * current_bytes_per_s:
            offers[f"network {name}:{system.gpus_per_node}"] = candidate
    return offers


def _stack_runs(changes: list[tuple[str, Layout, str]], layout: Layout,
                options: StepOptions) -> list[tuple[str, Layout, str]]:
    """The changes the stack can run, as ``plan`` searches it: a ZeRO stage or recompute policy the change moves to
    must be one of the stack's (:attr:`~commmodel.step.stacks.Stack.zero_stages`, ``recompute_policies``). Advice
    offered "ZeRO stage 0 → 3" under ddp, which estimate and plan then refused; a value the layout already has is
    kept whatever it is."""
    from commmodel.step.stacks import get_stack

    stack = get_stack(options.stack)
    return [(change, new, note) for change, new, note in changes
            if (new.zero == layout.zero or new.zero in stack.zero_stages)
            and (new.recompute == layout.recompute or new.recompute in stack.recompute_policies)]


def advise(model: TransformerModel, system: System, num_gpus: int, layout: Layout, options: StepOptions,
           row: dict[str, Any], other_systems: dict[str, System]) -> list[Advice]:
    """Ranked advice for one configuration whose evaluator row is ``row``."""
    base_tps = row["tokens_per_s"]
    base_fits = bool(row["fits"])
    results: list[Advice] = []

    def checked(layouts: list[Layout]) -> tuple[LayoutArrays, np.ndarray]:
        """(the layouts as arrays, which of them break a divisibility rule): every rule on all at once."""
        arrays = LayoutArrays.from_layouts(layouts)
        return arrays, np.logical_or.reduce(list(layout_divisibility_masks(model, num_gpus, arrays).values()))

    def collect(changes: list[tuple[str, Layout, str]], opts: StepOptions, sys_: System, label: str,
                rows: tuple[LayoutArrays, np.ndarray] | None = None) -> None:
        if not changes:
            return
        arrays, broken = rows or checked([lay for _, lay, _ in changes])
        valid = [change for change, bad in zip(changes, broken) if not bad]
        if not valid:
            return
        # a change is advice only where plan would rank it: it fits with plan's headroom kept free
        kept = max(opts.memory_headroom_bytes, DEFAULT_MEMORY_HEADROOM_BYTES)
        cols = evaluate_layouts(model, sys_, num_gpus, arrays.take(~broken),
                                opts.model_copy(update={"memory_headroom_bytes": kept}))
        for i, (change, lay, note) in enumerate(valid):
            tps = float(cols["tokens_per_s"][i])
            gain = tps / base_tps - 1.0
            # When the current layout does not fit, any change that makes it fit is worth showing.
            if bool(cols["fits"][i]) and np.isfinite(tps) and (gain >= MIN_GAIN or not base_fits):
                results.append(Advice(change, lay, opts, label, float(cols["step_time_s"][i]), tps, 100 * gain, note))

    collect(_stack_runs(_layout_candidates(model, system, layout) + _moe_candidates(model, system, layout), layout,
                        options), options, system, system.name)
    current = checked([layout])  # the option and network changes keep the layout: its rows are built once
    for change, opts, note in _option_candidates(options, layout, row):
        collect([(change, layout, note)], opts, system, system.name, current)
    for label, other in other_systems.items():
        try:
            collect([(f"use {label}", layout, "needs different hardware")], options, other, label, current)
        except ValueError:  # the other system cannot hold this job (e.g. fewer GPUs per node)
            continue
    results.sort(key=lambda a: -a.gain_pct)
    seen: set[Any] = set()
    unique = []
    for a in results:  # the best of each family (one vpp, one bucket size, one compression ...), each change once
        family = " ".join(a.change.split(":")[0].split(" → ")[0].split(" ")[0:2])
        same = (a.system, a.layout, a.options)  # two wordings of one change ("move TP inside the node", "tp 16 → 8")
        if family not in seen and same not in seen:
            seen.update((family, same))
            unique.append(a)
    return unique[:MAX_ADVICE]
