"""Context parallelism (cp) and interleaving with uneven chunks: every new term against a hand count."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import LayoutError
from commmodel.io.profiles import load_system
from commmodel.step.context_parallel import context_parallel_s
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.layout_rules import check_layout
from commmodel.step.options import StepOptions
from commmodel.step.terms import OVERLAP_INTERFERENCE
from commmodel.workload import PRESETS
from commmodel.workload.memory import in_flight_layers
from commmodel.workload.model import TransformerModel
from commmodel.workload.stages import chunk_layers, stage_layers

H100 = load_system("dgx-h100")  # 8 GPUs per node; IB NDR 8 × 50 GB/s × 0.95, 6.7 µs; NVLink 450 GB/s × 0.815
TOY = TransformerModel(name="toy10", num_layers=10, hidden_size=1024, num_heads=8, vocab_size=32000, seq_len=2048,
                       bias=False, norm="rmsnorm", position_embedding="rope", tied_embeddings=False)
NO_OVERLAP = StepOptions(overlap=False)


def test_chunk_layers_is_the_busiest_virtual_stage() -> None:
    llama405 = PRESETS["llama3-405b"]  # 126 layers (Llama 3, arXiv:2407.21783 Table 3)
    assert llama405.num_layers == 126
    assert chunk_layers(llama405, 16, np.array([1, 2, 3, 4, 8])).tolist() == [8, 4, 3, 2, 1]
    assert stage_layers(llama405, 16).tolist() == 8


def test_uneven_interleaving_is_allowed_up_to_l_plus_2_chunks() -> None:
    llama405 = PRESETS["llama3-405b"]
    layout = Layout(tp=8, pp=16, dp=64, micro_batch=1, global_batch=2048, vpp=8)
    check_layout(llama405, 8192, layout)  # 128 chunks ≤ 126 + 2 (Llama 3 §3.3.2: end chunks hold no block)
    with pytest.raises(LayoutError, match=r"pp 16 × vpp 9 = 144 virtual stages exceed layers 126 \+ 2"):
        check_layout(llama405, 8192, layout.model_copy(update={"vpp": 9}))


def test_bubble_is_paced_by_the_busiest_chunk() -> None:
    """10 layers on pp 4 × vpp 2: chunks of ⌈10/8⌉ = 2 layers, stages of ⌈10/4⌉ = 3, so the bubble is
    (p − 1)·2/3·t_mb = 2·t_mb, not (p − 1)/v·t_mb = 1.5·t_mb; with vpp 1 it is 3·t_mb."""
    for vpp, factor in ((1, 3.0), (2, 2.0)):
        layout = Layout(tp=1, pp=4, dp=2, micro_batch=1, global_batch=16, vpp=vpp)
        row = evaluate_single(TOY, H100, 8, layout, NO_OVERLAP)
        m = row["num_micro_batches"]
        assert m == 8
        t_mb = (row["compute/exposed_s"] + row["pp/p2p/exposed_s"]) / m  # no TP, no CP, no experts
        assert row["pp/bubble/exposed_s"] == pytest.approx(factor * t_mb, rel=1e-12)


def test_in_flight_layers_with_uneven_chunks() -> None:
    """1F1B interleaved: min(p, m)·⌈l/p⌉ + min(p, m)/p·(p − 1)·⌈l/(p·v)⌉; equal to Korthikanti's
    ⌈l/p⌉·p·(1 + (p − 1)/(p·v)) when p·v divides l."""
    assert in_flight_layers(TOY, np.array([4]), np.array([2]), np.array([8]), False).tolist() == [3 * 4 + 3 * 2]
    eight = TOY.model_copy(update={"num_layers": 8})
    assert in_flight_layers(eight, np.array([4]), np.array([2]), np.array([8]), False)[0] == pytest.approx(
        2 * 4 * (1 + 3 / 8))


def test_cp_layout_rules() -> None:
    model = TOY  # seq 2048
    check_layout(model, 16, Layout(tp=8, cp=2, dp=1, global_batch=4))
    with pytest.raises(LayoutError, match=r"sequence length 2048 is not divisible by 2 × cp 3 = 6"):
        check_layout(model, 24, Layout(tp=8, cp=3, dp=1, global_batch=4))
    with pytest.raises(LayoutError, match=r"tp 8 × cp 2 × pp 1 × dp 2 = 32 ≠ 16 GPUs"):
        check_layout(model, 16, Layout(tp=8, cp=2, dp=2, global_batch=4))


def test_cp_compute_and_memory_equal_a_micro_batch_of_b_over_cp() -> None:
    """cp 2 with micro-batch 2 holds 2·s/2 = s tokens per GPU: the same compute, TP traffic and activations
    as cp 1 with micro-batch 1 (attention: s/2 queries × s keys × 2 sequences = s queries × s keys)."""
    cp2 = evaluate_single(TOY, H100, 16, Layout(tp=8, cp=2, dp=1, micro_batch=2, global_batch=8), NO_OVERLAP)
    cp1 = evaluate_single(TOY, H100, 16, Layout(tp=8, cp=1, dp=2, micro_batch=1, global_batch=8), NO_OVERLAP)
    assert cp2["num_micro_batches"] == cp1["num_micro_batches"] == 4
    for key in ("compute/link_s", "tp/all_reduce/link_s", "memory/activations_bytes", "memory/weights_bytes"):
        assert cp2[key] == pytest.approx(cp1[key], rel=1e-12), key
    # Gradients reduce over dp·cp = 2 ranks strided by tp 8 in both: the same all-reduce.
    assert cp2["dp/all_reduce/link_s"] == pytest.approx(cp1["dp/all_reduce/link_s"], rel=1e-12)
    assert cp2["dp/all_reduce/link_s"] > 0
    assert cp2["cp/send_recv/link_s"] > 0 and cp1["cp/send_recv/link_s"] == 0
    assert cp2["model_flops_per_step"] == pytest.approx(cp1["model_flops_per_step"], rel=1e-12)


def test_cp_ring_link_and_exposure_by_hand() -> None:
    """toy10: 8 kv-heads of 128 on tp 8 → kv_local 128; b/cp = 1/2 of 2048 tokens: S = 1024·2·128·2 = 524,288 B.
    tp 8 × cp 2 > 8 GPUs per node: the ring hop is the network, 47.5 GB/s per rank, α = 6.7 µs.
    Per block: link = (cp − 1)·(t(S)·(1 + r) + t(2S)); 10 layers on one stage."""
    size = 1024 * 2 * 128 * 2.0
    bw, alpha = 50e9 * 0.95, 6.7e-6
    t1, t2 = alpha + size / bw, alpha + 2 * size / bw
    args = (TOY, H100, np.array([0.5]), np.array([8]), np.array([2]), np.array([1]))
    link, exposed = context_parallel_s(*args, np.array([0]), np.array([0.0]))
    assert link[0] == pytest.approx(10 * (t1 + t2), rel=1e-12)
    assert exposed[0] == pytest.approx(link[0], rel=1e-12)  # nothing to hide behind
    link_r, _ = context_parallel_s(*args, np.array([1]), np.array([0.0]))  # recompute redoes the forward ring
    assert link_r[0] == pytest.approx(10 * (2 * t1 + t2), rel=1e-12)
    core = t1  # one block's compute c = core/cp = t1/2: forward exposes t1 − c, backward t2 − 2c
    _, partly = context_parallel_s(*args, np.array([0]), np.array([core]))
    assert partly[0] == pytest.approx(10 * ((t1 - t1 / 2) + (t2 - t1)), rel=1e-9)
    _, hidden = context_parallel_s(*args, np.array([0]), np.array([100.0]))
    assert hidden[0] == 0.0
    # cp 1 has no ring; inside a node (tp 2 × cp 2 ≤ 8) the hop is NVLink: 450 GB/s × 0.815, 0.6 µs.
    assert context_parallel_s(TOY, H100, np.array([1.0]), np.array([8]), np.array([1]), np.array([1]),
                              np.array([0]), np.array([0.0]))[0][0] == 0.0
    size_nv = 1024 * 2 * (4 * 128) * 2.0  # tp 2: 4 kv-heads per rank
    nv = 0.6e-6 + size_nv / (450e9 * 0.815), 0.6e-6 + 2 * size_nv / (450e9 * 0.815)
    link_nv, _ = context_parallel_s(TOY, H100, np.array([0.5]), np.array([2]), np.array([2]), np.array([1]),
                                    np.array([0]), np.array([0.0]))
    assert link_nv[0] == pytest.approx(10 * (nv[0] + nv[1]), rel=1e-12)


def test_cli_estimate_cp() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["estimate", "-m", "llama3-8b", "-n", "32", "-s", "dgx-h100", "--tp", "8", "--cp", "2",
                                 "--seq-len", "32768", "--global-batch", "8", "--flash-attention", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["layout"]["cp"] == 2 and doc["layout"]["dp"] == 2
    assert doc["breakdown"]["cp/send_recv"]["link_s"] > 0
    bad = runner.invoke(app, ["estimate", "-m", "llama3-8b", "-n", "32", "-s", "dgx-h100", "--tp", "8", "--cp", "3"])
    assert bad.exit_code == 1
    assert "tp 8 × cp 3 × pp 1 = 24 does not divide 32 GPUs" in bad.stderr


def test_planner_searches_cp_only_for_long_sequences() -> None:
    from commmodel.planner.enumerate import candidate_layouts, cp_candidates
    from commmodel.planner.space import SearchSpace

    space = SearchSpace()
    assert cp_candidates(16384, 8192, space).tolist() == [1]  # below 32K tokens: no cp axis (planner speed)
    assert cp_candidates(16384, 131072, space).tolist() == [1, 2, 4, 8, 16]
    assert cp_candidates(48, 32768, space).tolist() == [1, 2, 4, 8, 16]
    assert cp_candidates(24, 32768, space).tolist() == [1, 2, 4, 8]  # 16 does not divide 24 GPUs
    assert cp_candidates(64, 2048, SearchSpace(cp=(2,))).tolist() == [2]  # pinned
    with pytest.raises(LayoutError, match=r"--cp 3 must divide 64 GPUs"):
        cp_candidates(64, 2048, SearchSpace(cp=(3,)))
    c = candidate_layouts(num_layers=32, num_heads=32, num_kv_heads=8, num_gpus=64, global_batch=64, gpus_per_node=8,
                          seq_len=65536, space=SearchSpace(micro_batches=(1,), zero_stages=(1,), max_vpp=1)).columns
    assert np.all(c["tp"] * c["cp"] * c["pp"] * c["dp"] == 64)
    assert set(c["cp"].tolist()) == {1, 2, 4, 8, 16}


def test_cp_torch_allgather_by_hand() -> None:
    """PyTorch context_parallel as torchtitan runs it (cp_comm torch-allgather): K/V repeated to the 8 query heads,
    1 per rank on tp 8; b/cp = 1/4 of 2048 tokens → S = 512·2·128·2 = 262,144 B; tp 8 × cp 4
    spans nodes: t(S) = α + S/B. Per block: one all-gather (cp − 1)·t(S) forward, again in the backward, cp sends of
    fp32 dK/dV t(2S): link = (1 + r + 1)·3·t1 + 4·t2; with no compute to hide behind, all of it is exposed."""
    size = 512 * 2 * 128 * 2.0
    bw, alpha = 50e9 * 0.95, 6.7e-6
    t1, t2 = alpha + size / bw, alpha + 2 * size / bw
    args = (TOY, H100, np.array([0.25]), np.array([8]), np.array([4]), np.array([1]))
    link, exposed = context_parallel_s(*args, np.array([0]), np.array([0.0]), "torch-allgather")
    assert link[0] == pytest.approx(10 * (2 * 3 * t1 + 4 * t2), rel=1e-12)
    assert exposed[0] == pytest.approx(link[0], rel=1e-12)
    link_r, _ = context_parallel_s(*args, np.array([1]), np.array([0.0]), "torch-allgather")
    assert link_r[0] == pytest.approx(10 * (3 * 3 * t1 + 4 * t2), rel=1e-12)
    # c = core/cp: the gather hides only behind step 0 (c forward, 2c backward); each dK/dV send behind 2c, the last
    # one waited after the loop. core = 4·t1 → c = t1: forward 2·t1 exposed, backward gather t1, sends 3·(t2 − 2t1) + t2.
    _, partly = context_parallel_s(*args, np.array([0]), np.array([4 * t1]), "torch-allgather")
    assert partly[0] == pytest.approx(10 * (2 * t1 + t1 + 3 * max(t2 - 2 * t1, 0.0) + t2), rel=1e-9)
    # however long the compute, the last dK/dV hop stays exposed: one t(2S) per block
    _, hidden = context_parallel_s(*args, np.array([0]), np.array([100.0]), "torch-allgather")
    assert hidden[0] == pytest.approx(10 * t2, rel=1e-12)


def test_cp_comm_overlap_off_exposes_every_transfer() -> None:
    """cp_comm_overlap off (torch.compile before pytorch#150074): the same link, all of it exposed, for both methods,
    where with overlap the compute of the toy's blocks hides all but the last dK/dV hop (by hand above)."""
    args = (TOY, H100, np.array([0.25]), np.array([8]), np.array([4]), np.array([1]), np.array([0]), np.array([100.0]))
    for method in ("ring", "torch-allgather"):
        link, hidden = context_parallel_s(*args, method)
        link_off, exposed_off = context_parallel_s(*args, method, overlap=False)
        assert link_off[0] == link[0] > 0 and exposed_off[0] == link[0] > hidden[0]
    model = PRESETS["llama3-8b"].model_copy(update={"seq_len": 65536})
    layout = Layout(tp=1, cp=2, dp=4, micro_batch=1, global_batch=4, zero=3, recompute="full")
    on = evaluate_single(model, H100, 8, layout, StepOptions(flash_attention=True))
    off = evaluate_single(model, H100, 8, layout, StepOptions(flash_attention=True, cp_comm_overlap=False))
    assert off["cp/send_recv/link_s"] == on["cp/send_recv/link_s"] == off["cp/send_recv/exposed_s"]
    hidden_s = on["cp/send_recv/link_s"] - on["cp/send_recv/exposed_s"]
    # what hid is now exposed, less the interference it no longer causes (OVERLAP_INTERFERENCE of it)
    assert off["step_time_s"] - on["step_time_s"] == pytest.approx(hidden_s * (1 - OVERLAP_INTERFERENCE), rel=1e-9)


def test_cli_cp_comm_overlap_flag_is_an_override() -> None:
    args = ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--cp", "2", "--seq-len", "65536",
            "--global-batch", "4", "--stack", "fsdp2", "--json"]
    on = json.loads(CliRunner().invoke(app, args).stdout)
    off = json.loads(CliRunner().invoke(app, args + ["--no-cp-comm-overlap"]).stdout)
    assert off["breakdown"]["cp/send_recv"]["exposed_s"] == pytest.approx(off["breakdown"]["cp/send_recv"]["link_s"])
    assert off["step_time_s"] > on["step_time_s"]
    assert "override: cp_comm_overlap = False (stack fsdp2: True)" in off["assumptions"]


def test_cp_torch_allgather_moves_every_query_head() -> None:
    """GQA: llama3-8b (32 query, 8 kv heads) on tp 1 × cp 2 in one node: torchtitan's repeat_kv makes PyTorch's
    all-gather carry 4× the bytes the Megatron-Core ring carries per step (α aside)."""
    model = PRESETS["llama3-8b"].model_copy(update={"seq_len": 8192})
    args = (model, H100, np.array([0.5]), np.array([1]), np.array([2]), np.array([1]), np.array([0]), np.array([0.0]))
    ring, _ = context_parallel_s(*args)
    torch_link, _ = context_parallel_s(*args, "torch-allgather")
    alpha, bw = 0.6e-6, 450e9 * 0.815
    s_ring = 4096 * 2 * 8 * 128 * 2.0
    assert ring[0] == pytest.approx(32 * ((alpha + s_ring / bw) + (alpha + 2 * s_ring / bw)), rel=1e-12)
    s_all = 4 * s_ring  # 32 heads
    assert torch_link[0] == pytest.approx(32 * (2 * (alpha + s_all / bw) + 2 * (alpha + 2 * s_all / bw)), rel=1e-12)


def test_fsdp2_stack_prices_torch_context_parallel() -> None:
    from commmodel.step.stack_assumptions import assumptions
    from commmodel.step.stacks import stack_options
    assert stack_options("fsdp2").cp_comm == "torch-allgather"
    assert stack_options("megatron-core").cp_comm == "ring" and StepOptions().cp_comm == "ring"
    assert any("context_parallel" in line for line in assumptions("fsdp2", stack_options("fsdp2")))


def test_torch_cp_ring_bytes_by_hand() -> None:
    """llama3-8b at 256K on cp 8, tp 1, b/cp = 1/8: the rank's attention output is 32,768 tokens × 32 heads × 128 =
    134,217,728 elements; 7 ring steps after the first. Per step, compiled: forward 8 + 2·1 = 10 bytes per element
    (fp32 running output read and written, the step's bf16 output read), backward 24 + 2·2 = 28; eager op by op:
    forward 36 + 2·5 = 46, backward 48 + 2·6 = 60 (_attention.py's merge, casts, cats, fp32 accumulation)."""
    from commmodel.step.context_parallel import torch_cp_ring_bytes
    model = PRESETS["llama3-8b"].model_copy(update={"seq_len": 262144})
    elements = 32768 * 32 * 128.0
    args = (model, np.array([1 / 8]), np.array([1]), np.array([8]))
    fwd, bwd = torch_cp_ring_bytes(*args, "compiled")
    assert fwd[0] == pytest.approx(7 * 10 * elements, rel=1e-12) and bwd[0] == pytest.approx(7 * 28 * elements, rel=1e-12)
    fwd, bwd = torch_cp_ring_bytes(*args, "eager")
    assert fwd[0] == pytest.approx(7 * 46 * elements, rel=1e-12) and bwd[0] == pytest.approx(7 * 60 * elements, rel=1e-12)
    assert torch_cp_ring_bytes(*args, "eager-fused-rmsnorm")[0][0] == fwd[0]
    # tp 8 shards the heads; cp 1 has no ring
    assert torch_cp_ring_bytes(model, np.array([1 / 8]), np.array([8]), np.array([8]), "compiled")[0][0] == \
        pytest.approx(7 * 10 * elements / 8, rel=1e-12)
    assert torch_cp_ring_bytes(model, np.array([1.0]), np.array([1]), np.array([1]), "compiled")[0][0] == 0.0


def test_torch_cp_ring_merge_is_priced_in_compute() -> None:
    """The merge runs on the stage: forward + recompute (full AC redoes it) + backward add their bytes at
    0.8 × HBM bandwidth to the compute of every block; Megatron's ring (cp_comm ring) is unchanged."""
    from commmodel.step.compute import HBM_EFFICIENCY, stage_compute
    from commmodel.step.context_parallel import torch_cp_ring_bytes
    from commmodel.workload.recompute_policies import RECOMPUTE_FULL
    model = PRESETS["llama3-8b"].model_copy(update={"seq_len": 65536})
    one = np.array([1])
    args = (model, H100, np.array([0.25]), one, one, np.array([RECOMPUTE_FULL]), np.zeros(1, bool), True, True)
    knobs = {"elementwise": "compiled", "cp": np.array([4])}
    ring = stage_compute(*args, **knobs)
    torch = stage_compute(*args, **knobs, cp_comm="torch-allgather")
    fwd, bwd = torch_cp_ring_bytes(model, np.array([0.25]), one, np.array([4]), "compiled")
    hbm = H100.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY
    assert float(torch.forward_s[0] - ring.forward_s[0]) == pytest.approx(32 * fwd[0] / hbm, rel=1e-9)
    assert float(torch.recompute_s[0] - ring.recompute_s[0]) == pytest.approx(32 * fwd[0] / hbm, rel=1e-9)
    assert float(torch.backward_s[0] - ring.backward_s[0]) == pytest.approx(32 * bwd[0] / hbm, rel=1e-9)
    assert float(torch.attention_core_s[0] - ring.attention_core_s[0]) == pytest.approx(fwd[0] / hbm, rel=1e-9)
    assert float(stage_compute(*args, elementwise="compiled", cp_comm="torch-allgather").total_s[0]) == \
        float(stage_compute(*args, elementwise="compiled").total_s[0])  # cp 1: no ring
