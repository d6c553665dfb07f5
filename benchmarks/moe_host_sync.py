"""Issue 13: how much host time per MoE layer would the published Megatron-Core MoE runs need? (evidence, no model)

    python benchmarks/moe_host_sync.py

Megatron-Core's MoE layer blocks the CPU on the GPU once or more per forward (docs/moe.md, "Host-device
synchronisations"): after such a sync the GPU queue is empty, so from that point to the next sync the layer takes
max(GPU work, host work) instead of the GPU work alone. The model prices GPU work only. This script takes the step
model's forward GPU time of one block per micro-batch (G_f, ``stage_compute``: matmuls + memory-bound work, no
communication, the last stage's logits spread over its blocks) and, for an assumed host time H per MoE-layer forward
(launching every op from one dispatch sync to the next), adds max(0, H − G_f) per MoE-layer forward on the busiest
stage (twice with ``recompute: moe``: the checkpointed layer dispatches again) to the predicted step. It prints each
MoE row's error for a sweep of H, and the H at which each row would match its published number.

No H is adopted: no source gives the host time per op of this stack (PyTorch eager + Transformer Engine + DeepEP)
on a DGX H100 host to better than a factor of 2-3, and across that range the worst row goes anywhere from +35% to
−8% (docs/moe.md). Rows with CUDA graphs (GB200), or not run by Megatron-Core (DeepSeek's HAI-LLM), are skipped.
"""

from __future__ import annotations

import numpy as np

from commmodel.io.profiles import load_system
from commmodel.io.validation_data import read_training_moe
from commmodel.step.compute import stage_compute, stage_compute_knobs
from commmodel.step.estimate import evaluate_single
from commmodel.step.experts import moe_layers_on_stage
from commmodel.step.layout import LAYOUT_FIELDS, Layout
from commmodel.validation.moe import moe_run_options
from commmodel.workload import PRESETS
from commmodel.workload.stages import stage_layers

HOST_S_PER_MOE_LAYER_FORWARD = (0.0, 1.5e-3, 2.0e-3, 2.5e-3, 3.0e-3, 4.0e-3, 5.0e-3)
"""The assumed host times swept (seconds per MoE-layer forward): a what-if grid, not a source."""


def _row(run: dict) -> dict | None:
    """Model step, G_f and MoE-layer forwards per step of one run; None where the mechanism does not apply."""
    stack = run["stack"]
    if "cuda_graphs" in stack or stack.get("schedule") == "dualpipe":
        return None
    model = PRESETS[run["model"]["preset"]]
    model = model.model_copy(update={k: v for k, v in run["model"].items() if k != "preset"})
    layout = Layout(**{k: v for k, v in run["layout"].items() if k in LAYOUT_FIELDS})
    system, options = load_system(run["system"]), moe_run_options(stack)
    row = evaluate_single(model, system, run["num_gpus"], layout, options)
    one = lambda value: np.array([value])  # noqa: E731
    compute = stage_compute(model, system, one(layout.micro_batch), one(layout.tp), one(layout.pp), one(0),
                            one(layout.sequence_parallel), True, True, ep=one(layout.ep), etp=one(layout.etp),
                            cp=one(layout.cp), **stage_compute_knobs(options))
    blocks = float(stage_layers(model, one(layout.pp))[0])
    dp = run["num_gpus"] // (layout.tp * layout.pp * layout.cp)
    micro_batches = layout.global_batch // (dp * layout.micro_batch)
    passes = 2 if layout.recompute == "moe" else 1
    return {"id": run["id"], "published": float(run["published"]), "step_s": float(row["step_time_s"]),
            "predicted": float(row["tokens_per_s"]) / run["num_gpus"], "g_f_s": float(compute.forward_s[0]) / blocks,
            "forwards": micro_batches * float(moe_layers_on_stage(model, one(layout.pp))[0]) * passes}


def error_pct(r: dict, host_s: float) -> float:
    """The row's error with host time ``host_s`` per MoE-layer forward."""
    step_s = r["step_s"] + r["forwards"] * max(0.0, host_s - r["g_f_s"])
    return 100.0 * (r["predicted"] * r["step_s"] / step_s / r["published"] - 1.0)


def break_even_s(r: dict, target_error_pct: float = 0.0) -> float | None:
    """H at which the row's error is ``target_error_pct`` (None where the model is already slower than that)."""
    step_s = r["step_s"] * r["predicted"] / (r["published"] * (1.0 + target_error_pct / 100.0))
    if step_s <= r["step_s"]:
        return None
    return r["g_f_s"] + (step_s - r["step_s"]) / r["forwards"]


def main() -> int:
    rows = [r for r in (_row(run) for run in read_training_moe()) if r is not None]
    grid = " ".join(f"{h * 1e3:>6.1f}" for h in HOST_S_PER_MOE_LAYER_FORWARD)
    print("error (%) with H ms of host time per MoE-layer forward; H at which each row reads 0% / +30%")
    print(f"{'run':<44} {'G_f ms':>6} {'fwd/step':>8}  {grid}   H 0% / +30%")
    for r in rows:
        errors = " ".join(f"{error_pct(r, h):>+6.1f}" for h in HOST_S_PER_MOE_LAYER_FORWARD)
        even = [break_even_s(r, t) for t in (0.0, 30.0)]
        shown = " / ".join("  -  " if h is None else f"{h * 1e3:5.2f}" for h in even)
        print(f"{r['id'][:44]:<44} {r['g_f_s'] * 1e3:>6.2f} {r['forwards']:>8.0f}  {errors}   {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
