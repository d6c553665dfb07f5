"""The comparison grid ``compare`` and ``plot whatif`` share: every target × ``--stack`` × ``--dtype`` ×
``--library``, planned by :func:`commmodel.planner.whatif.compare_grid` with each stack's options and search, so
the two commands give the same best layouts for the same question."""

from typing import Any, NamedTuple

from commmodel.cli.common import step_setup, targets_stack_json


NATIVE = "native"
"""``--network native``: the system's own scale-out network."""


def parse_targets(systems: list[str], networks: list[str] | None) -> list[tuple[str, str, str | None]]:
    """(label, system name or path, network spec or None) for every system × network, in order."""
    from commmodel.errors import ProfileError

    out = []
    for spec in systems:
        name, plus, inline = spec.partition("+")
        if plus and not inline:
            raise ProfileError(f"--system {spec!r}: give a network after '+', e.g. {name}+ib-ndr:8")
        for network in (networks or [None]):
            if inline and network not in (None, NATIVE):
                raise ProfileError(f"--system {spec!r} already names a network; drop --network {network} or the "
                                   f"'+{inline}'")
            chosen = inline or (None if network in (None, NATIVE) else network)
            label = name + (f"+{chosen}" if chosen else "")
            out.append((label, name, chosen))
    labels = [t[0] for t in out]
    duplicates = sorted({x for x in labels if labels.count(x) > 1})
    if duplicates:
        raise ProfileError(f"targets {', '.join(duplicates)} are given twice; list each system/network once")
    return out


class Grid(NamedTuple):
    """What ``compare`` and ``plot whatif`` show: the comparison, its rows (each with its stack, dtype, library),
    the library notes and the stack document."""

    model: Any
    """The model (in the first dtype)."""
    comparison: Any
    """:class:`~commmodel.planner.whatif.Comparison`."""
    rows: list[dict[str, Any]]
    """One record per entry, with ``stack``, ``dtype`` and ``library``."""
    notes: list[str]
    """Each library's step-time ratio and why (several ``--library`` only)."""
    doc: dict[str, Any]
    """``stack``, ``assumptions``, ``dtype``, ``offload_modules`` (:func:`stack_doc`)."""


def _check_names(stacks: list[str | None], dtypes: list[str], resolved: list[tuple[str, Any]],
                 libraries: list[str] | None = None) -> None:
    """One line for an unknown --stack or --library or a --dtype a target's GPU cannot train in, before anything
    else."""
    from commmodel.collectives.libraries import get_library
    from commmodel.step.precision import check_precision
    from commmodel.step.stacks import get_stack

    for name in stacks:
        get_stack(name)
    for library in libraries or []:
        get_library(library)
    from commmodel.errors import WorkloadError
    from commmodel.workload.model import DTYPE_BYTES

    for dtype in dtypes:
        if dtype not in DTYPE_BYTES:
            raise WorkloadError(f"--dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)}")
        for _, system in resolved:
            check_precision(system.gpu, dtype)


def run_grid(model: Any, resolved: list[tuple[str, Any]], gpus: int, stacks: list[str] | None,
             dtypes: list[str] | None, libraries: list[str] | None, flags: dict[str, Any], global_batch: int | None,
             gpus_per_node: int | None) -> Grid:
    """Every target × ``--stack`` × ``--dtype`` × ``--library`` (each repeatable) planned on one global batch
    (:func:`~commmodel.planner.whatif.compare_grid`), each stack with its own search and the explicit ``flags``,
    model FLOPs counted by the first stack's rule unless ``--attention-flops`` says so (so MFU compares)."""
    from commmodel.errors import ProfileError
    from commmodel.planner.space import StackVariant, for_stack
    from commmodel.planner.whatif import compare_grid, library_notes

    dtypes, stacks_said = list(dict.fromkeys(dtypes or [])), list(dict.fromkeys(stacks or [None]))
    _check_names(stacks_said, dtypes, resolved, libraries)  # a misspelt value is named before "needs two targets"
    if len(resolved) * max(1, len(libraries or [])) * max(1, len(dtypes)) * len(stacks_said) < 2:
        raise ProfileError("compare needs at least two targets: repeat --system (A --system B), --network, --library, "
                           "--dtype or --stack")
    first = dtypes[0] if dtypes else None  # compare_grid checks every target's GPU for every dtype (in_dtype)
    setups = [step_setup(name, model, resolved[0][1], first, **flags) for name in stacks_said]
    own_rules = {st.name: opts.attention_flops for st, opts, _ in setups}
    if flags.get("attention_flops") is None:  # one FLOP-counting rule (the baseline stack's), so MFU compares
        setups = [(st, opts.model_copy(update={"attention_flops": setups[0][1].attention_flops}), m)
                  for st, opts, m in setups]
    variants = [StackVariant(st.name, opts, for_stack(st)) for st, opts, _ in setups]
    base = setups[0][2] if dtypes else model  # no --dtype: each target's own default (compare_grid)
    comparison, keys = compare_grid(base, resolved, gpus, libraries=libraries,
                                    dtypes=dtypes if len(dtypes) > 1 else None,
                                    stacks=variants if len(variants) > 1 else None, global_batch=global_batch,
                                    gpus_per_node=gpus_per_node, space=variants[0].space, options=variants[0].options)
    rows = [{**row, **key} for row, key in zip(comparison.rows(), keys)]
    notes = library_notes(rows) if libraries and len({k["library"] for k in keys}) > 1 else []
    own = list(dict.fromkeys(k["dtype"] for k in keys))  # without --dtype, each target's default: say each
    doc = stack_doc([(st, opts) for st, opts, _ in setups], setups[0][2], resolved, dtypes or (own if len(own) > 1
                                                                                                else []))
    rule = setups[0][1].attention_flops
    others = {name: own for name, own in own_rules.items() if own != rule}
    if others:  # say that a stack's own MFU (estimate --stack NAME) counts otherwise
        doc["assumptions"].append(f"MFU of every row counts the attention FLOPs over the {rule} s×s (the "
                                  f"{setups[0][0].name} rule) so the rows compare; "
                                  + "; ".join(f"{name} alone counts the {own} (estimate/plan --stack {name})"
                                              for name, own in others.items()) + "; --attention-flops chooses")
    return Grid(setups[0][2], comparison, rows, notes, doc)


def stack_doc(stacks: list[tuple[Any, Any]], model: Any, resolved: list, dtypes: list[str]) -> dict[str, Any]:
    """:func:`~commmodel.cli.common.targets_stack_json` of the one (stack, options) and dtype; with several ``--stack``
    or ``--dtype`` the ``"stack"`` and ``"dtype"`` keys list them, a line that holds for all is said once and one that
    holds for some (a stack's own behaviour, an FP8 recipe's casts) is prefixed by them ("fsdp2: ...")."""
    from commmodel.planner.whatif import in_dtype

    docs = {}
    for the_stack, options in stacks:
        for d in dtypes or [model.dtype]:
            key = " ".join(([the_stack.name] if len(stacks) > 1 else []) + ([d] if len(dtypes) > 1 else []))
            docs[key] = targets_stack_json(the_stack, options, in_dtype(model, d, []), resolved)
    head = next(iter(docs.values()))
    if len(docs) == 1:
        return head
    bodies = {key: doc["assumptions"][1:] for key, doc in docs.items()}
    lines = list(dict.fromkeys(line for body in bodies.values() for line in body))
    merged = [line if all(line in body for body in bodies.values()) else
              f"{', '.join(k for k, body in bodies.items() if line in body)}: {line}" for line in lines]
    flash = list(dict.fromkeys(options.flash_attention for _, options in stacks))  # stacks differ: list each
    return {**head, "stack": [st.name for st, _ in stacks] if len(stacks) > 1 else head["stack"],
            "dtype": dtypes if len(dtypes) > 1 else head["dtype"],
            "flash_attention": [options.flash_attention for _, options in stacks] if len(flash) > 1
            else head["flash_attention"],
            "assumptions": [" vs ".join(dict.fromkeys(doc["assumptions"][0] for doc in docs.values())), *merged]}


__all__ = ["Grid", "run_grid", "stack_doc"]
