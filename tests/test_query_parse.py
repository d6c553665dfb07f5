"""The query parser: 40+ phrasings with their expected parses, unreadable parts, and garbage that must
only ever raise a clean QueryError (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.errors import CommModelError, QueryError
from commmodel.query.parse import parse_query

SYSTEMS = ("dgx-a100", "dgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72", "gb300-nvl72", "aws-p4d", "aws-p4de", "aws-p5", "gcp-a3-mega",
           "azure-nd-a100-v4")


def _summary(parsed) -> dict:
    """A flat view of a parse that the table below can state compactly."""
    out = {k: v for k, v in parsed.to_json().items() if k not in ("gpus", "networks", "systems", "model", "notes")}
    if parsed.gpus:
        out["gpu"] = [g.family + (f"-{g.memory_gb}gb" if g.memory_gb else "") + (f"-{g.form}" if g.form else "")
                      for g in parsed.gpus]
    if parsed.networks:
        out["net"] = [n.link or f"{n.family}?" + (f"{n.rate_gbps:g}" if n.rate_gbps else "") for n in parsed.networks]
        nics = [n.nics_per_node for n in parsed.networks if n.nics_per_node]
        if nics:
            out["nics"] = nics
    if parsed.systems:
        out["sys"] = [s.name for s in parsed.systems]
    if parsed.model:
        out["model"] = parsed.model.preset_key or parsed.model.num_params
    return out


PHRASINGS = [
    # the five phrasings of the issue
    ("8 GPUs, 1B params, IB NDR", {"num_gpus": 8, "model": 1e9, "net": ["ib-ndr"]}),
    ("64 H100 over 400GbE, llama3-70b, batch 1024",
     {"num_gpus": 64, "gpu": ["h100"], "net": ["eth-400g"], "model": "llama3-70b", "global_batch": 1024}),
    ("all-reduce 1GB on 16 A100 across 2 nodes with HDR",
     {"collective": "all_reduce", "size_bytes": 1e9, "num_gpus": 16, "gpu": ["a100"], "num_nodes": 2, "net": ["ib-hdr"]}),
    ("GPT-3 175B on 1024 A100s", {"model": "gpt3-175b", "num_gpus": 1024, "gpu": ["a100"]}),
    ("what if I switch from 100GbE to NDR", {"what_if": True, "net": ["eth-100g", "ib-ndr"]}),
    # any order, any case
    ("ib ndr, 1b PARAMS, 8 gpus", {"num_gpus": 8, "model": 1e9, "net": ["ib-ndr"]}),
    ("LLAMA3-70B BATCH 1024 400GBE 64 H100",
     {"num_gpus": 64, "gpu": ["h100"], "net": ["eth-400g"], "model": "llama3-70b", "global_batch": 1024}),
    ("with HDR across 2 nodes: 16 A100, all reduce of 1 GB",
     {"collective": "all_reduce", "size_bytes": 1e9, "num_gpus": 16, "gpu": ["a100"], "num_nodes": 2, "net": ["ib-hdr"]}),
    ("1024 A100s GPT3 175B", {"model": "gpt3-175b", "num_gpus": 1024, "gpu": ["a100"]}),
    # GPU counts and types
    ("8x H100, llama3-8b", {"num_gpus": 8, "gpu": ["h100"], "model": "llama3-8b"}),
    ("H100 PCIe x8, 1B", {"num_gpus": 8, "gpu": ["h100-pcie"], "model": 1e9}),
    ("16 A100 40GB with HDR, 6.7B params", {"num_gpus": 16, "gpu": ["a100-40gb"], "net": ["ib-hdr"], "model": 6.7e9}),
    ("GPT-3 175B on 1,024 A100 80GB GPUs, batch size 1536",
     {"model": "gpt3-175b", "num_gpus": 1024, "gpu": ["a100-80gb"], "global_batch": 1536}),
    ("all-gather 1 GiB across 4 nodes of 8 H200",
     {"collective": "all_gather", "size_bytes": 2**30, "num_nodes": 4, "gpus_per_node": 8, "gpu": ["h200"]}),
    ("7B model on 2 nodes with 8 GPUs per node over 100 Gb Ethernet",
     {"model": 7e9, "num_nodes": 2, "gpus_per_node": 8, "net": ["eth-100g"]}),
    ("1B params on a single node of 8 A100", {"model": 1e9, "num_nodes": 1, "num_gpus": 8, "gpu": ["a100"]}),
    ("8 RTX 4090, 1B params, micro batch 4", {"num_gpus": 8, "gpu": ["rtx-4090"], "model": 1e9, "micro_batch": 4}),
    ("2 RTX 2080 Ti over PCIe without P2P, 350M params",
     {"num_gpus": 2, "gpu": ["rtx-2080ti"], "scale_up": "pcie_host", "model": 3.5e8}),
    ("1.3B params, 16 V100, 100GbE, fp16",
     {"model": 1.3e9, "num_gpus": 16, "gpu": ["v100"], "net": ["eth-100g"], "dtype": "fp16"}),
    ("64 GH200 on Slingshot-11", {"num_gpus": 64, "gpu": ["gh200"], "net": ["slingshot-11"]}),
    # systems by name
    ("72 GB200 NVL72, llama3-405b", {"num_gpus": 72, "sys": ["gb200-nvl72"], "model": "llama3-405b"}),
    ("gpt3-175b on 4 p4d instances", {"num_nodes": 4, "sys": ["aws-p4d"], "model": "gpt3-175b"}),
    ("4 DGX H100, 7B", {"num_nodes": 4, "sys": ["dgx-h100"], "model": 7e9}),
    ("llama2-7b on 2 DGX H100 nodes with full recompute and sequence parallelism",
     {"num_nodes": 2, "sys": ["dgx-h100"], "model": "llama2-7b", "recompute": "full", "sequence_parallel": True}),
    ("dgx-a100 vs dgx-h100 for GPT-3 175B on 1024 GPUs",
     {"what_if": True, "sys": ["dgx-a100", "dgx-h100"], "model": "gpt3-175b", "num_gpus": 1024}),
    # NVIDIA's server words: DGX and HGX name the same board where only one profile is shipped, bare ones are nodes
    ("llama3-8b on 8 GPUs of DGX B200", {"num_gpus": 8, "sys": ["hgx-b200"], "model": "llama3-8b"}),
    ("DGX H100 vs DGX B200 for llama3-8b on 64 GPUs",
     {"what_if": True, "sys": ["dgx-h100", "hgx-b200"], "model": "llama3-8b", "num_gpus": 64}),
    ("llama3-8b on 16 HGX H100", {"num_nodes": 16, "sys": ["dgx-h100"], "model": "llama3-8b"}),
    ("7B on 2 hgx-a100 nodes", {"num_nodes": 2, "sys": ["dgx-a100"], "model": 7e9}),
    ("llama3-8b on 4 DGX nodes of H100", {"num_nodes": 4, "gpu": ["h100"], "model": "llama3-8b"}),
    ("llama3-8b on 4 DGXs of 8 H200", {"num_nodes": 4, "gpus_per_node": 8, "gpu": ["h200"],
                                        "model": "llama3-8b"}),
    ("1B params on a DGX with 8 A100", {"model": 1e9, "num_gpus": 8, "gpu": ["a100"]}),
    # how people ask: contractions, fine-tuning, AWS instance types, checkpointing words, latency
    ("what's the best layout for llama3-405b on 16384 H100",
     {"model": "llama3-405b", "num_gpus": 16384, "gpu": ["h100"]}),
    ("fine-tune llama2-13b on 4 A100 40GB", {"model": "llama2-13b", "num_gpus": 4, "gpu": ["a100-40gb"]}),
    ("llama3-8b on a p5.48xlarge", {"sys": ["aws-p5"], "model": "llama3-8b"}),
    ("gpt3-175b on 4 p4d.24xlarge instances", {"num_nodes": 4, "sys": ["aws-p4d"], "model": "gpt3-175b"}),
    ("llama3-8b on 8 GPUs with activation checkpointing", {"model": "llama3-8b", "num_gpus": 8, "recompute": "full"}),
    ("7B on 8 GPUs, gradient checkpointing", {"model": 7e9, "num_gpus": 8, "recompute": "full"}),
    ("7B on 8 GPUs, selective activation checkpointing", {"model": 7e9, "num_gpus": 8, "recompute": "selective"}),
    ("all-reduce 4KB latency on 1024 H100", {"collective": "all_reduce", "size_bytes": 4000, "num_gpus": 1024,
                                             "gpu": ["h100"]}),
    ("llama3-70b across 4 racks of GB200 NVL72", {"num_gpus": 288, "sys": ["gb200-nvl72"], "model": "llama3-70b"}),
    ("llama3-405b on 4 GB300 NVL72 racks", {"num_gpus": 288, "sys": ["gb300-nvl72"], "model": "llama3-405b"}),
    ("all-reduce of 7B fp32 gradients on 64 A100", {"collective": "all_reduce", "model": 7e9, "dtype": "fp32",
                                                    "num_gpus": 64, "gpu": ["a100"]}),
    ("what if we double the NICs for llama3-70b on 512 H100",
     {"what_if": True, "net": ["2x NICs?"], "model": "llama3-70b", "num_gpus": 512, "gpu": ["h100"]}),
    ("ring allreduce of 1GB on 16 A100", {"collective": "all_reduce", "algorithm": "ring", "size_bytes": 1e9,
                                          "num_gpus": 16, "gpu": ["a100"]}),
    ("NVLS tree all-reduce 1 GiB on 16 H100", {"collective": "all_reduce", "algorithm": "nvls_tree",
                                               "size_bytes": 2**30, "num_gpus": 16, "gpu": ["h100"]}),
    ("how long to train llama3-8b on 1T tokens with 64 H100",
     {"model": "llama3-8b", "train_tokens": 1e12, "num_gpus": 64, "gpu": ["h100"]}),
    ("llama3-70b on 512 H100, batch of 4M tokens, 15 trillion tokens",
     {"model": "llama3-70b", "batch_tokens": 4e6, "train_tokens": 1.5e13, "num_gpus": 512, "gpu": ["h100"]}),
    ("which layout for gpt3-175b on 1024 A100 with 8 HDR NICs per node",
     {"model": "gpt3-175b", "num_gpus": 1024, "gpu": ["a100"], "net": ["ib-hdr"], "nics_per_node": 8}),
    ("what is the MFU of llama3-70b on 512 H100", {"model": "llama3-70b", "num_gpus": 512, "gpu": ["h100"]}),
    ("llama3-8b on 8 RTX 4090 without NVLink", {"model": "llama3-8b", "num_gpus": 8, "gpu": ["rtx-4090"],
                                                "scale_up": "pcie"}),
    ("gpt3-175b with 3d parallelism on 1024 A100", {"model": "gpt3-175b", "num_gpus": 1024, "gpu": ["a100"]}),
    ("is 100GbE enough for llama3-8b on 64 H100?", {"model": "llama3-8b", "num_gpus": 64, "gpu": ["h100"],
                                                    "net": ["eth-100g"]}),
    ("llama3-8b on 2 H100 nodes", {"model": "llama3-8b", "num_nodes": 2, "gpu": ["h100"]}),  # was read as 2 GPUs
    ("how many H100s do I need for llama3-70b", {"how_many": True, "model": "llama3-70b", "gpu": ["h100"]}),
    ("all-reduce 1GB on four A100 servers", {"collective": "all_reduce", "size_bytes": 1e9, "num_nodes": 4,
                                             "gpu": ["a100"]}),
    ("llama3-70b with TP8 PP4 DP8 on H100", {"model": "llama3-70b", "tp": 8, "pp": 4, "dp": 8, "gpu": ["h100"]}),
    ("llama-3.1-8b-instruct on 8 H100", {"model": "llama3-8b", "num_gpus": 8, "gpu": ["h100"]}),
    ("allgather of 1 GiB among 16 H100 GPUs", {"collective": "all_gather", "size_bytes": 2**30, "num_gpus": 16,
                                               "gpu": ["h100"]}),
    ("bcast 1GB from rank 0 to 64 GPUs", {"collective": "broadcast", "size_bytes": 1e9, "num_gpus": 64}),
    ("p2p send of 256MB between two H100 nodes over IB",
     {"collective": "send_recv", "size_bytes": 2.56e8, "num_nodes": 2, "gpu": ["h100"], "net": ["infiniband?"]}),
    ("llama3-70b on 64 H100 with megatron", {"model": "llama3-70b", "num_gpus": 64, "gpu": ["h100"],
                                             "stack": "megatron-core"}),
    ("megatron turing nlg 530b on 2240 A100", {"model": "mt-nlg-530b", "num_gpus": 2240, "gpu": ["a100"]}),
    ("llama3-8b on 8 H100 with flash attention", {"model": "llama3-8b", "num_gpus": 8, "gpu": ["h100"],
                                                  "flash_attention": True}),
    ("gpt3-175b on 1024 A100, megatron-lm-2021, unfused attention",
     {"model": "gpt3-175b", "num_gpus": 1024, "gpu": ["a100"], "stack": "megatron-lm-2021", "flash_attention": False}),
    # networks
    ("train Llama 2 70B on 256 H100s with 8x NDR, global batch 1024, seq len 4096",
     {"model": "llama2-70b", "num_gpus": 256, "gpu": ["h100"], "net": ["ib-ndr"], "nics": [8], "global_batch": 1024,
      "seq_len": 4096}),
    ("reduce-scatter 512MB on 32 B200 with 8x 400G RoCE",
     {"collective": "reduce_scatter", "size_bytes": 512e6, "num_gpus": 32, "gpu": ["b200"], "net": ["roce-400g"],
      "nics": [8]}),
    ("a 13B model, 32 GPUs, EFA", {"model": 13e9, "num_gpus": 32, "net": ["efa?"]}),
    ("Mixtral 8x7B on 64 H100 with EFA v2", {"model": "mixtral-8x7b", "num_gpus": 64, "gpu": ["h100"], "net": ["efa-v2"]}),
    ("7B on 16 H100 over 100G, no sequence parallel",
     {"model": 7e9, "num_gpus": 16, "gpu": ["h100"], "net": ["rate?100"], "sequence_parallel": False}),
    ("16 A100 with 200 Gbps infiniband", {"num_gpus": 16, "gpu": ["a100"], "net": ["ib-hdr"]}),
    ("16 H100 with 8x 400 Gb/s RoCE", {"num_gpus": 16, "gpu": ["h100"], "net": ["roce-400g"], "nics": [8]}),
    ("32 H100 over ethernet with 1 NIC per node", {"num_gpus": 32, "gpu": ["h100"], "net": ["ethernet?"],
                                                   "nics_per_node": 1}),
    ("8 A100 on gcp a3 mega", {"num_gpus": 8, "gpu": ["a100"], "sys": ["gcp-a3-mega"]}),
    ("compare HDR vs NDR for llama3-70b on 512 H100",
     {"what_if": True, "net": ["ib-hdr", "ib-ndr"], "model": "llama3-70b", "num_gpus": 512, "gpu": ["h100"]}),
    ("what does moving from 100 GbE to InfiniBand NDR buy me for a 7B model on 64 GPUs",
     {"what_if": True, "net": ["eth-100g", "ib-ndr"], "model": 7e9, "num_gpus": 64}),
    ("what if we use H100 instead of A100 for gpt3-13b on 64 GPUs",
     {"what_if": True, "gpu": ["h100", "a100"], "model": "gpt3-13b", "num_gpus": 64}),
    # collectives and sizes
    ("how long does an allreduce of 256 MiB take on 64 H100 over 400GbE",
     {"collective": "all_reduce", "size_bytes": 256 * 2**20, "num_gpus": 64, "gpu": ["h100"], "net": ["eth-400g"]}),
    ("broadcast 4 KiB on 8 A100", {"collective": "broadcast", "size_bytes": 4096, "num_gpus": 8, "gpu": ["a100"]}),
    ("all to all 64MB on 16 GPUs, 2 nodes, slingshot",
     {"collective": "all_to_all", "size_bytes": 64e6, "num_gpus": 16, "num_nodes": 2, "net": ["slingshot-11"]}),
    ("p2p 1GB between 2 GPUs over NVLink", {"collective": "send_recv", "size_bytes": 1e9, "num_gpus": 2, "scale_up": "nvlink"}),
    ("send/recv 128 MiB over ib hdr on 2 nodes",
     {"collective": "send_recv", "size_bytes": 128 * 2**20, "num_nodes": 2, "net": ["ib-hdr"]}),
    ("barrier on 1024 GPUs with NDR", {"collective": "barrier", "num_gpus": 1024, "net": ["ib-ndr"]}),
    ("all-reduce 1Gb on 8 H100", {"collective": "all_reduce", "size_bytes": 1.25e8, "num_gpus": 8, "gpu": ["h100"]}),
    ("all-reduce 1gb on 8 h100", {"collective": "all_reduce", "size_bytes": 1e9, "num_gpus": 8, "gpu": ["h100"]}),
    ("alltoall 8192 bytes on 8 H100", {"collective": "all_to_all", "size_bytes": 8192, "num_gpus": 8, "gpu": ["h100"]}),
    # training knobs
    ("llama-3-405b on 16384 H100 with NDR, batch of 16M tokens, seq len 8k",
     {"model": "llama3-405b", "num_gpus": 16384, "gpu": ["h100"], "net": ["ib-ndr"], "batch_tokens": 16e6, "seq_len": 8192}),
    ("gpt3 175b on 1024 a100 tp 8 pp 16 zero 1",
     {"model": "gpt3-175b", "num_gpus": 1024, "gpu": ["a100"], "tp": 8, "pp": 16, "zero": 1}),
    ("1T params on 3072 A100s", {"model": 1e12, "num_gpus": 3072, "gpu": ["a100"]}),
    ("bloom on 384 A100s, batch 2048, seq 2048",
     {"model": "bloom-176b", "num_gpus": 384, "gpu": ["a100"], "global_batch": 2048, "seq_len": 2048}),
    ("7e9 params on 32 GPUs with ZeRO-3 and bf16", {"model": 7e9, "num_gpus": 32, "zero": 3, "dtype": "bf16"}),
    ("llama3-8b on 8 H100 with fp8", {"model": "llama3-8b", "num_gpus": 8, "gpu": ["h100"], "dtype": "fp8"}),
    ("llama3-8b on 8 H100 in fp8-blockwise",
     {"model": "llama3-8b", "num_gpus": 8, "gpu": ["h100"], "dtype": "fp8-blockwise"}),
    ("llama3-8b on 8 H100 with blockwise FP8",
     {"model": "llama3-8b", "num_gpus": 8, "gpu": ["h100"], "dtype": "fp8-blockwise"}),
    ("train a 70B model on 128 H100 with 4k context and global batch size of 512",
     {"model": 7e10, "num_gpus": 128, "gpu": ["h100"], "seq_len": 4096, "global_batch": 512}),
]


@pytest.mark.parametrize("text,expected", PHRASINGS, ids=[p[0][:40] for p in PHRASINGS])
def test_phrasing(text, expected):
    assert _summary(parse_query(text, SYSTEMS)) == expected


def test_there_are_at_least_40_phrasings():
    assert len(PHRASINGS) >= 40


def test_bits_and_bytes_are_noted():
    assert any("bits" in note for note in parse_query("all-reduce 1Gb on 8 H100").notes)
    assert any("bytes" in note for note in parse_query("all-reduce 1gb on 8 h100").notes)


def test_instead_of_marks_the_baseline():
    parsed = parse_query("what if we use H100 instead of A100")
    assert parsed.baseline_after_instead_of is not None
    assert parsed.gpus[1].position > parsed.baseline_after_instead_of


@pytest.mark.parametrize("text,unread", [
    ("8 GPUs, 1B params, quantum fabric", ["quantum"]),
    ("train blorp on 8 H100", ["blorp"]),
    ("all-reduce 1GB on 8 GPUs with flux capacitor", ["flux", "capacitor"]),
])
def test_unreadable_parts_are_named_with_examples(text, unread):
    with pytest.raises(QueryError) as info:
        parse_query(text)
    message = str(info.value)
    for word in unread:
        assert repr(word) in message
    assert "understood:" in message and "8 GPUs, 1B params, IB NDR" in message
    assert "\n" not in message


@pytest.mark.parametrize("text,fragment", [
    ("", "empty"),
    ("   ", "empty"),
    ("8 GPUs and 16 GPUs, 1B", "2 different GPU counts"),
    ("all-reduce 1GB and broadcast 2GB on 8 GPUs", "different collectives"),
    ("1B on 8 GPUs over 37GbE", "37 Gb/s is not in the link catalogue"),
    ("0 GPUs, 1B", "between 1 and"),
    ("99999999999 GPUs, 1B", "between 1 and"),
])
def test_inconsistent_queries_are_clean_errors(text, fragment):
    with pytest.raises(QueryError, match=fragment):
        parse_query(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_garbage_only_raises_clean_errors(text):
    try:
        parse_query(text, SYSTEMS)
    except CommModelError:
        pass  # a clean, typed error is fine; anything else propagates and fails the test


WORDS = st.sampled_from(["8", "GPUs", "1B", "params", "H100", "A100s", "over", "400GbE", "NDR", "HDR", "all-reduce",
                         "1GB", "batch", "1024", "seq", "len", "x", "nodes", "2", "of", "what", "if", "vs", "llama3-70b",
                         "gpt-3", "175B", "tp", "pp", "zero", ",", "per", "node", "k", "MiB", "Gb", "efa", "roce",
                         "dgx-h100", "NVL72", "pcie", "without", "p2p", "💥", "1e9", "-", "/", "8x"])


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS, max_size=12).map(" ".join))
def test_word_salad_only_raises_clean_errors(text):
    try:
        parsed = parse_query(text, SYSTEMS)
    except CommModelError:
        return
    parsed.to_json()  # a successful parse always serialises


@pytest.mark.parametrize("text, library", [
    ("all-reduce 1GB on 16 A100 with gloo", "gloo"), ("llama3-70b on 64 H100 over MPI", "mpi"),
    ("all-reduce 1MB on 8 GPUs using RCCL", "rccl"), ("all-reduce 1MB on 4 GPUs over Open MPI", "mpi"),
    ("all-gather 4MB on 8 GPUs with MPICH", "mpich"), ("all-reduce 1GB on 16 A100 with NCCL", "nccl"),
    ("all-reduce 1GB on 16 A100", None),
])
def test_library_words(text, library):
    parsed = parse_query(text)
    assert parsed.library == library
    assert ("library" in parsed.to_json()) == (library is not None)


def test_two_libraries_without_a_what_if_is_an_error_naming_the_comparison():
    with pytest.raises(QueryError, match=r"2 communication libraries \(gloo, mpi\); give one, or compare them: "
                                         r"'gloo vs mpi'"):
        parse_query("all-reduce 1GB on 16 A100 with gloo over MPI")


@pytest.mark.parametrize(("text", "libraries"), [
    ("gloo vs nccl for DDP on 8 GPUs, 1B params", ("gloo", "nccl")),       # the first said is the baseline
    ("DDP over gloo instead of nccl, 8 GPUs, 1B params", ("nccl", "gloo")),  # "instead of" names the baseline
    ("all-reduce 1GB on 8 H100, gloo vs mpi vs nccl", ("gloo", "mpi", "nccl")),
])
def test_library_what_if_keeps_every_library_in_comparison_order(text, libraries):
    parsed = parse_query(text)
    assert (parsed.libraries, parsed.library, parsed.what_if) == (libraries, None, True)


@pytest.mark.parametrize(("text", "preset"), [
    ("gpt-oss-120b on 128 H100", "gpt-oss-120b"), ("gpt oss on 64 H100", "gpt-oss-120b"),
    ("Qwen3-235B-A22B on 256 H100", "qwen3-235b-a22b"), ("qwen3 235b a22b on 256 H100", "qwen3-235b-a22b"),
    ("DeepSeek-V3 on 1024 H800", "deepseek-v3"), ("deepseek v3 on 2048 H800", "deepseek-v3"),
    ("llama4-maverick on 256 H100", "llama4-maverick"), ("narayanan-18.4b on 256 A100", "narayanan-18.4b"),
])
def test_presets_a_family_and_size_cannot_spell_are_read_whole(text: str, preset: str) -> None:
    """Issue 13's presets by their own names ("could not read 'oss'" before): the query names the preset itself,
    separators as written or as spaces; names a family word and a size already read ("llama3-70b") stay theirs."""
    from commmodel.workload.presets import get_model

    mention = parse_query(text).model
    assert get_model(mention.preset_key).name == preset
    assert parse_query("llama3-70b on 64 H100").model.family == "llama3"


@pytest.mark.parametrize(("text", "cp", "ep"), [
    ("llama3-8b on 64 H100, seq 131072, cp 8", 8, None),
    ("gpt-oss-120b on 64 H200, tp 8, ep 16", None, 16),
    ("deepseek-v3 on 1024 H100, expert parallel 64, context parallelism 2", 2, 64),
    ("qwen3-235b-a22b on 256 H100, ep=32", None, 32),
])
def test_query_reads_context_and_expert_parallel_degrees(text, cp, ep):
    """cp and ep are read as tp and pp are, and pin the planner (answer._space)."""
    parsed = parse_query(text, SYSTEMS)
    assert (parsed.cp, parsed.ep) == (cp, ep)


def test_query_cp_inside_a_word_is_no_degree():
    """'tcp 2 nodes': 'cp' followed by a number inside the word 'tcp' is the network and a node count, not CP 2."""
    parsed = parse_query("llama3-8b on 16 GPUs over tcp 2 nodes", SYSTEMS)
    assert parsed.cp is None and parsed.num_nodes == 2


@pytest.mark.parametrize("text", ["all-reduce 4 KB on 64 ranks over IB NDR",
                                  "all-reduce 4 KB on 64 processes with gloo"])
def test_query_counts_ranks_and_processes_as_gpus(text):
    assert parse_query(text, SYSTEMS).num_gpus == 64


@pytest.mark.parametrize(("text", "gpu"), [("llama-2-7b on 8 A10G", "a10g"), ("7B on 4 L4", "l4"),
                                           ("7B on 8 MI250X", "mi250x"), ("all-reduce 1GB on 8 H20", "h20")])
def test_a_gpu_the_catalogue_lacks_is_named_as_such(text, gpu):
    """Said as a GPU, not a typo: the error names it and the GPUs the query knows (before: "could not read '8',
    'a10g'", and "8 MI250X" read "8 m" as a model of 8 million parameters: bounded() left alternations ungrouped)."""
    with pytest.raises(QueryError, match=rf"GPU '{gpu}' is not in the catalogue .* the query knows GB300, .*H100"):
        parse_query(text)


def test_an_algorithm_word_needs_a_collective():
    with pytest.raises(QueryError, match="'ring' names a collective algorithm; ask about a collective"):
        parse_query("ring attention llama3-8b on 8 H100")
