"""Answer a parsed query: a collective cost, a layout plan with diagnosis, or a what-if comparison.

Pure given its inputs (the CLI loads profiles and passes them in). The document has three parts,
``{"parsed": ..., "assumptions": [...], "answer": {...}}`` (DESIGN §8); every default used is an
assumption with the flag that overrides it.
"""

from typing import TYPE_CHECKING, Any, NamedTuple

from commmodel.errors import QueryError, WorkloadError
from commmodel.hardware.catalogue import LinkSpec
from commmodel.hardware.models import System
from commmodel.hardware.cluster import Cluster
from commmodel.query.mentions import ParsedQuery
from commmodel.query.resolve import (DEFAULT_COLLECTIVE_SIZE_BYTES, DEFAULT_MODEL, Assumptions, Target, global_batch,
                                     gpu_count)
from commmodel.query.targets import resolve_targets

if TYPE_CHECKING:  # the step model is imported where a plan is answered: a collective question never needs it
    from commmodel.step.layout import Layout

class QueryOverrides(NamedTuple):
    """Flags of ``commmodel query`` that replace what the text says (or would be assumed)."""

    system: System | None = None
    gpus: int | None = None
    gpus_per_node: int | None = None
    model: str | None = None
    global_batch: int | None = None
    seq_len: int | None = None
    dtype: str | None = None
    stack: str | None = None
    top: int = 3


FEWEST_GPUS_DOUBLINGS = 20
"""How far "how many GPUs" searches: one node, then doubling up to 2^20 nodes (beyond the CLI's GPU cap)."""


def _fewest_gpus(parsed: ParsedQuery, over: QueryOverrides, model: Any, system: System, per_node: int, stack: Any,
                 notes: Assumptions) -> int:
    """The fewest GPUs, whole nodes doubling from one, on which a layout of ``model`` fits under ``stack`` (each
    count with the global batch the query would take for it); said as the ``num_gpus`` assumption."""
    from commmodel.limits import MAX_GPUS
    from commmodel.planner.search import plan

    last = None
    for k in range(FEWEST_GPUS_DOUBLINGS + 1):
        num = per_node * 2 ** k
        if num > MAX_GPUS:
            break
        batch = global_batch(parsed, over.global_batch, model, num, per_node, Assumptions())
        result = plan(model, system, num, global_batch=batch, gpus_per_node=per_node, space=stack.space,
                      options=stack.options)
        if result.num_feasible:
            notes.add("num_gpus", num, f"the fewest GPUs on which a layout fits, whole {system.name} nodes doubling "
                      f"from one{f' (none fits on {last})' if last else ''}", "say e.g. '64 GPUs' or --gpus N")
            return num
        last = num
    raise QueryError(f"no layout of {model.name} fits on up to {last:,} GPUs of {system.name}; check the model and the "
                     "GPU's memory")


def _model(parsed: ParsedQuery, over: QueryOverrides, notes: Assumptions, gpu: Any = None) -> Any:
    from commmodel.step.precision import default_dtype
    from commmodel.workload.model import TransformerModel
    from commmodel.workload.presets import get_model

    shape_reason = ""
    if over.model:
        from commmodel.io.models import resolve_model

        model = resolve_model(over.model)
    elif parsed.model is None:
        model = get_model(DEFAULT_MODEL)
        notes.add("model", DEFAULT_MODEL, "the query names no model", "name one (e.g. 'llama3-70b', '13B params') or --model")
    else:
        mention = parsed.model
        model = None
        # a bare family ("mixtral", "bloom") names its one preset or alias when there is one
        bare = mention.family if mention.family and not mention.size_text and mention.num_params is None else None
        for key in filter(None, (mention.preset_key, mention.family and mention.size_text and
                                 f"narayanan-{mention.size_text}" if mention.family == "gpt" else None, bare)):
            try:
                model = get_model(key)
                break
            except WorkloadError:
                continue
        if model is None:
            if mention.num_params is None:
                raise QueryError(f"model {mention.text!r} is not a preset; give its size (e.g. '{mention.text} 7B') "
                                 f"or a preset name such as llama3-70b or gpt3-175b")
            model = get_model(repr(float(mention.num_params)))
            shape_reason = (f"no preset named {mention.preset_key!r}; a GPT-style shape of that size" if mention.family
                            else "shape derived from the parameter count")
    update: dict[str, Any] = {}
    seq = over.seq_len or parsed.seq_len
    if seq and seq != model.seq_len:
        update["seq_len"] = seq
    elif not seq:
        notes.add("seq_len", model.seq_len, f"the training length of {model.name}", "say 'seq len 4096' or --seq-len")
    dtype = over.dtype or parsed.dtype
    if dtype and dtype != model.dtype:
        if dtype == "tf32":
            raise QueryError("tf32 is a matmul mode, not a training dtype; use bf16, fp16, fp8 or fp32")
        update["dtype"] = dtype
    if dtype:
        notes.add("dtype", dtype, "--dtype" if over.dtype else "said in the query", "say 'bf16'/'fp8' or --dtype")
    elif gpu is not None and default_dtype(gpu, model.dtype) != model.dtype:
        update["dtype"] = default_dtype(gpu, model.dtype)  # fp16 on Volta/Turing, fp32 on a CPU host
        why = (f"mixed-precision training in fp16: {gpu.name} has no bf16 tensor cores" if update["dtype"] == "fp16"
               else f"{gpu.name} states no 16-bit peak: it computes in fp32")
        notes.add("dtype", update["dtype"], why, "say the dtype or --dtype")
    elif not parsed.dtypes:
        notes.add("dtype", model.dtype, "mixed-precision training in bf16", "say 'fp16'/'fp8' or --dtype")
    if update:
        model = TransformerModel.model_validate({**model.model_dump(), **update})
    if shape_reason:  # described after the query's sequence length and dtype are applied
        notes.add("model_shape", model.describe(), shape_reason, "--model PRESET or a model YAML path")
    return model


def _space(parsed: ParsedQuery, stack_pins: dict[str, tuple]) -> Any:
    from commmodel.planner.space import SearchSpace

    pins: dict[str, Any] = dict(stack_pins)
    # a said dp fixes the other degrees: those not said are 1 (query/resolve._said_dp counts the GPUs so)
    for key in ("tp", "pp", "cp"):
        if getattr(parsed, key) or parsed.dp:
            pins[key] = (getattr(parsed, key) or 1,)
    if parsed.ep:
        pins["ep"] = (parsed.ep,)
    if parsed.micro_batch:
        pins["micro_batches"] = (parsed.micro_batch,)
    if parsed.grad_accum_steps:
        pins["accumulation_steps"] = (parsed.grad_accum_steps,)
    if parsed.zero is not None:
        pins["zero_stages"] = (parsed.zero,)
    if parsed.recompute:
        pins["recompute"] = (parsed.recompute,)
    if parsed.sequence_parallel is not None:
        pins["sequence_parallel"] = (parsed.sequence_parallel,)
    return SearchSpace(**pins)


def _collective(op: str, size_bytes: float, system: System, num_gpus: int, per_node: int,
                library: str | None = None, algorithm: str | None = None) -> dict[str, Any]:
    from commmodel.collectives import collective_cost
    from commmodel.collectives.api import library_algorithm_costs
    from commmodel.collectives.libraries import get_library, rank_noun, resolve_library

    view = Cluster.for_gpus(system, num_gpus, per_node).system
    lib, why = resolve_library(view, library, flag="")
    why = "said in the query" if library else why.removeprefix("default: ")
    best = collective_cost(op, size_bytes, view, num_gpus, selection="library", library=lib,
                           algorithm=algorithm or "auto")
    # The other algorithms: the device library's (as `collective --algo all`), none for a host one (its rule picks).
    others = {} if get_library(lib).is_host else library_algorithm_costs(op, size_bytes, view, num_gpus, lib)
    algorithms = sorted(({"algorithm": name, "time_s": float(cost.time_s),
                          "busbw_GBps": float(cost.busbw_bytes_per_s) / 1e9} for name, cost in others.items()),
                        key=lambda a: a["time_s"])
    return {"system": view.name, "library": lib, "library_why": why, "op": best.op, "size_bytes": size_bytes,
            "num_ranks": num_gpus, "rank_noun": rank_noun(view),
            "num_nodes": num_gpus // view.gpus_per_node, "algorithm": str(best.algorithm.item()),
            "time_s": float(best.time_s), "algbw_GBps": float(best.algbw_bytes_per_s) / 1e9,
            "busbw_GBps": float(best.busbw_bytes_per_s) / 1e9, "algorithms": algorithms,
            "algorithm_asked": algorithm is not None}


def _plan_answer(model: Any, system: System, num_gpus: int, per_node: int, batch: int, space: Any, top: int,
                 links: dict[str, LinkSpec] | None = None, options: Any = None) -> dict:
    from commmodel.collectives.libraries import rank_noun
    from commmodel.planner.explain import explain_plan, layout_label, term_names
    from commmodel.planner.search import plan
    from commmodel.step import EXPOSED_COMM_FLAG
    from commmodel.step.gradients import gradient_all_reduce
    from commmodel.step.layout import Layout

    result = plan(model, system, num_gpus, global_batch=batch, gpus_per_node=per_node, space=space,
                  options=options).require_feasible()
    best = result.row(0)
    layout = Layout.from_record(best)
    view = Cluster.for_gpus(system, num_gpus, per_node).system
    dp_terms = {t: {"link_s": best[f"{t}/link_s"], "exposed_s": best[f"{t}/exposed_s"]}
                for t in term_names(best) if t.startswith(("dp/", "ep/grad_reduce")) and best[f"{t}/link_s"] > 0}
    exposed = best.get("exposed_comm_fraction", 0.0)
    bound = _bound_name(best)
    answer = {
        "kind": "plan", "system": result.system_name, "num_gpus": num_gpus, "rank_noun": rank_noun(view, num_gpus),
        "gpus_per_node": per_node,
        "model": model.describe(), "global_batch": batch, "seq_len": model.seq_len,
        "search": {"enumerated": result.num_enumerated, "evaluated": result.num_evaluated,
                   "feasible": result.num_feasible, "search_s": result.search_s},
        "best_layouts": result.records(top),
        "best": {"layout": layout_label(best), "step_time_s": best["step_time_s"], "tokens_per_s": best.get("tokens_per_s"),
                 "model_tflops_per_gpu": best["model_tflops_per_gpu"], "mfu": best["mfu"],
                 "memory_bytes_per_gpu": best["memory_bytes_per_gpu"], "exposed_comm_fraction": exposed,
                 "bound": bound, "comm_bottleneck": bool(exposed > EXPOSED_COMM_FLAG)},
        "gradient_sync": {"terms": dp_terms, "link_s": sum(t["link_s"] for t in dp_terms.values()),
                          "exposed_s": sum(t["exposed_s"] for t in dp_terms.values()),
                          "all_reduce": gradient_all_reduce(model, view, num_gpus, layout, options)},
        "advice": _advice(model, view, num_gpus, layout, best, links=links, options=options),
        "explanation": [e["text"] for e in explain_plan(result)],
    }
    return answer


def _bound_name(row: dict) -> str:
    from commmodel.step import BOUND_NAMES  # the package exports it (step.estimate is not needed here)

    return BOUND_NAMES[int(row["bound"])]


def _advice(model: Any, system: System, num_gpus: int, layout: "Layout", row: dict[str, Any], limit: int = 3,
            links: dict[str, LinkSpec] | None = None, options: Any = None) -> list:
    """The step model's ranked advice for the best layout, a faster network included: what ``estimate`` would
    give, from the search's own row of that layout (the same evaluator columns; not evaluated a second time)."""
    from commmodel.step.advice import advise, faster_networks
    from commmodel.step.options import StepOptions

    others = faster_networks(system, num_gpus, links or {})
    advice = advise(model, system, num_gpus, layout, options or StepOptions(), row, others)
    return [a.to_json() for a in advice][:limit]


def _kind(parsed: ParsedQuery, targets: list[Target]) -> str:
    if parsed.collective:
        return "collective"
    return "compare" if len(targets) > 1 or parsed.libraries or parsed.dtypes or parsed.stacks else "plan"


def _stacks(parsed: ParsedQuery, over: QueryOverrides, model: Any, checked: list, notes: Assumptions,
            targets: list) -> list[Any]:
    """One :class:`~commmodel.planner.space.StackVariant` per stack asked ("fsdp2 vs megatron-core": each, in that
    order), else the one default stack of every command (commmodel.step.stacks): the same options as
    plan/estimate/compare (their one default memory headroom too), and one FLOP-counting rule (the first stack's) so
    MFU compares across stacks; the dtype checked against the GPU of every ``checked`` target."""
    from commmodel.collectives.libraries import resolve_library
    from commmodel.planner.space import StackVariant
    from commmodel.step.precision import check_precision
    from commmodel.step.stack_assumptions import assumptions
    from commmodel.step.stacks import DEFAULT_STACK, get_stack, stack_options

    for target in checked:
        check_precision(target.system.gpu, model.dtype)
    for target in targets:  # NCCL asked on AMD GPUs is refused, as plan and estimate refuse it
        for lib in parsed.libraries or (parsed.library,):
            resolve_library(target.system, lib, flag="")
    library, why = resolve_library(targets[0].system, parsed.library, flag="")  # the default of plan/estimate
    if not parsed.libraries:
        notes.add("library", library, "said in the query" if parsed.library else why.removeprefix("default: "),
                  "say 'with gloo', 'over MPI' or 'with nccl'")
    said = ("--stack" if over.stack else "the text" if parsed.stack or parsed.stacks
            else f"the default ({DEFAULT_STACK})")
    out: list[Any] = []
    for name in parsed.stacks or (over.stack or parsed.stack,):
        stack = get_stack(name)
        options = stack_options(stack.name, library=library, flash_attention=parsed.flash_attention,
                                attention_flops=out[0].options.attention_flops if out else None
                                ).for_training_dtype(model.dtype)
        lines = dict.fromkeys(line for t in targets for line in assumptions(stack, options, t.system, model)[1:])
        notes.add("stack", stack.name, f"from {said}: " + "; ".join(lines),
                  "say 'with fsdp2', 'deepspeed', 'ddp', 'megatron-lm-2021' or --stack")
        out.append(StackVariant(stack.name, options, _space(parsed, stack.search_pins)))
    return out


def _mfu_peak(targets: list) -> str:
    """The peak the answer's MFU is measured against, in the words plan and estimate state it."""
    from commmodel.step.precision import mfu_peak_words

    return mfu_peak_words([t.system for t in targets])


def answer_query(parsed: ParsedQuery, catalogues: dict[str, Any], overrides: QueryOverrides = QueryOverrides()) -> dict:
    """The whole ``query --json`` document for ``parsed``."""
    notes = Assumptions()
    targets = resolve_targets(parsed, overrides.system, catalogues, notes)
    kind = _kind(parsed, targets)
    multi = bool(parsed.networks) or len(targets) > 1
    counting = kind == "plan" and parsed.how_many and not (overrides.gpus or parsed.num_gpus or parsed.num_nodes
                                                           or parsed.dp)
    num_gpus, per_node = ((0, overrides.gpus_per_node or parsed.gpus_per_node or targets[0].system.gpus_per_node)
                          if counting else gpu_count(parsed, overrides.gpus, overrides.gpus_per_node,
                                                     targets[0].system, notes, multi))
    # each system of a comparison is priced with its own GPUs per node unless the query or --gpus-per-node says one
    said_per_node = (overrides.gpus_per_node or parsed.gpus_per_node) if len(targets) > 1 else per_node
    if kind == "collective":
        size = parsed.size_bytes
        if size is None and parsed.model is not None:
            model = _model(parsed, overrides, notes)
            size = model.num_params * model.dtype_bytes
            notes.add("size_bytes", size, f"the {model.name} gradients in {model.dtype}", "give a size, e.g. '1GB'")
        elif size is None:
            size = DEFAULT_COLLECTIVE_SIZE_BYTES
            notes.add("size_bytes", size, "the query gives no message size (1 GiB is bandwidth-bound everywhere)",
                      "give a size, e.g. '256MB' or '4 KiB'")
        pairs = [(t, lib) for t in targets for lib in parsed.libraries or (parsed.library,)]
        rows = [_collective(parsed.collective, size, t.system, num_gpus,
                            said_per_node or min(num_gpus, t.system.gpus_per_node), lib, parsed.algorithm)
                for t, lib in pairs]
        if not parsed.libraries:
            notes.add("library", rows[0]["library"], rows[0]["library_why"],
                      "say 'with gloo', 'over MPI' or 'with nccl'")
        if len(rows) == 1:
            answer: dict[str, Any] = {"kind": "collective", **rows[0]}
        else:
            for (target, lib), row in zip(pairs, rows):
                row["label"] = target.label + (f" with {lib}" if parsed.libraries else "")
                row["speedup_vs_baseline"] = rows[0]["time_s"] / row["time_s"] if row["time_s"] else None
            answer = {"kind": "collective_compare", "baseline": rows[0]["label"], "targets": rows}
    else:
        # several systems and no dtype said: each is priced in its own default (compare_grid), as plan would
        own_dtypes = len(targets) > 1 and not (overrides.dtype or parsed.dtype or parsed.dtypes)
        model = _model(parsed, overrides, notes, None if own_dtypes else targets[0].system.gpu)
        stacks = _stacks(parsed, overrides, model, [] if own_dtypes else targets, notes, targets)
        if counting:  # "how many H100s do I need": the fewest whole-node counts on which a layout fits
            num_gpus = _fewest_gpus(parsed, overrides, model, targets[0].system, per_node, stacks[0], notes)
        batch = global_batch(parsed, overrides.global_batch, model, num_gpus, per_node, notes)
        options = stacks[0].options
        if kind == "plan":
            answer = _plan_answer(model, targets[0].system, num_gpus, per_node, batch, stacks[0].space, overrides.top,
                                  links=catalogues.get("links"), options=options)
        else:
            from commmodel.planner.whatif import compare_grid, library_notes

            comparison, keys = compare_grid(model, [(t.label, t.system) for t in targets], num_gpus,
                                            libraries=list(parsed.libraries) or None,
                                            dtypes=list(parsed.dtypes) or None,
                                            stacks=stacks if len(stacks) > 1 else None, global_batch=batch,
                                            gpus_per_node=said_per_node, space=stacks[0].space, options=options,
                                            flag="")
            rows = [{**row, **key} for row, key in zip(comparison.rows(), keys)]
            if own_dtypes and len({k["dtype"] for k in keys}) > 1:
                notes.replace("dtype", " vs ".join(dict.fromkeys(k["dtype"] for k in keys)),
                          "each system's default (fp16 where the GPU has no bf16 tensor cores)",
                          "say 'fp16'/'bf16' or --dtype")
            answer = {"kind": "compare", "model": model.describe(), "num_gpus": num_gpus, "global_batch": batch,
                      "baseline": rows[0]["label"], "targets": rows, "summary": _compare_summary(rows) +
                      (library_notes(rows) if parsed.libraries else [])}
        said_dtype = list(parsed.dtypes) or (list(dict.fromkeys(t["dtype"] for t in answer["targets"]))
                                             if own_dtypes else [model.dtype])
        answer.update({"stack": list(parsed.stacks) or stacks[0].name,
                       "dtype": said_dtype if len(said_dtype) > 1 else said_dtype[0],
                       "library": list(parsed.libraries) if parsed.libraries else options.library,
                       "memory_headroom_bytes": options.memory_headroom_bytes,
                       "flash_attention": bool(options.flash_attention),
                       "mfu_peak": _mfu_peak(targets)})
        if parsed.train_tokens:  # "on 1T tokens": the run's wall-clock time at each best layout's throughput
            answer["train_tokens"] = parsed.train_tokens
            for row in [answer.get("best")] if kind == "plan" else answer["targets"]:
                if row and row.get("tokens_per_s"):
                    row["time_to_train_s"] = parsed.train_tokens / row["tokens_per_s"]
    return {"parsed": parsed.to_json(), "assumptions": [a.to_json() for a in notes.items], "answer": answer}


def _compare_summary(rows: list[dict]) -> list[str]:
    base = rows[0]
    out = []
    for row in rows[1:]:
        if not (row["fits"] and base["fits"]):
            out.append(f"{row['label']}: {'no layout fits' if not row['fits'] else 'the baseline has no layout that fits'}")
            continue
        change = ", ".join(f"{k} {v[0]}→{v[1]}" for k, v in row["changed_vs_baseline"].items()) or "same best layout"
        out.append(f"{base['label']} → {row['label']}: step {base['step_time_s']:.4g} s → {row['step_time_s']:.4g} s "
                   f"({row['speedup_vs_baseline']:.2f}x); best layout: {change}")
    return out


__all__ = ["QueryOverrides", "answer_query"]
