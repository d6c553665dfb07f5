"""Words the query parser knows: GPU names, networks, collectives, model families, filler words.

Plain tables, kept apart from the parsing mechanics so that adding a GPU or a fabric is one line.
Every pattern is matched case-insensitively against a lower-cased copy of the query.
"""

from __future__ import annotations

# Lower-case alternatives -> canonical GPU family (resolved to a catalogue entry by the answer step).
GPU_FAMILIES: dict[str, str] = {
    r"gb300": "gb300",
    r"b300": "b300",
    r"gb200": "gb200",
    r"gh200": "gh200",
    r"b200": "b200",
    r"h200": "h200",
    r"h100": "h100",
    r"h800": "h800",
    r"a100": "a100",
    r"v100": "v100",
    r"(?:rtx[ -]?)?2080[ -]?ti": "rtx-2080ti",
    r"(?:rtx[ -]?)?4090": "rtx-4090",
    r"l40s": "l40s",
    r"(?:amd[ -]?)?(?:instinct[ -]?)?mi300x?": "mi300x",
    r"(?:amd[ -]?)?(?:instinct[ -]?)?mi325x?": "mi325x",
    r"(?:amd[ -]?)?(?:instinct[ -]?)?mi355x?": "mi355x",
}

# Ethernet speeds in the link catalogue (Gb/s).
ETHERNET_SPEEDS_GBPS = (10, 25, 100, 200, 400, 800)
ROCE_SPEEDS_GBPS = (100, 200, 400)
# InfiniBand generation -> catalogue link, and its per-port rate in Gb/s (IBTA roadmap).
IB_GENERATIONS: dict[str, tuple[str, int]] = {
    "edr": ("ib-edr", 100), "hdr": ("ib-hdr", 200), "ndr": ("ib-ndr", 400), "xdr": ("ib-xdr", 800),
}

# Network phrases without a speed -> (family, catalogue link or None when the speed must be assumed).
NETWORK_WORDS: dict[str, tuple[str, str | None]] = {
    r"efa[ -]?v?1": ("efa", "efa-v1"),
    r"efa[ -]?v?2": ("efa", "efa-v2"),
    r"efa[ -]?v?3": ("efa", "efa-v3"),
    r"efa[ -]?v?4": ("efa", "efa-v4"),
    r"(?:elastic fabric adapter|efa)": ("efa", None),
    r"(?:gpudirect[ -])?tcpxo": ("tcpxo", "tcpxo"),
    r"(?:gpudirect[ -])?tcpx": ("tcpx", "tcpx"),
    r"slingshot(?:[ -]?11)?": ("slingshot", "slingshot-11"),
    r"omni[ -]?path(?:[ -]?100(?:g|gb|gbps)?)?|\bopa\b": ("omnipath", "omnipath-100g"),
    r"infiniband|\bib\b": ("infiniband", None),
    r"roce(?:[ -]?v2)?": ("roce", None),
    r"ethernet|\beth\b|\btcp\b": ("ethernet", None),
}

# Cloud provider words -> the prefix of the shipped system names of that provider.
PROVIDERS: dict[str, str] = {
    r"azure|microsoft azure": "azure",
    r"aws|amazon(?: web services)?|ec2": "aws",
    r"gcp|google cloud(?: platform)?|google": "gcp",
    r"oci|oracle(?: cloud)?": "oci",
}

SCALE_UP_WORDS: dict[str, str] = {
    r"(?:no|without)[ -](?:p2p|peer[ -]to[ -]peer)": "pcie_host",
    r"(?:no|without)[ -]nvlink": "pcie",  # the GPUs talk over PCIe (before the bare "nvlink")
    r"nvlink|nvswitch|nvl(?:36|72)?": "nvlink",
    r"pci[ -]?e(?:[ -]?(?:gen)?[ -]?[3-6])?": "pcie",
}

# Collective phrases -> nccl-tests names. Longer phrases come first so "all-reduce" wins over "reduce".
COLLECTIVES: dict[str, str] = {
    r"all[ _-]?reduces?|allreduces?": "all_reduce",
    r"all[ _-]?gathers?|allgathers?": "all_gather",
    r"reduce[ _-]?scatters?|reducescatters?": "reduce_scatter",
    r"all[ _-]?to[ _-]?alls?|alltoalls?|a2a": "all_to_all",
    r"send[ _/-]?recv|send[ _/-]?receive|point[ -]to[ -]point|\bp2p\b": "send_recv",
    r"sends?|receives?|recv": "send_recv",  # alone ("p2p send of 256MB"), after the pairs above
    r"broadcasts?|bcast": "broadcast",
    r"barriers?": "barrier",
    r"reduces?": "reduce",
    r"gathers?": "gather",
    r"scatters?": "scatter",
}

# Model family phrases -> normalised family prefix used to build preset keys ("llama3" + "70b"). A version
# digit must not run into a size: "llama 30b" is Llama at 30B, not Llama 3 at "0b".
MODEL_FAMILIES: dict[str, str] = {
    r"gpt[ -]?neo[ -]?x": "gpt-neox",
    r"gpt[ -]?j": "gpt-j",
    r"gpt[ -]?3(?![\d.])(?![kmbt](?![a-z]))": "gpt3",
    r"gpt[ -]?2(?![\d.])(?![kmbt](?![a-z]))": "gpt2",
    r"gpt": "gpt",
    r"llama[ -]?3(?:\.[0-9])?(?![\d.])(?![kmbt](?![a-z]))": "llama3",
    r"llama[ -]?2(?![\d.])(?![kmbt](?![a-z]))": "llama2",
    r"llama": "llama",
    r"bloom": "bloom",
    r"mt[ -]?nlg|megatron[ -]turing(?:[ -]nlg)?": "mt-nlg",
    r"opt": "opt",
    r"falcon": "falcon",
    r"mistral": "mistral",
    r"mixtral": "mixtral",
    r"palm": "palm",
    r"chinchilla": "chinchilla",
    r"gopher": "gopher",
    r"qwen[ -]?[0-9.]*": "qwen",
    r"deep[ -]?seek": "deepseek",
    r"gemma[ -]?[0-9]?": "gemma",
    r"moe|mixture[ -]of[ -]experts": "moe",
}

RECOMPUTE_WORDS: dict[str, str] = {
    r"(?:full|complete)[ -]?(?:activation[ -])?(?:recompute|recomputation|checkpointing)": "full",
    r"selective[ -]?(?:activation[ -])?(?:recompute|recomputation|checkpointing)": "selective",
    r"(?:no|without)[ -]?(?:activation[ -])?(?:recompute|recomputation|checkpointing)": "none",
    # bare: PyTorch's torch.utils.checkpoint and Hugging Face's gradient_checkpointing keep each block's input and
    # recompute the rest (a full recompute); scanned after the qualified forms above
    r"(?:activation|gradient)[ -]?(?:checkpointing|recomputation|recompute)": "full",
}

STACK_WORDS: dict[str, str] = {
    r"megatron[ -]?core|mcore|nemo": "megatron-core", r"megatron[ -]?lm[ -]?2021": "megatron-lm-2021",
    r"fsdp ?2?|torchtitan": "fsdp2", r"deep ?speed": "deepspeed", r"ddp|distributed ?data ?parallel": "ddp",
    # bare "Megatron" / "Megatron-LM": today's Megatron-LM trains through Megatron-Core (not the MT-NLG model's name)
    r"megatron(?:[ -]?lm)?(?![ -]?turing)": "megatron-core",
}
"""Training-stack words (commmodel.step.stacks)."""

ALGORITHM_WORDS: dict[str, str] = {  # longer phrases first: the scanner consumes what it reads
    r"nvls[ -]?tree|nvlink[ -]?sharp[ -]?tree": "nvls_tree", r"nvls|nvlink[ -]?sharp": "nvls",
    r"(?:in[ -]network[ -]|ib[ -])?sharp|collnet": "sharp",
    r"hierarchical[ -]tree": "hierarchical_tree", r"hierarchical": "hierarchical",
    r"recursive[ -]doubling": "recursive_doubling", r"recursive[ -]halving": "recursive_halving",
    r"rabenseifner": "rabenseifner", r"bruck": "bruck", r"binomial(?:[ -]tree)?": "binomial_tree",
    r"(?:double[ -]binary[ -])?tree": "tree", r"ring": "ring", r"pairwise": "pairwise",
    r"parameter[ -]server": "parameter_server", r"dissemination": "dissemination",
}
"""Collective algorithm words ("ring all-reduce", "NVLS"): the registry's names (commmodel.collectives.algorithms),
priced as asked, as `collective --algo` prices them."""

ATTENTION_WORDS: dict[str, bool] = {
    r"(?:no|without|unfused)[ -]?(?:flash[ -]?|fused[ -]?)?(?:attention|attn)": False,  # before the bare forms
    r"(?:flash|fused)[ -]?(?:attention|attn)(?:[ -]?[23])?|flashattention(?:[ -]?[23])?|fa[23]": True,
}
"""Fused (flash) attention on or off (StepOptions.flash_attention; each stack has its default)."""

DTYPES: dict[str, str] = {r"bf16|bfloat16": "bf16", r"fp16|float16|half precision": "fp16",
                          r"fp8[ -]?blockwise|block[ -]?wise[ -]fp8": "fp8-blockwise",  # before fp8: scanned first
                          r"fp8[ -]?(?:cs|current(?:[ -]scaling)?|tensorwise)": "fp8-current",  # before fp8 too
                          r"fp8[ -]?row[ -]?wise|row[ -]?wise[ -]fp8": "fp8-rowwise",
                          r"fp8": "fp8", r"mxfp8": "mxfp8", r"nvfp4": "nvfp4",
                          r"fp32|float32|full precision": "fp32", r"tf32": "tf32"}

LIBRARY_WORDS: dict[str, str] = {
    r"open[ -]?mpi|ompi": "mpi", r"mpich": "mpich", r"mpi": "mpi", r"nccl": "nccl", r"rccl": "rccl",
    r"gloo": "gloo",
}
"""Communication libraries ("with gloo", "over MPI", "using RCCL") -> ``--library`` names (libraries.LIBRARY_NAMES)."""

WHAT_IF_WORDS = (
    r"what[ -]if", r"compare(?:d)?(?: to| with)?", r"\bvs\.?", r"versus", r"instead of", r"switch(?:ing|ed)?",
    r"upgrad(?:e|ing)", r"mov(?:e|ing)", r"go(?:ing)? from",
)

# Words that carry no information for the answer; anything else left over is reported as unread.
FILLER_WORDS = frozenset("""
a an the on of with over across using use used in into for and to from by at via as or than then
i we you my our me us if what whats what's how long fast fastest does do did is are be it its would will should can could
train training trained trains run running runs model models llm transformer params parameters param weights
gpu gpus node nodes cluster clusters machine machines box boxes server servers card cards accelerator accelerators
device devices network networking fabric interconnect link links connected nic nics time take takes taking
best good optimal layout layouts plan planning parallelism parallel split setup config configuration
switch switched switching move moving go going upgrade upgrading compare vs versus instead
size sized message messages buffer data per each step steps throughput speed tokens token please estimate
much many which faster slower better get gain buy cost costs help tell show find give answer need want
there here this that these those some any all total about around roughly approx approximately
sxm sxm4 sxm5 nvidia gb gib memory mem precision mixed dense distributed get gets be been being have has
global micro batch sequence seq length len context ctx stage zero tensor pipeline data dp tp pp cp ep expert
with using between up out down dgx hgx
fine-tune fine-tuning finetune finetuning tune tuning pretrain pre-train pretraining pre-training latency
don doesn didn isn aren won wouldn shouldn couldn let gradients grads
bandwidth busbw algbw mfu tflops flops efficiency utilization utilisation performance perf
enough sufficient fine ok okay worth 3d 4d 5d hybrid instruct chat base among
expect expected expecting realistic realistically typical typically achieve achievable reach w pytorch torch
day days hour hours week weeks month months window gradient meta sequences samples
lose losing lost loses pick picks picked choose chooses chose select selects selected gives giving
""".split())

HF_ORGS = r"(?:meta-llama|mistralai|qwen|deepseek-ai|google|nvidia|microsoft|tiiuae|bigscience|eleutherai|openai)"
"""Hugging Face organisations whose "org/Model-Name" ids people paste ("meta-llama/Meta-Llama-3-70B"): the prefix is
read and dropped, the model name read as usual."""

# Words a typo is checked against for a did-you-mean ("alreduce" -> all_reduce): spelling -> what to write.
KNOWN_WORDS: dict[str, str] = {
    **{w: op for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv",
                        "barrier", "reduce", "gather", "scatter") for w in (op.replace("_", ""), op, op.replace("_", "-"))},
    **{w: w for w in ("infiniband", "ethernet", "nvlink", "roce", "slingshot", "llama", "llama3", "llama2", "mixtral",
                      "bloom", "gpt3", "a100", "h100", "h200", "h800", "b200", "gb200", "nodes", "gpus", "batch",
                      "sequence", "pipeline", "tensor", "recompute", "accumulation", "gradient", "params")},
}

EXAMPLES = (
    '"8 GPUs, 1B params, IB NDR"',
    '"64 H100 over 400GbE, llama3-70b, batch 1024"',
    '"all-reduce 1GB on 16 A100 across 2 nodes with HDR"',
    '"GPT-3 175B on 1024 A100s"',
    '"what if I switch from 100GbE to NDR"',
)
"""Phrasings shown when a query cannot be read."""
