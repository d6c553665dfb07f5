"""``--emit``: a layout as Megatron-LM flags, torchtitan overrides and a DeepSpeed JSON config (names checked
against each framework's argument definitions, cited in commmodel/planner/emit.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import LayoutError
from commmodel.planner.emit import emit_layout
from commmodel.step.layout import Layout

runner = CliRunner()

# Megatron paper (Narayanan et al. 2021, Table 1) GPT-3 175B row: tp 8, pp 12 on 96 layers... here pp 4 × vpp 2.
BIG = Layout(tp=8, pp=4, dp=16, micro_batch=1, global_batch=1536, zero=1, recompute="selective",
             sequence_parallel=True, vpp=2, cp=1)
FSDP = Layout(tp=1, pp=1, dp=64, micro_batch=2, global_batch=512, zero=3, recompute="full")
CP = Layout(tp=2, cp=4, pp=1, dp=4, micro_batch=1, global_batch=32, zero=0)


def _pairs(argv: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for i, word in enumerate(argv):
        if word.startswith("--"):
            out[word] = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
    return out


def test_megatron_flags_for_an_interleaved_tp_pp_layout():
    emitted = emit_layout("megatron", BIG, seq_len=2048, num_layers=96)
    assert _pairs(emitted.args) == {
        "--tensor-model-parallel-size": "8", "--pipeline-model-parallel-size": "4", "--context-parallel-size": "1",
        "--num-virtual-stages-per-pipeline-rank": "2", "--sequence-parallel": None, "--micro-batch-size": "1",
        "--global-batch-size": "1536", "--seq-length": "2048", "--recompute-granularity": "selective",
        "--use-distributed-optimizer": None}
    assert "launch 512 ranks" in emitted.notes[0]
    assert emitted.text.split(" \\\n  ") == [a if v is None else f"{a} {v}" for a, v in _pairs(emitted.args).items()]


def test_megatron_says_zero3_is_not_expressible_and_spells_full_recompute():
    emitted = emit_layout("megatron", FSDP)
    flags = _pairs(emitted.args)
    assert flags["--recompute-granularity"] == "full" and flags["--recompute-method"] == "uniform"
    assert flags["--recompute-num-layers"] == "1"
    assert "--use-distributed-optimizer" not in flags
    assert any("ZeRO-3 is not expressible" in n for n in emitted.notes)
    assert _pairs(emit_layout("megatron", CP).args)["--context-parallel-size"] == "4"


def test_torchtitan_overrides_count_batches_in_tokens():
    emitted = emit_layout("torchtitan", BIG, seq_len=2048, num_layers=96)
    assert emitted.args == {
        "parallelism.data_parallel_replicate_degree": 1, "parallelism.data_parallel_shard_degree": 16,
        "parallelism.fsdp_reshard_after_forward": "never", "parallelism.tensor_parallel_degree": 8,
        "parallelism.enable_sequence_parallel": True, "parallelism.pipeline_parallel_degree": 4,
        "parallelism.num_pp_microbatches": 96, "parallelism.pipeline_parallel_schedule": "Interleaved1F1B",
        "parallelism.pipeline_parallel_layers_per_stage": 12,  # 96 layers / (4 × 2) stages
        "parallelism.context_parallel_degree": 1,
        "training.num_tokens_per_microbatch_per_dp_rank": 2048, "training.num_tokens_per_train_step": 1536 * 2048,
        "training.max_context_length": 2048}
    assert "--parallelism.enable_sequence_parallel \\" in emitted.text
    assert any("ZeRO-1" in n and "not expressible" in n for n in emitted.notes)


def test_torchtitan_replicate_vs_shard_and_false_bools():
    zero0 = emit_layout("torchtitan", CP, seq_len=131072)
    assert zero0.args["parallelism.data_parallel_replicate_degree"] == 4
    assert zero0.args["parallelism.data_parallel_shard_degree"] == 1
    assert zero0.args["parallelism.context_parallel_degree"] == 4
    assert "--parallelism.no_enable_sequence_parallel" in zero0.text  # tp 2 without SP
    fsdp = emit_layout("torchtitan", FSDP, seq_len=4096)
    assert fsdp.args["parallelism.data_parallel_shard_degree"] == 64
    assert "parallelism.fsdp_reshard_after_forward" not in fsdp.args  # ZeRO-3: the default reshard
    assert any("FullAC.Config()" in n for n in fsdp.notes)
    no_len = emit_layout("torchtitan", BIG)
    assert any("layers / 8" in n for n in no_len.notes) and any("tokens" in n for n in no_len.notes)


def test_deepspeed_json_and_what_it_cannot_say():
    emitted = emit_layout("deepspeed", BIG)
    assert json.loads(emitted.text) == {"train_batch_size": 1536, "train_micro_batch_size_per_gpu": 1,
                                        "gradient_accumulation_steps": 96, "zero_optimization": {"stage": 1},
                                        "tensor_parallel": {"autotp_size": 8}}
    assert any("PipelineModule(num_stages=4)" in n for n in emitted.notes)
    assert any("vpp 2" in n for n in emitted.notes)
    fsdp = emit_layout("deepspeed", FSDP)
    assert fsdp.args == {"train_batch_size": 512, "train_micro_batch_size_per_gpu": 2,
                         "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 3}}
    pp_zero2 = emit_layout("deepspeed", BIG.model_copy(update={"zero": 2}))
    assert any("refuses ZeRO-2" in n for n in pp_zero2.notes)
    assert any("cp 4" in n for n in emit_layout("deepspeed", CP).notes)


def test_a_plan_row_dict_emits_like_its_layout():
    row = {**BIG.model_dump(), "rank": 1, "step_time_s": 1.0}
    assert emit_layout("megatron", row, seq_len=2048).args == emit_layout("megatron", BIG, seq_len=2048).args
    with pytest.raises(LayoutError, match="not a framework"):
        emit_layout("nemo", BIG)
    with pytest.raises(LayoutError, match="lacks global_batch"):
        emit_layout("megatron", {k: v for k, v in row.items() if k != "global_batch"})


def test_plan_and_estimate_emit_the_chosen_layout():
    plan = runner.invoke(app, ["plan", "--model", "llama3-8b", "--gpus", "16", "--system", "dgx-h100", "--top", "1",
                               "--emit", "deepspeed", "--json"])
    assert plan.exit_code == 0, plan.output
    doc = json.loads(plan.stdout)
    top = doc["layouts"][0]
    config = doc["emit"]["args"]
    assert config["train_batch_size"] == doc["global_batch"]
    assert config["train_micro_batch_size_per_gpu"] == top["micro_batch"]
    assert config["zero_optimization"]["stage"] == top["zero"]
    assert config["gradient_accumulation_steps"] == doc["global_batch"] // (top["micro_batch"] * top["dp"])
    est = runner.invoke(app, ["estimate", "--model", "llama3-8b", "--gpus", "16", "--system", "dgx-h100", "--tp", "2",
                              "--pp", "2", "--emit", "megatron"])
    assert est.exit_code == 0, est.output
    assert "--tensor-model-parallel-size 2 \\\n  --pipeline-model-parallel-size 2" in est.stdout
    bad = runner.invoke(app, ["estimate", "--model", "llama3-8b", "--gpus", "8", "--system", "dgx-h100", "--emit", "x"])
    assert bad.exit_code == 1 and "not a framework" in bad.output


@pytest.mark.parametrize(("framework", "schedule", "words"), [
    ("torchtitan", "gpipe", "set parallelism.pipeline_parallel_schedule GPipe"),
    ("megatron", "dualpipe", "megatron has no dualpipe schedule"),
    ("deepspeed", "gpipe", "deepspeed has no gpipe schedule"),
])
def test_a_schedule_other_than_1f1b_is_named_or_noted(framework, schedule, words):
    from commmodel.planner.emit import emit_layout

    layout = Layout(tp=8, pp=16, dp=2, micro_batch=1, global_batch=64)
    notes = emit_layout(framework, layout, seq_len=8192, num_layers=80, schedule=schedule).notes
    assert any(words in note for note in notes), notes
    assert not any("schedule" in n for n in emit_layout(framework, layout, seq_len=8192, num_layers=80).notes)
    no_pp = Layout(tp=8, pp=1, dp=32, micro_batch=1, global_batch=64)
    assert not any("schedule" in n for n in emit_layout(framework, no_pp, schedule=schedule).notes)


def test_megatron_states_the_step_options_the_layout_was_priced_with() -> None:
    """The estimate assumed dropout 0 (megatron-core), Megatron's default is 0.1: the launch must say 0. Module
    recompute, activation offload and the precision-aware optimizer become their Megatron-LM arguments (nargs '+'
    lists as separate words); recompute moe is selective + --recompute-modules moe, not dropped."""
    from commmodel.step.stacks import stack_options
    from commmodel.workload.optimizer_states import PrecisionAwareOptimizer

    options = stack_options("megatron-core", recompute_modules=("layernorm", "moe_act"), offload_modules=("moe_act",),
                            precision_aware_optimizer=PrecisionAwareOptimizer.parse("bf16,bf16"))
    moe_layout = Layout(tp=1, pp=1, dp=8, ep=8, micro_batch=1, global_batch=8, zero=1, recompute="selective")
    argv = emit_layout("megatron", moe_layout, seq_len=4096, options=options).args
    pairs = _pairs(argv)
    assert pairs["--hidden-dropout"] == "0" and pairs["--attention-dropout"] == "0"
    assert argv[argv.index("--recompute-modules") + 1: argv.index("--recompute-modules") + 3] == ["layernorm", "moe_act"]
    assert "--fine-grained-activation-offloading" in pairs and pairs["--offload-modules"] == "moe_act"
    assert (pairs["--use-precision-aware-optimizer"], pairs["--exp-avg-dtype"], pairs["--exp-avg-sq-dtype"],
            pairs["--main-params-dtype"]) == (None, "bf16", "bf16", "fp32")
    recompute_moe = emit_layout("megatron", moe_layout.model_copy(update={"recompute": "moe"})).args
    assert _pairs(recompute_moe)["--recompute-granularity"] == "selective"
    assert _pairs(recompute_moe)["--recompute-modules"] == "moe"
    titan = emit_layout("torchtitan", moe_layout, seq_len=4096, options=options)
    assert sum("Megatron-Core only" in n for n in titan.notes) == 3  # offload, optimizer, recompute modules
    assert "--hidden-dropout" not in emit_layout("megatron", moe_layout, seq_len=4096).args  # no options: no knobs


def test_megatron_states_the_dispatcher_the_overlap_and_an_uneven_pipeline() -> None:
    """The MoE audit: the dispatcher and --overlap-moe-expert-parallel-comm the estimate priced were dropped from the
    launch, and 94 layers on pp 8 (Megatron asserts an even split) came with no note."""
    from commmodel.step.stacks import stack_options

    layout = Layout(tp=2, pp=8, dp=16, ep=8, micro_batch=1, global_batch=1024, zero=1, vpp=2)
    options = stack_options("megatron-core", moe_dispatcher="hybridep", moe_a2a_overlap=True)
    emitted = emit_layout("megatron", layout, seq_len=4096, num_layers=94, options=options)
    pairs = _pairs(emitted.args)
    assert pairs["--moe-token-dispatcher-type"] == "flex" and pairs["--moe-flex-dispatcher-backend"] == "hybridep"
    assert "--overlap-moe-expert-parallel-comm" in pairs
    assert any("94 layers do not split evenly over pp 8 × vpp 2 = 16" in n for n in emitted.notes)
    plain = _pairs(emit_layout("megatron", layout, num_layers=96, options=stack_options("megatron-core")).args)
    assert plain["--moe-token-dispatcher-type"] == "alltoall" and "--overlap-moe-expert-parallel-comm" not in plain
    assert not any("split evenly" in n for n in emit_layout("megatron", layout, num_layers=96).notes)


def test_megatron_launch_asks_for_every_overlap_and_fusion_the_estimate_priced() -> None:
    """The megatron-core stack prices DP reduce-scatter / all-gather overlap, userbuffers TP overlap, bf16 gradient
    reduction, the fused loss and FP8 weight gathers, each of which Megatron-LM runs only when asked (@d98e8a6
    arguments.py store_true flags; TransformerConfig tp_comm_overlap, cross_entropy_loss_fusion): before, --emit
    left them all out, so the pasted launch ran slower than the estimate said. Each follows its knob."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    base = ["estimate", "-m", "llama3-8b", "-n", "16", "-s", "dgx-h100", "--tp", "2", "--emit", "megatron", "--json"]

    def args(*extra: str) -> list[str]:
        result = CliRunner().invoke(app, [*base, *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["emit"]["args"]

    default = args("--dtype", "fp8")
    for flag in ("--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap", "--grad-reduce-in-bf16",
                 "--cross-entropy-loss-fusion", "--fp8-param-gather"):
        assert flag in default
    assert "--attention-backend" not in default and "--no-overlap-p2p-communication" not in default
    off = args("--no-overlap", "--no-tp-comm-overlap", "--grad-reduce-dtype", "fp32", "--cross-entropy", "unfused",
               "--no-flash-attention", "--pp", "2", "--vpp", "2", "--no-pp-p2p-overlap")
    for flag in ("--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap", "--grad-reduce-in-bf16",
                 "--cross-entropy-loss-fusion", "--fp8-param-gather"):
        assert flag not in off
    assert off[off.index("--attention-backend") + 1] == "unfused" and "--no-overlap-p2p-communication" in off


def test_megatron_launch_states_the_training_dtype() -> None:
    """The consistency audit of 2026-11-28: --emit megatron never wrote --bf16/--fp16, so the pasted launch trained in
    fp32, Megatron-LM's default (ModelParallelConfig bf16/fp16 False); NVFP4 had no flag and torchao's row-wise FP8
    none and no note; FP8 weights priced at ZeRO 0 were dropped from the launch without a word."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    def emitted(*argv: str) -> dict:
        result = CliRunner().invoke(app, ["estimate", "-m", "llama3-8b", "-n", "16", *argv, "--emit", "megatron",
                                          "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["emit"]

    assert "--bf16" in emitted("-s", "dgx-h100")["args"]
    v100 = emitted("-s", "dgx-h100", "--dtype", "fp16")["args"]
    assert "--fp16" in v100 and "--bf16" not in v100
    nvfp4 = emitted("-s", "hgx-b200", "--dtype", "nvfp4")["args"]
    assert nvfp4[nvfp4.index("--fp4-format") + 1] == "e2m1" and nvfp4[nvfp4.index("--fp4-recipe") + 1] == "nvfp4"
    rowwise = emitted("-s", "hgx-b200", "--dtype", "fp8-rowwise")
    assert "--fp8-recipe" not in rowwise["args"] and "--fp8-param-gather" not in rowwise["args"]
    assert any("torchao's row-wise recipe" in n for n in rowwise["notes"])
    zero0 = emitted("-s", "dgx-h100", "--dtype", "fp8", "--zero", "0")
    assert "--fp8-param-gather" not in zero0["args"]
    assert any("--no-fp8-param-gather" in n for n in zero0["notes"])


def test_torchtitan_launch_compiles_what_was_priced_compiled_and_names_the_float8_converter() -> None:
    """fsdp2 with --elementwise compiled was priced under torch.compile but emitted without --compile.enable; an FP8
    dtype had no word (torchtitan sets float8 as a model converter in Python)."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    def emitted(*argv: str) -> dict:
        result = CliRunner().invoke(app, ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--stack",
                                          "fsdp2", *argv, "--emit", "torchtitan", "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["emit"]

    compiled = emitted("--elementwise", "compiled", "--dtype", "fp8")
    assert compiled["args"]["compile.enable"] is True and "--compile.enable" in compiled["text"]
    assert any("model converter" in n for n in compiled["notes"])
    eager = emitted()
    assert "compile.enable" not in eager["args"] and not any("model converter" in n for n in eager["notes"])


def test_deepspeed_config_states_the_dtype_and_the_overlap_priced() -> None:
    """The DeepSpeed JSON had no "bf16" section (DeepSpeed trains in fp32 without one) and no overlap_comm where the
    estimate's overlap differed from DeepSpeed's default (on for ZeRO-3 only)."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    def config(*argv: str) -> dict:
        result = CliRunner().invoke(app, ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--stack",
                                          "deepspeed", *argv, "--emit", "deepspeed", "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["emit"]["args"]

    plain = config()
    assert plain["bf16"] == {"enabled": True} and "overlap_comm" not in plain["zero_optimization"]
    assert config("--overlap")["zero_optimization"]["overlap_comm"] is True
    assert config("--dtype", "fp16")["fp16"] == {"enabled": True}
    assert config("--zero", "3", "--no-overlap")["zero_optimization"] == {"stage": 3, "overlap_comm": False}
