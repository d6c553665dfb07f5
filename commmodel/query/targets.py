"""The systems a query is answered on: one for a plain question, two or more for a what-if (two systems, GPUs or
networks, a system against a GPU, or one network swapped in), baseline first ("instead of" names it)."""

from commmodel.errors import QueryError
from commmodel.hardware.models import System
from commmodel.query.mentions import ParsedQuery, SystemMention
from commmodel.query.resolve import Assumptions, Target, apply_network, base_system


def resolve_targets(parsed: ParsedQuery, pinned: System | None, catalogues: dict, notes: Assumptions) -> list[Target]:
    """One target for a plain question; two or more for a what-if (baseline first); ``pinned`` (``--system``)
    replaces whatever the text names."""
    systems, links, gpus = catalogues["systems"], catalogues["links"], catalogues["gpus"]
    nets = list(parsed.networks)
    gpu_mentions = list(parsed.gpus)
    sys_mentions: list[SystemMention] = list(parsed.systems)
    if pinned is not None:
        said = [s.name for s in sys_mentions] + [g.family.upper() for g in gpu_mentions] + [
            n.link or n.family for n in nets]
        if said:  # "8 H100 ..." with --system dgx-a100: the flag wins, and the answer says what it replaced
            notes.add("system", pinned.name, f"--system {pinned.name} replaces what the text names "
                      f"({', '.join(dict.fromkeys(said))})", "drop --system to answer on the text's hardware")
        return [Target(pinned.name, pinned)]
    instead = parsed.baseline_after_instead_of

    def order(items: list) -> list:
        if instead is None:
            return items
        after = [x for x in items if x.position > instead]
        return after + [x for x in items if x.position <= instead]

    if len(sys_mentions) > 1:
        net = nets[0] if len(nets) == 1 else None
        return [Target(s.name + (f"+{net.link}" if net and net.link else ""),
                       apply_network(systems[s.name], net, parsed, links, notes)) for s in order(sys_mentions)]
    if parsed.what_if and len(sys_mentions) == 1 and len(gpu_mentions) == 1:  # "72 GB200 NVL72 vs 72 H100"
        net = nets[0] if len(nets) == 1 else None
        named = systems[sys_mentions[0].name]
        other = base_system(parsed, gpu_mentions[0], net, systems, links, gpus, notes)
        if other.gpu.name != named.gpu.name:
            pair = order(sorted([sys_mentions[0], gpu_mentions[0]], key=lambda m: m.position))
            return [Target(s.name, apply_network(s, net, parsed, links, notes))
                    for s in (named if m is sys_mentions[0] else other for m in pair)]
    if len(gpu_mentions) > 1:
        net = nets[0] if len(nets) == 1 else None
        out = []
        for g in order(gpu_mentions):
            system = apply_network(base_system(parsed, g, net, systems, links, gpus, notes), net, parsed, links, notes)
            out.append(Target(system.name, system))
        return out
    gpu = gpu_mentions[0] if gpu_mentions else None
    if len(nets) > 1:  # one node type, each network swapped in (the baseline's node: a like-for-like what-if)
        ordered = order(nets)
        base = (systems[sys_mentions[0].name] if sys_mentions
                else base_system(parsed, gpu, ordered[0], systems, links, gpus, notes))
        out = []
        for net in ordered:
            system = apply_network(base, net, parsed, links, notes)
            out.append(Target(system.name, system))
        return out
    net = nets[0] if nets else None
    if sys_mentions:
        base = systems[sys_mentions[0].name]
        _check_gpu_of(base, gpu, gpus)
    else:
        base = base_system(parsed, gpu, net, systems, links, gpus, notes)
    if parsed.what_if and net is not None:  # "what if we used NDR": the node as shipped vs with that network
        return [Target(base.name, base), Target(f"{base.name} with {net.link or net.family}",
                                                apply_network(base, net, parsed, links, notes))]
    if parsed.what_if and not (parsed.libraries or parsed.dtypes or parsed.stacks):
        raise QueryError("a what-if needs two things to compare: two networks ('from 100GbE to NDR'), two GPUs "
                         "('H100 instead of A100'), two systems ('dgx-a100 vs dgx-h100') or two libraries ('gloo vs "
                         "nccl')")
    return [Target(base.name, apply_network(base, net, parsed, links, notes))]


def _check_gpu_of(system: System, gpu, catalogue: dict) -> None:
    """A GPU named beside a system must be the system's ("16 H100 on dgx-a100" is a contradiction, not an A100 run);
    outside a what-if there is one machine to answer on."""
    if gpu is None:
        return
    from commmodel.query.resolve import gpu_names_for

    names = gpu_names_for(gpu, catalogue)
    if names and system.gpu.name not in names and not system.gpu.name.startswith(gpu.family):
        raise QueryError(f"the query names {gpu.family.upper()} GPUs and {system.name}, whose GPUs are "
                         f"{system.gpu.name}; give one, or compare them: '{system.name} vs {gpu.family.upper()}'")


__all__ = ["resolve_targets"]
