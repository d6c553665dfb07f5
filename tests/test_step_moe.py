"""Expert parallelism (issue 13): schema, placement, memory against Megatron-Core, the all-to-all oracle."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.errors import LayoutError
from commmodel.io.profiles import load_system
from commmodel.step.estimate import estimate
from commmodel.step.experts import dispatch_tokens_per_rank, rank_imbalance
from commmodel.step.layout import Layout, LayoutArrays
from commmodel.step.layout_rules import check_layout
from commmodel.step.options import StepOptions
from commmodel.step.placement import Placement
from commmodel.workload import PRESETS
from commmodel.workload.memory import memory_terms
from commmodel.workload.presets import get_model

GB = 1e9

# docs/moe-memory-reference.md: Megatron-Core theoretical_memory_usage.py @1bcb3b9e, distributed optimizer,
# (preset, GPUs, tp, pp, ep) -> (weights, gradients, optimizer) GB per GPU.
MEGATRON_WORKED = [
    ("mixtral-8x7b", 64, 1, 1, 8, (14.486, 28.971, 8.757)),
    ("deepseek-v3", 1024, 2, 8, 64, (5.402, 10.805, 7.930)),
    ("qwen3-235b-a22b", 256, 2, 8, 32, (3.247, 6.494, 11.197)),
]


@pytest.mark.parametrize("name,gpus,tp,pp,ep,expected", MEGATRON_WORKED)
def test_memory_within_5pct_of_megatron(name, gpus, tp, pp, ep, expected) -> None:
    model = PRESETS[name]
    dp = gpus // (tp * pp)
    one = np.ones(1, dtype=np.int64)
    mem = memory_terms(model, tp * one, pp * one, dp * one, one, 8 * one, one, 0 * one, one > 0, one,
                       25 * 2**20, True, False, ep=ep * one, etp=one)
    got = (mem["weights"][0] / GB, mem["gradients"][0] / GB, mem["optimizer"][0] / GB)
    for g, e in zip(got, expected):
        assert g == pytest.approx(e, rel=0.05)
    assert sum(got) == pytest.approx(sum(expected), rel=0.05)


def test_issue_reproduction_no_longer_claims_1_358_gb() -> None:
    model, system = PRESETS["mixtral-8x7b"], load_system("dgx-h100")
    layout = Layout(dp=64, global_batch=1024, zero=1, recompute="selective", ep=8)
    result = estimate(model, system, 64, layout, StepOptions(flash_attention=True))
    optimizer = result.row["memory/optimizer_bytes"]
    assert optimizer / GB == pytest.approx(8.757, rel=0.01)  # 12 B × expert params over edp = 8
    assert not result.row["fits"]


def test_dense_memory_and_step_unchanged_by_ep_fields() -> None:
    model, system = PRESETS["gpt3-1.3b"], load_system("dgx-a100")
    arrays = LayoutArrays.from_layouts([Layout(tp=2, dp=8, global_batch=64, zero=1)])
    from commmodel.step.evaluate import evaluate_layouts
    cols = evaluate_layouts(model, system, 16, arrays)
    assert cols["ep/all_to_all/link_s"][0] == 0 and cols["ep/grad_reduce/link_s"][0] == 0
    assert cols["ep/imbalance/link_s"][0] == 0


def test_expert_rules() -> None:
    mixtral, dense = PRESETS["mixtral-8x7b"], PRESETS["gpt3-1.3b"]
    check_layout(mixtral, 64, Layout(tp=2, dp=32, global_batch=64, ep=8, etp=2))
    with pytest.raises(LayoutError, match="experts 8 are not divisible by ep 16"):
        check_layout(mixtral, 64, Layout(dp=64, global_batch=64, ep=16))
    with pytest.raises(LayoutError, match=r"ep 8 × etp 1 = 8 does not divide tp 1 × cp 1 × dp 4 = 4"):
        check_layout(mixtral, 64, Layout(pp=16, dp=4, global_batch=64, ep=8))
    with pytest.raises(LayoutError, match="is dense .no experts., so both are 1"):
        check_layout(dense, 8, Layout(dp=8, global_batch=8, ep=2))


def test_layout_record_round_trip_and_old_records() -> None:
    x = Layout(tp=2, dp=4, global_batch=8, ep=4, etp=2)
    assert Layout.from_record(x.to_record()) == x
    old = {k: v for k, v in x.to_record().items() if k not in ("ep", "etp")}
    assert Layout.from_record(old).ep == 1
    assert x.edp == 1


def test_expert_placement_folds_over_the_stage() -> None:
    """Grid oracle: Megatron-Core's expert rank order tp-ep-dp-pp (tp = etp) inside a stage of
    tp·cp·dp ranks; ep ranks are etp apart, edp ranks ep·etp apart."""
    system = load_system("dgx-h100")  # 8 GPUs per node
    for tp, dp, ep, etp in [(1, 64, 8, 1), (2, 32, 8, 1), (2, 32, 4, 2), (1, 64, 32, 1), (4, 16, 16, 2)]:
        place = Placement(system, tp=tp, dp=dp, ep=ep, etp=etp)
        edp = tp * dp // (ep * etp)
        ranks = np.arange(tp * dp).reshape(edp, ep, etp)  # rank = etp_rank + etp·(ep_rank + ep·edp_rank)
        ep_group, edp_group = ranks[0, :, 0], ranks[:, 0, 0]
        assert int(place.size("ep")) == ep and int(place.size("edp")) == edp
        assert int(place.ranks_per_node("ep")) == max(1, sum(1 for r in ep_group if r // 8 == 0))
        assert int(place.ranks_per_node("edp")) == max(1, sum(1 for r in edp_group if r // 8 == 0))
        assert bool(place.crosses_nodes("ep")) == (len(set(ep_group // 8)) > 1)


def test_dispatch_oracle_routed_tokens_sum_to_tokens_times_topk() -> None:
    """Schedule oracle: simulate the all-to-all dispatcher on one stage (dp·cp·tp ranks, sequence
    parallel: each holds b·s/(tp·cp) tokens), route each token to k distinct experts at random, and
    count the copies each rank sends: every rank sends the formula's count, and the expert ranks
    receive tokens × top-k in all."""
    model = PRESETS["mixtral-8x7b"].model_copy(update={"seq_len": 256})
    rng = np.random.default_rng(0)
    tp, cp, dp, ep, b = 2, 2, 4, 8, 2
    ranks = tp * cp * dp
    local = b * model.seq_len // (tp * cp)
    sent = np.zeros(ranks)
    received = np.zeros(ep)
    for r in range(ranks):
        for _ in range(local):
            experts = rng.choice(model.num_experts, size=model.experts_per_token, replace=False)
            sent[r] += experts.size
            np.add.at(received, experts // (model.num_experts // ep), 1)
    formula = dispatch_tokens_per_rank(model, np.array([b / cp]), np.array([tp]))[0]
    assert np.all(sent == formula)
    tokens_of_stage = dp * b * model.seq_len  # dp replicas × b sequences
    assert received.sum() == tokens_of_stage * model.experts_per_token == ranks * formula


def test_rank_imbalance_limits() -> None:
    model = PRESETS["deepseek-v3"]  # 256 routed experts
    assert rank_imbalance(model, np.array([1]), 1.7)[0] == pytest.approx(1.0)
    assert rank_imbalance(model, np.array([256]), 1.7)[0] == pytest.approx(1.7)
    rho = rank_imbalance(model, np.array([1, 8, 64, 256]), 1.7)
    assert np.all(np.diff(rho) > 0)


def test_all_to_all_leaves_the_node_past_eight() -> None:
    model, system = PRESETS["mixtral-8x7b"], load_system("dgx-h100")
    arrays = LayoutArrays.from_layouts([Layout(tp=2, dp=32, global_batch=64, ep=ep, zero=1) for ep in (4, 8)])
    from commmodel.step.evaluate import evaluate_layouts
    cols = evaluate_layouts(model, system, 64, arrays, StepOptions(moe_imbalance=1.0))
    # ep 4 (stride 1) stays in a node; ep 8 at etp 1 is 8 consecutive ranks: also one node
    assert cols["ep/all_to_all/link_s"][0] > 0 and cols["ep/all_to_all/link_s"][1] > 0
    per_rank = cols["ep/all_to_all/link_s"]
    assert per_rank[1] > per_rank[0]  # more peers off-GPU: (n−1)/n of the buffer moves


def test_remote_domains_closed_form_and_simulation() -> None:
    """k = 1 gives the pairwise remote share (G − 1)/G; a simulation of top-k routing without replacement
    over E experts in G equal domains matches the closed form."""
    from commmodel.step.experts import remote_domains_per_token

    mixtral = PRESETS["mixtral-8x7b"]
    one = mixtral.model_copy(update={"experts_per_token": 1})
    assert remote_domains_per_token(one, np.array([4.0]))[0] == pytest.approx(3 / 4)
    qwen = PRESETS["qwen3-235b-a22b"]  # 128 experts, top-8
    rng = np.random.default_rng(1)
    g = 4
    picks = np.array([rng.choice(qwen.num_experts, qwen.experts_per_token, replace=False) for _ in range(20000)])
    domains = picks // (qwen.num_experts // g)
    remote = np.array([len(set(row) - {0}) for row in domains])
    assert remote_domains_per_token(qwen, np.array([g]))[0] == pytest.approx(remote.mean(), rel=0.01)


def test_deepep_changes_only_cross_domain_groups() -> None:
    from commmodel.step.evaluate import evaluate_layouts

    model, system = PRESETS["qwen3-235b-a22b"], load_system("dgx-h100")
    arrays = LayoutArrays.from_layouts([Layout(tp=2, pp=8, dp=16, global_batch=2048, zero=1, ep=ep,
                                               sequence_parallel=True) for ep in (4, 32)])
    plain = evaluate_layouts(model, system, 256, arrays, StepOptions(moe_dispatcher="alltoall"))
    deepep = evaluate_layouts(model, system, 256, arrays, StepOptions(moe_dispatcher="deepep"))
    a2a = "ep/all_to_all/link_s"
    assert deepep[a2a][0] == pytest.approx(plain[a2a][0])  # ep 4: one node, nothing to deduplicate
    assert deepep[a2a][1] < 0.7 * plain[a2a][1]  # ep 32 over 4 nodes: ~2.7 remote nodes per token, not 6 copies


def test_exposed_all_to_all_is_flagged_with_its_placement() -> None:
    model, system = PRESETS["qwen3-235b-a22b"], load_system("dgx-h100")
    layout = Layout(tp=2, pp=8, dp=16, global_batch=2048, zero=1, ep=32, sequence_parallel=True, vpp=4,
                    recompute="selective")
    result = estimate(model, system, 256, layout, StepOptions(flash_attention=True))
    share = result.row["ep/all_to_all/exposed_s"] / result.row["step_time_s"]
    flags = [f for f in result.flags if f.startswith("MoE all-to-all is exposed")]
    assert share > 0.05 and len(flags) == 1 and "leaves the NVLink domain" in flags[0] and f"{share:.0%}" in flags[0]
    assert any(a.change == "overlap MoE dispatch/combine with compute" for a in result.advice)


def test_ep_inside_a_multi_node_nvlink_domain_is_not_flagged_as_leaving_it() -> None:
    """On an NVL72 rack a node is a 4-GPU tray but the NVLink domain is 72 GPUs: an EP group of 8 or 64 that the
    price keeps on NVLink must not be told it leaves the domain (the flag follows the domain, not the tray)."""
    model, system = PRESETS["deepseek-v3"], load_system("gb200-nvl72")
    for ep in (8, 64):
        layout = Layout(tp=1, pp=8, dp=64, global_batch=1152, zero=1, ep=ep)
        result = estimate(model, system, 512, layout, StepOptions(moe_imbalance=1.0))
        assert not any("leaves the NVLink domain" in f for f in result.flags)


def test_groups_that_do_not_tile_the_domain_straddle_it() -> None:
    """Blocks of 64 ranks on 72-GPU domains: the block [64, 128) holds rank 72, so some group lies across two
    domains once the job outgrows one domain; blocks of 8 (72 = 9 × 8) or a job of one block never do."""
    system = load_system("gb200-nvl72")
    place = Placement(system, tp=1, dp=np.array([64, 128, 512, 512]), ep=np.array([64, 64, 8, 64]))
    assert place.straddles_domain("ep").tolist() == [False, True, False, True]
    assert not place.crosses_domains("ep").any()  # priced as aligned: each group's ranks fit one domain
    result = estimate(PRESETS["deepseek-v3"], system, 512, Layout(tp=1, pp=8, dp=64, global_batch=1152, zero=1, ep=64),
                      StepOptions(moe_imbalance=1.0))
    assert any(f.startswith("ep groups of 64 GPUs do not tile the 72-GPU NVLink domains") and "64 GPUs used per domain"
               in f for f in result.flags)


def test_imbalance_stretches_only_the_routed_expert_gemms() -> None:
    """ep/imbalance = (ρ − 1) × the routed experts' share of fc1/fc2, forward + backward (+ recompute): the
    attention core, the logits, the router and the shared experts are not stretched by the busiest rank."""
    from commmodel.step.compute import gemm_efficiency, stage_compute
    from commmodel.step.experts import routed_mlp_share
    from commmodel.step.layout import RECOMPUTE_CODES
    from commmodel.workload.flops import layer_gemms
    from commmodel.workload.stages import stage_layers

    model, system = PRESETS["mixtral-8x7b"], load_system("dgx-h100")
    # Mixtral: every block MoE, no shared experts: the routed share of the MLP GEMMs is 1
    assert routed_mlp_share(model) == pytest.approx(1.0)
    ds = PRESETS["deepseek-v3"]  # 3 dense blocks of 61, 1 shared + 8 routed experts of width 2048
    dense_width = ds.ffn_hidden_size
    routed = 58 * 8 * 2048
    assert routed_mlp_share(ds) == pytest.approx(routed / (routed + 58 * 2048 + 3 * dense_width))
    mb, tp, pp, ep = np.array([1.0]), np.array([2]), np.array([4]), np.array([8])
    fc = [g for g in layer_gemms(model, mb, tp, ep, 1) if g.name in ("fc1", "fc2")]
    by_hand = sum(g.flops / (system.gpu.peak_for("bf16") * gemm_efficiency(system, g, "bf16")) for g in fc)
    layers = stage_layers(model, pp)
    for policy, passes in (("none", 3.0), ("selective", 3.0), ("full", 4.0)):
        comp = stage_compute(model, system, mb, tp, pp, np.array([RECOMPUTE_CODES[policy]]), np.array([True]),
                             True, True, ep, 1)
        assert comp.routed_expert_s[0] == pytest.approx(float(np.ravel(layers * passes * by_hand)[0]), rel=1e-12)
        assert comp.routed_expert_s[0] < comp.matmul_s[0]
    dense = stage_compute(PRESETS["llama3-8b"], system, mb, tp, pp, np.array([0]), np.array([True]), True, True)
    assert float(np.max(dense.routed_expert_s)) == 0.0
    layout = Layout(tp=2, pp=4, dp=8, ep=8, micro_batch=1, global_batch=256, zero=1, sequence_parallel=True)
    options = StepOptions(flash_attention=True, moe_imbalance=1.5)
    result = estimate(model, system, 64, layout, options)
    rho = float(rank_imbalance(model, np.array([8]), 1.5)[0])
    comp = stage_compute(model, system, np.array([1.0]), np.array([2]), np.array([4]), np.array([0]),
                         np.array([True]), True, options.flash_attention_rate, np.array([8]), 1)
    per_step = result.to_json()["breakdown"]["ep/imbalance"]
    assert rho > 1.0
    assert per_step["exposed_s"] == pytest.approx((rho - 1.0) * comp.routed_expert_s[0] * 32, rel=1e-9)


def test_a2a_overlap_leaves_the_warmup_and_cooldown_exposed() -> None:
    """Megatron-Core @d98e8a6 get_pp_rank_microbatches: rank 0 warms up with 2(p − 1) + (v − 1)·p + 1 chunks
    under the EP overlap; without a pipeline the first forward and last backward stand alone."""
    from commmodel.step.experts import a2a_overlap_exposed_share

    share = a2a_overlap_exposed_share(np.array([4, 8, 1, 8]), np.array([6, 4, 1, 4]), np.array([16, 128, 8, 2]))
    assert share[0] == pytest.approx((6 + 20 + 1) / 96)  # Qwen3 MXFP8 on GB200: PP 4, VPP 6, 16 micro-batches
    assert share[1] == pytest.approx((14 + 24 + 1) / 512)  # Qwen3 on H100: PP 8, VPP 4, 128 micro-batches
    assert share[2] == pytest.approx(1 / 8)
    assert share[3] == pytest.approx(1.0)  # every chunk in warmup: nothing pairs


def test_a2a_overlap_exposes_the_share_when_compute_would_hide_it_all() -> None:
    """DeepEP, as the published run (zoo-qwen3-235b-h100-256gpu-ep32-a2a-overlap): each all-to-all is shorter than
    the compute it pairs with (:func:`~commmodel.step.experts.combined_1f1b_exposed_s`); the plain all-to-all's
    dispatches (one copy per expert) outlast the routed experts' pieces and would expose more."""
    from commmodel.step.evaluate import evaluate_layouts
    from commmodel.step.experts import a2a_overlap_exposed_share

    model, system = PRESETS["qwen3-235b-a22b"], load_system("dgx-h100")
    layout = Layout(tp=2, pp=8, vpp=4, dp=16, ep=32, global_batch=2048, zero=1, sequence_parallel=True)
    cols = evaluate_layouts(model, system, 256, LayoutArrays.from_layouts([layout]),
                            StepOptions(moe_a2a_overlap=True, moe_dispatcher="deepep"))
    m = 2048 / 16
    share = a2a_overlap_exposed_share(np.array([8]), np.array([4]), np.array([m]))[0]
    link, exposed = cols["ep/all_to_all/link_s"][0], cols["ep/all_to_all/exposed_s"][0]
    assert exposed >= share * link * (1 - 1e-9) and exposed < 0.2 * link


def test_deepep_legs_overlap_plain_all_to_all_adds() -> None:
    """DeepSeek-V3 §3.2.2: IB and NVLink legs of a DeepEP dispatch fully overlap (max); the plain dispatcher's
    network leg is zero, so its one all-to-all is what it pays."""
    from commmodel.step.experts import hierarchical_dispatch_s

    intra, inter = np.array([2.0, 1.0, 3.0]), np.array([1.0, 4.0, 0.0])
    assert list(hierarchical_dispatch_s(intra, inter, "deepep")) == [2.0, 4.0, 3.0]
    assert list(hierarchical_dispatch_s(intra, inter, "alltoall")) == [3.0, 5.0, 3.0]



def test_routed_only_moe_blocks_have_the_attention_tp_collectives_only() -> None:
    """Megatron-Core @d98e8a6: routed experts run on the expert-TP group (priced with the dispatch); only
    dense blocks and shared experts all-gather / reduce-scatter over the attention TP group."""
    from commmodel.step.comm import tensor_parallel_from_times

    times = {"all_reduce": np.array([0.0]), "reduce_scatter": np.array([1.0]), "all_gather": np.array([1.0])}
    pp, rc = np.array([1]), np.array([0])
    qwen, dsv3, dense = PRESETS["qwen3-235b-a22b"], PRESETS["deepseek-v3"], PRESETS["llama2-7b"]
    assert qwen.tp_mlp_share == 0.0 and dsv3.tp_mlp_share == 1.0 and dense.tp_mlp_share == 1.0
    assert tensor_parallel_from_times(qwen, times, pp, rc).all_gather_s[0] == pytest.approx(2.0 * 94)
    assert tensor_parallel_from_times(dense, times, pp, rc).all_gather_s[0] == pytest.approx(4.0 * 32)
    mixed = PRESETS["llama4-maverick"]  # 24 dense + 24 MoE blocks
    share = 1.0 if mixed.num_shared_experts else mixed.num_dense_layers / mixed.num_layers
    assert mixed.tp_mlp_share == pytest.approx(share)


@pytest.mark.parametrize(("preset", "ep", "dispatcher", "bytes_per_token"), [
    ("mixtral-8x7b", 8, "alltoall", (3 * 2 + 1) * 4096 * 2),      # one local expert: permute 2k, unpermute k + 1
    ("mixtral-8x7b", 4, "alltoall", (7 * 2 + 1) * 4096 * 2),      # two: + sort by local expert and back, 2k each
    ("qwen3-235b-a22b", 32, "alltoall", (7 * 8 + 1) * 4096 * 2),
    ("qwen3-235b-a22b", 32, "deepep", 4 * 8 * 4096 * 2),          # permute after, unpermute before DeepEP's kernels
    ("qwen3-235b-a22b", 32, "hybridep", 4 * 8 * 4096 * 2),        # as DeepEP: the local permute stays (NVIDIA's
    # DeepSeek-V3 GB200 write-up §2.1.1, §2.5: the buffer copy is fused into it, not removed)
    ("deepseek-v3", 64, "deepep", 4 * 8 * 7168 * 2 * 58 / 61),    # 58 of 61 blocks are MoE blocks
])
def test_dispatcher_permutes_move_their_token_copies(preset: str, ep: int, dispatcher: str,
                                                     bytes_per_token: float) -> None:
    """Megatron-LM @d98e8a6 token_dispatcher.py: the HBM bytes each dispatcher's permutations move per local token of
    one block's forward (averaged over the blocks), k copies of h 16-bit elements; tp 2 halves the local tokens."""
    from commmodel.step.experts import permute_bytes

    model = get_model(preset)
    got = permute_bytes(model, np.asarray(1.0), np.asarray(2.0), np.asarray(float(ep)), dispatcher)
    assert float(got) == pytest.approx(model.seq_len / 2 * bytes_per_token)
    assert float(permute_bytes(get_model("llama3-8b"), np.asarray(1.0), np.asarray(1.0), 1, "alltoall")) == 0.0


def test_moe_runs_state_their_dispatcher_overlap_and_imbalance() -> None:
    """One default, stated: every MoE estimate names the dispatcher, the dispatch/combine overlap and the load
    imbalance it assumes; --moe-dispatcher and --moe-a2a-overlap change them (and say so); dense runs carry no line."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    def lines(*args: str) -> list[str]:
        result = CliRunner().invoke(app, ["estimate", "-n", "64", "-s", "dgx-h100", "--global-batch", "512",
                                          "--json", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["assumptions"]

    moe = [a for a in lines("-m", "mixtral-8x7b", "--ep", "8") if a.startswith("mixture of experts: ")]
    assert len(moe) == 1 and "all-to-all token dispatcher" in moe[0] and "not overlapped" in moe[0]
    assert "1.52× the mean load" in moe[0]
    hybrid = lines("-m", "mixtral-8x7b", "--ep", "8", "--moe-dispatcher", "hybridep", "--moe-a2a-overlap")
    assert any(a.startswith("mixture of experts: HybridEP") and "overlapped with the other" in a for a in hybrid)
    assert "override: moe_dispatcher = hybridep (stack megatron-core: alltoall)" in hybrid
    assert not any(a.startswith("mixture of experts") for a in lines("-m", "llama3-8b"))


def test_query_states_the_moe_assumptions_like_estimate() -> None:
    """One default, stated everywhere: query's assumptions carry the same 'mixture of experts:' line as estimate's."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    result = CliRunner().invoke(app, ["query", "mixtral-8x7b on 64 H100", "--json"])
    assert result.exit_code == 0, result.output
    stack_note = next(a for a in json.loads(result.stdout)["assumptions"] if a["field"] == "stack")
    assert "mixture of experts: Megatron-Core's all-to-all token dispatcher" in stack_note["reason"]


def test_a2a_overlap_refuses_what_megatron_refuses() -> None:
    """Megatron-Core's transformer_config.py asserts for --overlap-moe-expert-parallel-comm: ep > 1, vpp set where
    pp > 1, no full recompute; one line each from estimate, and the planner prunes the same structures and never
    ranks full recompute (DualPipe pairs its own chunks: only ep > 1 applies there)."""
    from commmodel.planner.search import plan
    from commmodel.step.layout_rules import A2A_OVERLAP_REASON, check_a2a_overlap
    model, system = PRESETS["mixtral-8x7b"], load_system("dgx-h100")
    bad = {"pp 2 without virtual stages": Layout(tp=1, pp=2, dp=32, ep=4, global_batch=1024, zero=1),
           "full recompute": Layout(tp=1, dp=64, ep=8, global_batch=1024, zero=1, recompute="full"),
           "ep 1 < 2": Layout(tp=1, dp=64, ep=1, global_batch=1024, zero=1)}
    for words, layout in bad.items():
        with pytest.raises(LayoutError, match=words):
            estimate(model, system, 64, layout, StepOptions(moe_a2a_overlap=True))
        estimate(model, system, 64, layout, StepOptions(moe_a2a_overlap=False))  # fine without the overlap
    check_a2a_overlap(Layout(tp=1, pp=2, dp=32, ep=4, global_batch=1024, zero=1), True, "dualpipe")
    result = plan(model, system, 64, global_batch=1024, options=StepOptions(moe_a2a_overlap=True))
    assert result.pruned[A2A_OVERLAP_REASON] > 0
    rows = result.rows(200)
    assert rows and all(r["ep"] >= 2 and r["recompute"] != "full" and (r["pp"] == 1 or r["vpp"] >= 2) for r in rows)


def test_advice_offers_the_flex_dispatcher_and_only_an_overlap_megatron_runs() -> None:
    """MoE audit: with a cross-node EP the DeepEP dispatcher was the best single change (4.55 → 2.67 s) and never
    offered; the overlap was offered for layouts Megatron-Core refuses to overlap (pp > 1 without vpp)."""
    from commmodel.step.stacks import stack_options

    model, system, options = PRESETS["qwen3-30b-a3b"], load_system("dgx-h100"), stack_options("megatron-core")
    result = estimate(model, system, 64, Layout(tp=1, dp=64, ep=16, global_batch=512, zero=1), options)
    changes = {a.change: a for a in result.advice}
    deepep = changes["token dispatcher alltoall → deepep"]
    assert deepep.step_time_s < 0.7 * result.row["step_time_s"]
    piped = estimate(model, system, 64, Layout(tp=1, pp=2, dp=32, ep=16, global_batch=512, zero=1), options)
    assert piped.row["ep/all_to_all/exposed_s"] > 0
    assert "overlap MoE dispatch/combine with compute" not in {a.change for a in piped.advice}


def _two_stream_layer_pairs(attn_s: float, expert_s: float, a2a_s: float, layers: int) -> float:
    """Oracle: Megatron-Core's combined 1F1B layer loop run on two FIFO streams, in its program order
    (model_chunk_schedule_plan.py @d98e8a6 TransformerLayerSchedulePlan.run: combine_bwd, attn_fwd, mlp_bwd,
    dispatch_fwd, mlp_bwd_dw, dispatch_bwd, mlp_fwd, combine_fwd, attn_bwd, attn_bwd_dw), each node after its own
    micro-batch's previous node (utils.py ScheduleNode.stream_acquire_context; the *_dw pieces wait on none)."""
    stream_free = {"comp": 0.0, "comm": 0.0}
    chain = {"f": 0.0, "b": 0.0}
    order = [("b", "comm", a2a_s, True), ("f", "comp", attn_s, True), ("b", "comp", expert_s, True),
             ("f", "comm", a2a_s, True), ("b", "comp", expert_s, False), ("b", "comm", a2a_s, True),
             ("f", "comp", expert_s, True), ("f", "comm", a2a_s, True), ("b", "comp", attn_s, True),
             ("b", "comp", attn_s, False)]
    for _ in range(layers):
        for mb, stream, dur, evented in order:
            start = max(stream_free[stream], chain[mb] if evented else 0.0)
            stream_free[stream] = start + dur
            if evented:
                chain[mb] = start + dur
    return max(stream_free.values())


@pytest.mark.parametrize("attn_s, expert_s, a2a_s", [(3.0, 0.5, 1.0), (1.6, 0.95, 1.12), (0.4, 0.3, 1.0),
                                                     (1.0, 1.0, 1.6), (2.0, 2.0, 0.5)])
def test_combined_1f1b_pairs_combines_with_attention_and_dispatches_with_experts(attn_s, expert_s, a2a_s) -> None:
    """The closed form of the EP overlap's steady phase against a two-stream replay of Megatron-Core's layer loop:
    exposed = max(0, link/2 − attention side) + max(0, link/2 − expert side), per layer pair link = 4 all-to-alls,
    each side 3 pieces (forward, input gradient, weight gradient)."""
    from commmodel.step.experts import combined_1f1b_exposed_s

    layers = 40
    total = _two_stream_layer_pairs(attn_s, expert_s, a2a_s, layers)
    exposed = float(combined_1f1b_exposed_s(np.array([4 * a2a_s]), np.array([3 * attn_s]), np.array([3 * expert_s]))[0])
    per_pair = exposed + 3 * (attn_s + expert_s)
    assert total / layers == pytest.approx(per_pair, rel=0.05)  # the loop's first and last layer pair aside
    # (3.0, 0.5, 1.0): the whole micro-batch's compute (10.5) exceeds its four all-to-alls (4), yet the dispatches
    # only pair with the experts' 1.5: 0.5 per layer pair stays exposed
    if (attn_s, expert_s, a2a_s) == (3.0, 0.5, 1.0):
        assert exposed == pytest.approx(0.5)


def test_a2a_overlap_exposes_dispatches_the_experts_cannot_hide() -> None:
    """Qwen3-235B, TP 1, EP 64 over 8 DGX H100 nodes: the micro-batch's matmuls exceed its dispatch and combine
    (the old rule hid all of the steady phase), but the dispatches pair with the routed experts only."""
    from commmodel.hardware.cluster import Cluster
    from commmodel.step.evaluate import _context, evaluate_layouts
    from commmodel.step.experts import a2a_overlap_exposed_share, combined_1f1b_exposed_s
    from commmodel.step.terms import compute_first

    model, system = PRESETS["qwen3-235b-a22b"], load_system("dgx-h100")
    layout = Layout(tp=1, pp=4, vpp=4, dp=64, ep=64, global_batch=2048, zero=1)
    options = StepOptions(moe_a2a_overlap=True, moe_dispatcher="deepep")
    arrays = LayoutArrays.from_layouts([layout])
    cols = evaluate_layouts(model, system, 256, arrays, options)
    link, exposed = cols["ep/all_to_all/link_s"][0], cols["ep/all_to_all/exposed_s"][0]
    m = 2048 / 64
    comp = compute_first(_context(model, Cluster.node_for_gpus(system, 256), arrays, options))
    link_mb = link / m
    assert link_mb < comp.matmul_s[0]  # the aggregate rule max(link − matmul, 0) leaves nothing exposed
    share = a2a_overlap_exposed_share(np.array([4]), np.array([4]), np.array([m]))[0]
    steady = combined_1f1b_exposed_s(np.array([link_mb]), comp.total_s - comp.routed_expert_s, comp.routed_expert_s)[0]
    assert steady > 0.1 * link_mb
    assert exposed == pytest.approx(m * (share * link_mb + (1 - share) * steady), rel=1e-9)
