"""``commmodel estimate``: one training step of one layout, with its breakdown and advice (DESIGN §8)."""

from typing import Annotated, Any

import typer

from commmodel.cli.common import (EmitOpt, GpusPerNodeOpt, JobGpusOpt, JsonOpt, LibraryOpt, ModelOpt, NetworkOpt,
                                  SeqLenOpt, SystemOpt, check_batch, checked_layout, degree_option, echo, emit_json,
                                  emitted_block, emitted_for, one_rank, resolve_library, stack_json,
                                  stack_layout_defaults, stack_lines, step_setup)
from commmodel.cli.stack_flags import StackOpt, TrainDtypeOpt, stack_flags, with_stack_flags

from commmodel.io.text_table import format_table

OneRecomputeOpt = Annotated[str, typer.Option("--recompute", help=(
    "Activation recompute: none, selective (Korthikanti: attention core), full, op (torchtitan op-level SAC: mm/SDPA "
    "outputs kept, every second mm recomputed), or moe (Megatron-Core --recompute-modules moe: MoE layers checkpointed)."))]


def _model(spec: str, seq_len: int | None, layers: int | None, hidden: int | None, heads: int | None,
           kv_heads: int | None, ffn_hidden: int | None, vocab: int | None, dtype: str | None) -> Any:
    from commmodel.io.models import model_from_mapping, resolve_model

    model = resolve_model(spec)
    overrides = {k: v for k, v in {
        "seq_len": seq_len, "num_layers": layers, "hidden_size": hidden, "num_heads": heads,
        "num_kv_heads": kv_heads, "ffn_hidden_size": ffn_hidden, "vocab_size": vocab, "dtype": dtype,
    }.items() if v is not None}
    if not overrides:
        return model
    return model_from_mapping({**model.model_dump(), **_rederive(model, overrides)}, f"model {model.name}")


def _rederive(model: Any, overrides: dict) -> dict:
    """Drop derived widths that should follow a changed parent (ffn from hidden, kv-heads from heads)."""
    out = dict(overrides)
    if "hidden_size" in out and "ffn_hidden_size" not in out:
        ratio = model.ffn_hidden_size / model.hidden_size
        out["ffn_hidden_size"] = int(round(out["hidden_size"] * ratio))
    if "num_heads" in out and "num_kv_heads" not in out and model.num_kv_heads == model.num_heads:
        out["num_kv_heads"] = out["num_heads"]
    return out


@with_stack_flags
def estimate_cmd(
    model: ModelOpt,
    gpus: JobGpusOpt,
    system: SystemOpt,
    tp: Annotated[int, degree_option("--tp", help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, degree_option("--pp", help="Pipeline-parallel degree.")] = 1,
    cp: Annotated[int, degree_option("--cp", help="Context-parallel degree (sequence split over cp GPUs, ring "
                                                  "attention).")] = 1,
    ep: Annotated[int, degree_option("--ep", help="Expert-parallel degree (MoE; folds over tp × cp × dp).")] = 1,
    etp: Annotated[int, degree_option("--etp", help="Expert tensor-parallel degree (MoE).")] = 1,
    micro_batch: Annotated[int, typer.Option("--micro-batch", help="Sequences per micro-batch.", min=1, callback=check_batch)] = 1,
    global_batch: Annotated[int | None, typer.Option(
        "--global-batch", help="Sequences per step (default: plan's for the model, ~1-4M tokens, rounded up to a "
                               "multiple of micro-batch × dp).", min=1,
        callback=check_batch)] = None,
    seq_len: SeqLenOpt = None,
    layers: Annotated[int | None, typer.Option("--layers", help="Override the number of layers.", min=1)] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", help="Override the hidden size.", min=1)] = None,
    heads: Annotated[int | None, typer.Option("--heads", help="Override the attention heads.", min=1)] = None,
    vocab: Annotated[int | None, typer.Option("--vocab", help="Override the vocabulary size.", min=1)] = None,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help="Override the key/value heads (GQA).", min=1)] = None,
    ffn_hidden: Annotated[int | None, typer.Option("--ffn-hidden", help="Override the MLP inner width.", min=1)] = None,
    dtype: TrainDtypeOpt = None,
    stack: StackOpt = None,
    zero: Annotated[int | None, typer.Option("--zero", help="ZeRO stage 0-3 (sharding over dp; default: the stack's).",
                                             min=0, max=3)] = None,
    recompute: OneRecomputeOpt = "none",
    sequence_parallel: Annotated[bool | None, typer.Option(
        "--sequence-parallel/--no-sequence-parallel", help="Megatron sequence parallelism (default: the stack's, tp ≥ 2).")] = None,
    vpp: Annotated[int, degree_option("--vpp", help="Virtual pipeline stages per GPU (interleaved 1F1B).")] = 1,
    network: NetworkOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    compression: Annotated[str, typer.Option("--compression", help="none, bf16, fp16, int8 or topk (lossy).")] = "none",
    topk_fraction: Annotated[float, typer.Option("--topk-fraction", help="Kept fraction with topk.")] = 0.01,
    dp_mode: Annotated[str, typer.Option("--dp-mode", help="all_reduce or parameter_server.")] = "all_reduce",
    asynchronous: Annotated[bool, typer.Option("--async", help="Asynchronous updates (no straggler wait).")] = False,
    straggler_cv: Annotated[float, typer.Option("--straggler-cv", help="Per-worker step-time coefficient of variation.")] = 0.0,
    schedule: Annotated[str, typer.Option("--schedule", help="Pipeline schedule: 1f1b, gpipe or dualpipe (DeepSeek-V3; pp even, vpp 1).")] = "1f1b",
    library: LibraryOpt = None, emit: EmitOpt = None, json_out: JsonOpt = False,
    **knobs: Any,
) -> None:
    """Estimate one training step: time, throughput, MFU, memory, TP/PP/DP breakdown and advice."""
    flags = stack_flags(knobs)
    from commmodel.io.profiles import load_system_with_network
    from commmodel.step.estimate import estimate

    the_model = _model(model, seq_len, layers, hidden, heads, kv_heads, ffn_hidden, vocab, dtype)
    the_system = load_system_with_network(system, network)
    the_stack, options, the_model = step_setup(
        stack, the_model, the_system, dtype, **flags, compression=compression, topk_fraction=topk_fraction,
        dp_mode=dp_mode, synchronous=not asynchronous, straggler_cv=straggler_cv, schedule=schedule,
        library=(lib := resolve_library(the_system, library))[0])
    if gpus_per_node:
        from commmodel.hardware.cluster import Cluster
        the_system = Cluster.for_gpus(the_system, gpus, gpus_per_node).system
    dp = max(1, gpus // (tp * cp * pp))
    layout = checked_layout(the_model, gpus, the_system, dict(
        tp=tp, pp=pp, dp=dp, micro_batch=micro_batch, vpp=vpp, cp=cp, ep=ep, etp=etp, recompute=recompute,
        global_batch=global_batch, **stack_layout_defaults(the_stack, tp, dp, cp, zero, sequence_parallel)),
        options, flags)
    others = _faster_networks(the_system, gpus)
    result = estimate(the_model, the_system, gpus, layout, options, others)
    emitted = emitted_for(emit, layout, the_model, options, schedule)
    doc = {**result.to_json(), "provenance": _provenance(the_model, the_system, gpus, layout, options), "global_batch_assumed": global_batch is None, **stack_json(the_stack, options, the_model, the_system),
           "library": lib[0], "library_why": lib[1], **({"emit": emitted.record()} if emitted else {})}
    emit_json(doc) if json_out else _print_human(result, doc, emitted)


def _faster_networks(system: Any, gpus: int) -> dict[str, Any]:
    """The advice's faster networks for this node (step/advice.py ``faster_networks``, the rule ``query`` uses too)
    from the shipped link catalogue."""
    from commmodel.io.profiles import load_links
    from commmodel.step.advice import faster_networks

    return faster_networks(system, gpus, load_links())


def _provenance(model: Any, system: Any, gpus: int, layout: Any, options: Any) -> list[dict[str, Any]]:
    from commmodel.step.provenance import step_provenance

    return step_provenance(model, system, gpus, layout, options)


def _print_human(result: Any, doc: dict, emitted: Any = None) -> None:
    from commmodel.units import format_count, format_size_si, format_time

    lay = doc["layout"]
    m = result.model
    echo(f"{m.describe()}")
    cp_text = f"cp {lay['cp']} × " if lay.get("cp", 1) > 1 else ""
    nodes = f"{doc['num_nodes']} node{'s' if doc['num_nodes'] != 1 else ''}"
    echo(f"{doc['num_gpus']} {doc.get('rank_noun', 'GPUs')} on {doc['system']} ({nodes}): "
         f"tp {lay['tp']} × {cp_text}pp {lay['pp']} × "
         f"dp {lay['dp']}, micro-batch {lay['micro_batch']}, global batch {lay['global_batch']}"
         f"{' (assumed)' if doc['global_batch_assumed'] else ''}, {doc['num_micro_batches']} micro-batch{'es' if doc['num_micro_batches'] != 1 else ''}, "
         f"ZeRO {lay['zero']}, recompute {lay['recompute']}, SP {'on' if lay['sequence_parallel'] else 'off'}, vpp {lay['vpp']}"
         + (f", ep {lay['ep']}, etp {lay['etp']}" if m.is_moe else "")
         + (f", schedule {doc['schedule']}" if lay["pp"] > 1 else ""))
    echo(f"library     {doc['library']} ({doc['library_why']})")
    echo("\n".join(stack_lines(doc)))
    echo("")
    echo(f"step time   {format_time(doc['step_time_s'])}    {format_count(doc['tokens_per_s'])} tokens/s")
    per = one_rank(doc)
    echo(f"{'per ' + per:<11} {doc['model_tflops_per_gpu']:.1f} model TFLOP/s (MFU {doc['mfu']:.1%}), "
         f"{doc['hardware_tflops_per_gpu']:.1f} hardware TFLOP/s (HFU {doc['hfu']:.1%})" + _low_peak_text(doc, m))
    bound = "does not fit (memory)" if doc["bound"] == "memory" else f"{doc['bound']}-bound"
    echo(f"bound       {bound}; exposed communication {doc['exposed_comm_fraction']:.1%} of the step, "
         f"pipeline bubble {doc['bubble_fraction']:.1%}")
    mem = doc["memory"]
    limit = doc["memory_limit_bytes"]
    kept = f"; {format_size_si(doc['memory_headroom_bytes'])} kept free" if doc["memory_headroom_bytes"] else ""
    echo(f"memory      {format_size_si(doc['memory_bytes_per_gpu'])} of {format_size_si(limit)} "
         f"(the driver's total{kept}) per {per} ({'fits' if doc['fits'] else 'DOES NOT FIT'}): " + ", ".join(
             f"{k.removesuffix('_bytes')} {format_size_si(v)}" for k, v in mem.items()))
    echo("")
    step = doc["step_time_s"]
    rows = [[term, format_time(v["link_s"]), format_time(v["exposed_s"]), f"{v['exposed_s'] / step:.1%}"]
            for term, v in doc["breakdown"].items()]
    echo(format_table(rows, ["term", "link time", "exposed", "of step"], align="lrrr"))
    for flag in doc["flags"]:
        echo(f"! {flag}")
    if doc["advice"]:
        echo("")
        rows = [[a["change"], format_time(a["step_time_s"]), f"{a['gain_pct']:+.1f}%", a["note"]] for a in doc["advice"]]
        echo(format_table(rows, ["advice", "new step time", "tokens/s", "note"], align="lrrl"))
    for p in (p for p in doc["provenance"] if p["kind"] == "extrapolated"):
        echo(f"! extrapolated: {p['collective']} ({p['op']} of {p['size_bytes'] / 1e6:.3g} MB on {p['num_ranks']} ranks) is "
             f"outside the sizes the {p['tier']} tier was calibrated at ({p['source']})")
    if emitted:
        echo("\n".join(emitted_block(emitted)))


def _low_peak_text(doc: dict[str, Any], model: Any) -> str:
    """"; MFU 38.7% of the fp8 peak" where the linear GEMMs run at a low-precision peak (issue 12: MFU against the
    dense 16-bit peak, the low-precision figure beside it, labelled); "" for 16-bit training."""
    from commmodel.step.precision import is_low_precision, linear_peak_key

    if not is_low_precision(model.dtype):
        return ""
    return f"; MFU {doc['mfu_low_precision_peak']:.1%} of the {linear_peak_key(model.dtype)} peak"
