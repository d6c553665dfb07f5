"""More bad input, the way a hurried user types it (issue 2's contract, DESIGN §8): exit 1 with ONE stderr line
that names the bad value and how to fix it (usage errors exit 2), never a traceback, and never a measurements
file overwritten or cut.

Same table form and helpers as tests/test_bad_input_cli.py (``{tmp}`` is the scratch folder its ``scratch``
fixture fills; ``{p5}`` an nccl-tests log, ``{p5csv}`` a good measurements file made from it); the files only
these cases need are added by :func:`more`. Each case below failed before it was fixed (a traceback, a hang,
a silently wrong answer, or data lost) unless its comment says it guards behaviour that was already right.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.test_bad_input_cli import check_bad_input, invoke, scratch  # noqa: F401  (scratch is a fixture)

H100 = ["--system", "dgx-h100"]
EST = ["estimate", "--model", "1B", "--gpus", "8", *H100]
COLL = ["collective", "all_reduce", "--gpus", "8", *H100]
IMPORT = ["calibrate", "import", "{p5}", "--nodes", "1"]
from tests.test_diagnose import EVIDENCE  # noqa: E402  (../shared/evidence, or COMMMODEL_EVIDENCE_DIR)

CASES: list = [
    # --- a device library on the other vendor's GPUs (before: estimate/plan priced RCCL on an H100, exit 0;
    #     collective said "add compute_capability: sm_90" to an AMD GPU) ---------------------------------------
    ("est-rccl-on-nvidia", [*EST, "--library", "rccl"], 1, ["--library rccl", "AMD Instinct", "dgx-h100",
                                                             "use --library nccl"]),
    ("est-nccl-on-amd", ["estimate", "--model", "1B", "--gpus", "8", "--system", "amd-mi300x", "--library", "nccl"],
     1, ["--library nccl", "NVIDIA GPUs", "amd-mi300x", "use --library rccl"]),
    ("plan-rccl-release-on-nvidia", ["plan", "--model", "1B", "--gpus", "8", *H100, "--library", "rccl-2.20"], 1,
     ["--library rccl-2.20", "use --library nccl"]),
    ("coll-nccl-on-amd", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "8", "--system", "amd-mi300x",
                          "--library", "nccl"], 1, ["--library nccl", "use --library rccl", "!compute_capability"]),
    ("coll-nccl-on-cpu", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "8", "--system", "cpu-host",
                          "--library", "nccl"], 1, ["--library nccl", "CPU ranks", "use --library gloo"]),
    ("compare-rccl-on-a-nvidia-target", ["compare", "--model", "1B", "--gpus", "8", *H100, "--system", "amd-mi300x",
                                         "--library", "rccl"], 1, ["--library rccl", "dgx-h100"]),
    # --- sizes and counts past commmodel.limits (before: answers about 1e+285 PB or a 1e12-token sequence) -----
    ("coll-size-1e30", [*COLL, "--size", "1e30"], 1, ["--size 1e30", "too large", "1e+18"]),
    ("coll-size-1e300", [*COLL, "--size", "1e300B"], 1, ["--size 1e300B", "too large"]),
    ("sweep-max-size-1e30", ["sweep", "all_reduce", "--gpus", "8", *H100, "--max-size", "1e30"], 1,
     ["--max-size 1e30", "too large"]),
    ("plot-max-size-1e30", ["plot", "collective", "all_reduce", "--gpus", "8", *H100, "--max-size", "1e30", "--out",
                            "{tmp}/x.png"], 1, ["--max-size 1e30", "too large", "!--max-size: --max-size"]),
    ("est-seq-len-1e12", [*EST, "--seq-len", "1000000000000"], 1, ["--seq-len 1000000000000", "100,000,000"]),
    ("est-global-batch-1e12", [*EST, "--global-batch", "1000000000000"], 1,
     ["--global-batch 1000000000000", "100,000,000"]),
    ("est-micro-batch-1e12", [*EST, "--micro-batch", "1000000000000"], 1, ["--micro-batch 1000000000000"]),
    ("plan-seq-len-1e12", ["plan", "--model", "1B", "--gpus", "8", *H100, "--seq-len", "1000000000000"], 1,
     ["--seq-len 1000000000000"]),
    ("query-global-batch-1e12", ["query", "7B on 8 GPUs", "--global-batch", "1000000000000"], 1,
     ["--global-batch 1000000000000"]),
    ("est-layers-1e12", [*EST, "--layers", "1000000000000"], 1, ["num_layers 1000000000000", "too large", "1e+15"]),
    ("est-vocab-1e12", [*EST, "--vocab", "1000000000000"], 1, ["vocab_size 1000000000000", "too large"]),
    ("est-ffn-1e15", [*EST, "--ffn-hidden", "1000000000000000"], 1, ["ffn_hidden_size 1000000000000000"]),
    # ("est-dtype-case": --dtype FP8 is read as fp8 since 2026-11-28, tests/test_bad_input_flags.py)
    ("est-dtype-unknown", [*EST, "--dtype", "FP9"], 1, ["'fp9'", "'fp8'", "!fields are"]),
    # --- query: a minus sign was dropped (before: "-4MiB" priced as 4 MiB, "-8 GPUs" as 8) ------------------
    ("query-negative-size", ["query", "all-reduce -4MiB on 16 H100"], 1, ["'-4MiB'", "negative", "minus sign"]),
    ("query-negative-gpus", ["query", "7B on -8 GPUs"], 1, ["'-8'", "negative"]),
    ("query-unicode-minus", ["query", "all-reduce −4MiB on 16 H100"], 1, ["'−4MiB'", "negative"]),
    # guards: what already read right
    ("query-unicode-words", ["query", "Ünïcödé 🙂 模型"], 1, ["'模型'", "understood: nothing"]),
    ("query-100kB", ["query", "x" * 100_000], 1, ["100000 characters", "under 2000"]),
    ("query-odd-units", ["query", "7B 8 GPUs 100 furlongs per fortnight"], 1, ["'furlongs'", "understood: 8 GPUs"]),
    ("query-size-1e400", ["query", "all-reduce 1e400 bytes on 16 H100"], 1, ["'1e400'"]),
    ("query-zero-gpus", ["query", "7B on 0 GPUs"], 1, ["'0'", "between 1 and"]),
    # --- calibrate import: forced algorithm/protocol names (before: 'foo' recorded, then fitted as ring) -------
    ("import-algo-unknown", [*IMPORT, "--algo", "foo", "--out", "{tmp}/o.csv"], 1,
     ["--algo 'foo'", "ring", "leave --algo out"]),
    ("import-proto-unknown", [*IMPORT, "--proto", "ll64", "--out", "{tmp}/o.csv"], 1,
     ["--proto 'll64'", "ll128", "simple"]),
    ("import-append-binary", [*IMPORT, "--append", "--out", "{tmp}/torn.bin"], 1, ["torn.bin", "binary data"]),
    ("import-append-cr", [*IMPORT, "--append", "--out", "{tmp}/cr.csv"], 1, ["cr.csv:", "unreadable CSV"]),
    ("import-truncated-table", ["calibrate", "import", "{tmp}/nccl_trunc.txt", "--nodes", "1", "--ranks", "8",
                                "--op", "all_reduce", "--out", "{tmp}/o.csv"], 1,
     ["nccl_trunc.txt:3", "truncated table"]),  # guard
    ("import-json-no-results", ["calibrate", "import", "{tmp}/results.json", "--out", "{tmp}/o.csv"], 1,
     ["results.json", "'results' list"]),  # guard
    ("import-folder", ["calibrate", "import", "{tmp}/nothing", "--out", "{tmp}/o.csv"], 1, ["nothing", "folder"]),
    # --- calibrate fit / compute: never overwrite measurements; refuse before the slow part -----------------
    ("fit-out-onto-measurements", ["calibrate", "fit", "{p5csv}", "--base", "dgx-h100", "--out", "{p5csv}"], 1,
     ["holds measurements", "choose another file", "p5.yaml"]),
    ("fit-out-onto-a-log", ["calibrate", "fit", "{p5csv}", "--base", "dgx-h100", "--out", "{tmp}/nccl_trunc.txt"], 1,
     ["nccl_trunc.txt exists and is not a YAML file", "nccl_trunc.yaml"]),  # the raw log may be the only copy
    ("fit-compute-garbage", ["calibrate", "fit", "{p5csv}", "--base", "dgx-h100", "--compute", "{tmp}/garbage.csv"],
     1, ["garbage.csv", "not a commmodel measurements file"]),
    ("fit-compute-collectives", ["calibrate", "fit", "{p5csv}", "--base", "dgx-h100", "--compute", "{p5csv}"], 1,
     ["--compute", "collectives measurements"]),
    ("fit-blank-name", ["calibrate", "fit", "{p5csv}", "--base", "dgx-h100", "--out", "{tmp}/p.yaml", "--name", "  "],
     1, ["--name '", "is blank"]),
    ("from-nccl-blank-name", ["profiles", "from-nccl", "{tmp}/topo.xml", "--out", "{tmp}/d.yaml", "--name", ""], 1,
     ["--name ''", "blank"]),
    ("fit-nan-times", ["calibrate", "fit", "{tmp}/nan_times.csv"], 1,
     ["nan_times.csv:3", "time_s_median = 'nan'", "must be a positive number"]),  # was read as missing, then refused
    ("compute-out-exists", ["calibrate", "compute", "--out", "{p5csv}"], 1, ["already exists", "--resume"]),
    ("compute-hidden-1e12", ["calibrate", "compute", "--out", "{tmp}/c.csv", "--hidden", "1000000000000",
                             "--device", "cpu"], 1, ["GEMM", "GB free", "lower --hidden"]),
    # --- diagnose: trace fields of the wrong type (before: ValueError traceback) ---------------------------
    ("diagnose-ts-word", ["diagnose", "{tmp}/ts_word.json", *H100], 1,
     ["ts_word.json", "event 1", "'abc'", "export it again"]),
    ("diagnose-topology-xml", ["diagnose", "{tmp}/topo.xml", *H100], 1,
     ["topo.xml", "an NCCL topology XML, not a Kineto trace", "profiles from-nccl"]),
    ("diagnose-nccl-log", ["diagnose", "{tmp}/nccl.log", *H100], 1,
     ["nccl.log", "an NCCL_DEBUG=INFO log", "profiles from-nccl"]),
    ("diagnose-corrupt-gz", ["diagnose", "{tmp}/corrupt.json.gz", *H100], 1, ["corrupt.json.gz", "gzip"]),  # guard
    ("diagnose-truncated-gz", ["diagnose", "{tmp}/truncated.json.gz", *H100], 1,
     ["truncated.json.gz", "truncated"]),  # guard
    ("diagnose-array", ["diagnose", "{tmp}/links.yaml", *H100], 1, ["links.yaml"]),  # guard
    # --- profiles from-nccl: a device is read forever (before: hang), and --out onto data -------------------
    ("from-nccl-dev-zero", ["profiles", "from-nccl", "/dev/zero", "--out", "{tmp}/d.yaml"], 1,
     ["/dev/zero", "is a device"]),
    ("from-nccl-folder", ["profiles", "from-nccl", "{tmp}/nothing", "--out", "{tmp}/d.yaml"], 1,
     ["nothing", "is a folder"]),
    ("from-nccl-out-onto-measurements", ["profiles", "from-nccl", "{tmp}/topo.xml", "--out", "{p5csv}"], 1,
     ["holds measurements", "p5.yaml"]),
    ("from-nccl-out-onto-input", ["profiles", "from-nccl", "{tmp}/topo.xml", "--out", "{tmp}/topo.xml"], 1,
     ["topo.xml", "one of the input files"]),
    ("from-nccl-dtd", ["profiles", "from-nccl", "{tmp}/bomb.xml", "--out", "{tmp}/d.yaml"], 1,
     ["bomb.xml", "DTD"]),  # guard
    ("from-nccl-deep", ["profiles", "from-nccl", "{tmp}/deep.xml", "--out", "{tmp}/d.yaml"], 1,
     ["deep.xml", "nested more than 64 deep"]),  # before: RecursionError traceback
    ("from-nccl-broken-xml", ["profiles", "from-nccl", "{tmp}/broken.xml", "--out", "{tmp}/d.yaml"], 1,
     ["broken.xml", "not well-formed XML"]),  # guard
    # --- profiles validate: types and tags (guards) -----------------------------------------------------------
    ("validate-wrong-types", ["profiles", "validate", "{tmp}/wrong_types.yaml"], 1,
     ["wrong_types.yaml", "gpus_per_node", "'eight'", "whole number"]),
    ("validate-missing-fields", ["profiles", "validate", "{tmp}/name_only.yaml"], 1,
     ["name_only.yaml", "gpu: required field is missing", "profiles schema"]),
    ("validate-python-tag", ["profiles", "validate", "{tmp}/python_tag.yaml"], 1,
     ["python_tag.yaml", "malformed YAML"]),
    ("validate-not-utf8", ["profiles", "validate", "{tmp}/latin1.yaml"], 1, ["latin1.yaml", "not UTF-8"]),
    ("validate-dev-zero", ["profiles", "validate", "/dev/zero"], 1, ["/dev/zero", "device"]),
    # --- contradictory layout flags (guards) -------------------------------------------------------------------
    ("est-ep-dense", [*EST, "--ep", "2"], 1, ["ep 2", "dense"]),
    ("est-cp-seq", [*EST, "--cp", "8", "--seq-len", "4097"], 1, ["sequence length 4097", "2 × cp 8"]),
    ("est-fp8-a100", ["estimate", "--model", "1B", "--gpus", "8", "--system", "dgx-a100", "--dtype", "fp8"], 1,
     ["fp8", "sm_80", "bf16"]),
    ("coll-gloo-nvls", [*COLL, "--size", "1GiB", "--library", "gloo", "--algo", "nvls"], 1,
     ["gloo", "'nvls'", "ring"]),
    ("est-tp-over-gpus", [*EST, "--tp", "16"], 1, ["tp 16", "does not divide 8 GPUs"]),
    ("est-micro-batch-zero", [*EST, "--micro-batch", "0"], 2, ["--micro-batch"]),
    ("est-gpus-negative", ["estimate", "--model", "1B", "--gpus", "-1", *H100], 2, ["--gpus"]),
    ("est-system-typo-case", ["estimate", "--model", "1B", "--gpus", "8", "--system", "DGX-H101"], 1,
     ["'DGX-H101'", "did you mean dgx-h100"]),  # DGX-H100 itself is read as dgx-h100 since 2026-11-28
    ("est-model-typo", ["estimate", "--model", "lama3-8b", "--gpus", "8", *H100], 1, ["'lama3-8b'", "llama3-8b"]),
    # --- a Hugging Face config.json with odd values (before: Infinity or deep nesting was a traceback, true was read
    #     as 1 layer, a 1e30 vocabulary was priced, and the file was not named) ----------------------------------
    ("hf-infinity", ["estimate", "--model", "{tmp}/hf_inf.json", "--gpus", "8", *H100], 1,
     ["hf_inf.json", "Infinity is not a number"]),
    ("hf-deep", ["estimate", "--model", "{tmp}/hf_deep.json", "--gpus", "8", *H100], 1, ["hf_deep.json", "too deep"]),
    ("hf-bool-layers", ["estimate", "--model", "{tmp}/hf_bool.json", "--gpus", "8", *H100], 1,
     ["hf_bool.json", "num_hidden_layers true", "whole number"]),
    ("hf-huge-vocab", ["estimate", "--model", "{tmp}/hf_huge.json", "--gpus", "8", *H100], 1,
     ["hf_huge.json", "too large"]),
    ("hf-word", ["estimate", "--model", "{tmp}/hf_word.json", "--gpus", "8", *H100], 1,
     ["hf_word.json", "hidden_size", "'big'", "fix the config.json"]),
    ("hf-negative-experts", ["estimate", "--model", "{tmp}/hf_moe.json", "--gpus", "8", *H100], 1,
     ["hf_moe.json", "num_local_experts", "-8"]),
    # --- nested or mistyped JSON, damaged nccl-tests tables, empty key cells (before: RecursionError,
    #     AttributeError, KeyError or TypeError tracebacks) -----------------------------------------------------
    ("diagnose-deep", ["diagnose", "{tmp}/deep.json", *H100], 1, ["deep.json", "nested too deep"]),
    ("import-json-deep", ["calibrate", "import", "{tmp}/deep_report.json", "--out", "{tmp}/o.csv"], 1,
     ["deep_report.json", "nested too deep"]),
    ("import-json-config-string", ["calibrate", "import", "{tmp}/config_str.json", "--op", "all_reduce", "--nodes",
                                   "1", "--out", "{tmp}/o.csv"], 1,
     ["config_str.json", "'config' is a str, not a dict"]),
    ("import-header-no-busbw", ["calibrate", "import", "{tmp}/no_busbw.txt", "--op", "all_reduce", "--nodes", "1",
                                "--ranks", "8", "--out", "{tmp}/o.csv"], 1, ["no_busbw.txt:3", "no busbw column"]),
    ("import-nan-time", ["calibrate", "import", "{tmp}/nan_time.txt", "--op", "all_reduce", "--nodes", "1",
                         "--ranks", "8", "--out", "{tmp}/o.csv"], 1, ["nan_time.txt:3", "nan or inf"]),
    # --- plots with nothing to draw (before: matplotlib "cannot be log-scaled" traceback) and sweeps of absurdly
    #     many sizes (before: plot collective priced 214,887 sizes in 2.6 s; calibrate run would
    #     list 3e11 sizes in a loop that does not end, after the ranks had joined) -------------------------------
    ("plot-factor-tiny", ["plot", "collective", "all_reduce", "--gpus", "8", *H100, "--factor", "1.0001", "--out",
                          "{tmp}/x.png"], 1, ["--factor 1.0001", "214887 sizes", "larger factor"]),
    ("plot-one-gpu", ["plot", "collective", "all_reduce", "--gpus", "1", *H100, "--out", "{tmp}/x.png"], 1,
     ["--gpus 1", "one GPU moves no data", "--gpus 2"]),
    ("plot-barrier", ["plot", "collective", "barrier", "--gpus", "8", *H100, "--out", "{tmp}/x.png"], 1,
     ["barrier carries no message", "collective barrier"]),
    ("run-factor-tiny", ["calibrate", "run", "--out", "{tmp}/r.csv", "--factor", "1.0000000001", "--max-size",
                         "1e15"], 1, ["--factor 1.0000000001", "sizes", "larger factor"]),
    ("run-factor-inf", ["calibrate", "run", "--out", "{tmp}/r.csv", "--factor", "inf"], 1, ["--factor inf", "finite"]),
    ("fit-empty-ranks", ["calibrate", "fit", "{tmp}/empty_ranks.csv"], 1, ["empty_ranks.csv:3", "num_ranks empty"]),
    # --- the bad-input audit of 2026-11-28 (before: priced with a contradicting assumption line, or a negative memory)
    ("ddp-zero3", [*EST, "--stack", "ddp", "--zero", "3"], 1,
     ["--zero 3", "ddp stack shards nothing", "--stack fsdp2"]),
    ("headroom-over-hbm", ["plan", "--model", "1B", "--gpus", "8", *H100, "--memory-headroom", "1TB"], 1,
     ["--memory-headroom '1TB'", "at least the GPU's 85.5 GB", "!-9"]),
    ("kernel-unfused", [*EST, "--attention-kernel", "triton", "--no-flash-attention"], 1,
     ["--attention-kernel triton", "attention is unfused", "add --flash-attention"]),
    ("kernel-unfused-stack", [*EST, "--stack", "megatron-lm-2021", "--attention-kernel", "cudnn"], 1,
     ["--attention-kernel cudnn", "unfused"]),
    ("kernel-cudnn-amd", ["estimate", "--model", "1B", "--gpus", "8", "--system", "amd-mi300x", "--attention-kernel",
                          "cudnn"], 1, ["cuDNN fused attention runs on NVIDIA GPUs", "mi300x"]),
    ("topk-without-topk", [*EST, "--topk-fraction", "0.5"], 1, ["--topk-fraction 0.5", "add --compression topk"]),
    ("modules-without-selective", [*EST, "--recompute-modules", "core_attn,mlp"], 1,
     ["--recompute-modules core_attn,mlp", "recomputes none", "--recompute selective"]),
    ("fp8-gather-bf16", [*EST, "--stack", "fsdp2", "--fp8-param-gather"], 1, ["--fp8-param-gather", "trains in bf16"]),
    ("recompute-layers-over", [*EST, "--recompute", "full", "--recompute-layers", "99"], 1,
     ["--recompute-layers 99", "holds", "give 1 to"]),
    ("algo-with-fastest", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "16", *H100, "--algo", "ring",
                           "--selection", "fastest"], 1, ["--selection fastest", "--algo ring forces one"]),
    ("send-recv-one-rank", ["collective", "send_recv", "--size", "1GiB", "--gpus", "1", *H100], 1,
     ["point-to-point needs a sender and a receiver"]),
    ("sweep-barrier", ["sweep", "barrier", "--gpus", "8", *H100], 1, ["sweep barrier", "collective barrier --size 0"]),
    ("bucket-size-no-unit", [*EST, "--bucket-size", "0"], 1, ["--bucket-size: size '0' has no unit", "!StepOptions"]),
    ("dropout-nan", [*EST, "--dropout", "nan"], 1, ["--dropout: must be a number (got nan)", "!less than"]),
    ("system-empty", ["profiles", "show", ""], 1, ["the system name is empty", "!is a folder"]),
    ("plan-layers-without-full", ["plan", "--model", "1B", "--gpus", "8", *H100, "--recompute-layers", "4",
                                  "--recompute", "none"], 1, ["--recompute-layers 4", "add --recompute full"]),
    ("plan-modules-without-selective", ["plan", "--model", "1B", "--gpus", "8", *H100, "--recompute-modules", "mlp",
                                        "--recompute", "none"], 1,
     ["--recompute-modules mlp", "--recompute selective"]),
    ("plan-tp-over-max-tp", ["plan", "--model", "1B", "--gpus", "8", *H100, "--max-tp", "2", "--tp", "4"], 1,
     ["--tp 4 exceeds --max-tp 2"]),
    ("tp-overlap-kind-at-tp1", [*EST, "--tp-overlap-kind", "async-tp"], 1,
     ["--tp-overlap-kind async-tp", "tp 1 (no TP traffic)"]),
    ("headroom-unreadable", ["plan", "--model", "1B", "--gpus", "8", *H100, "--memory-headroom", "abc"], 1,
     ["--memory-headroom 'abc'", "cannot read size"]),
    # --- the bad-input audit of 2026-11-27 (before: exit 0, a 1.9 MB line, minutes of parsing, or a Python message)
    ("stack-empty", [*EST, "--stack", ""], 1, ["unknown stack ''"]),
    ("network-empty", [*EST, "--network", ""], 1, ["--network is empty"]),
    ("yaml-too-big", ["estimate", "--model", "1B", "--gpus", "8", "--system", "{tmp}/big.yaml"], 1,
     ["larger than 1 MiB"]),
    ("yaml-many-unknown-keys", ["estimate", "--model", "1B", "--gpus", "8", "--system", "{tmp}/keys.yaml"], 1,
     ["unknown key", "more problems", "!k2999"]),
    ("yaml-gpus-per-node-huge", ["estimate", "--model", "1B", "--gpus", "16", "--system", "{tmp}/gpn_huge.yaml"], 1,
     ["gpus_per_node", "≤ 1024"]),
    ("model-yaml-int-with-unit", ["estimate", "--model", "{tmp}/model_unit.yaml", "--gpus", "8", *H100], 1,
     ["hidden_size: '5120 units' is not a whole number"]),
    ("sweep-factor-inf", ["sweep", "all_reduce", "--gpus", "8", *H100, "-f", "inf"], 1, ["--factor inf", "finite"]),
    ("collective-fractional-bytes", [*COLL, "--size", "1.5"], 1, ["not a whole number of bytes"]),
    ("diagnose-gpus-per-node-over-node", ["diagnose", str(EVIDENCE / "kineto-nccl-2ranks-allreduce.json.gz"),
                                          "--system", "dgx-a100", "--gpus-per-node", "16"], 1,
     ["--gpus-per-node 16 exceeds the 8 GPUs"]),
    ("diagnose-layout-without-model", ["diagnose", str(EVIDENCE / "kineto-nccl-2ranks-allreduce.json.gz"),
                                       "--system", "dgx-a100", "--tp", "2"], 2, ["--tp", "needs --model"]),
    ("import-unknown-system", [*IMPORT, "--out", "{tmp}/i.csv", "--system", "nosuch"], 1, ["unknown system 'nosuch'"]),
    ("import-append-onto-a-gloo-run", [*IMPORT, "--op", "all_reduce", "--ranks", "8", "--out", "{tmp}/gloo_run.csv",
                                       "--append"], 1, ["another job's measurements", "backend gloo there"]),
    ("fit-empty-base", ["calibrate", "fit", "{p5csv}", "--base", ""], 1, ["--base is empty"]),
    ("compare-one-system-bad-stack", ["compare", "--model", "1B", "--gpus", "16", *H100, "--stack", "foo"], 1,
     ["unknown stack 'foo'"]),
    ("compare-one-system-bad-dtype", ["compare", "--model", "1B", "--gpus", "16", *H100, "--dtype", "fp64"], 1,
     ["--dtype 'fp64'"]),
    ("compare-one-system-bad-library", ["compare", "--model", "1B", "--gpus", "16", *H100, "--library", "nope"], 1,
     ["unknown library 'nope'", "nccl, rccl"]),
    ("usage-error-one-line", ["estimate", "--model", "1B", "--gpus", "0", *H100], 2,
     ["--gpus", "greater than or equal to 1", "commmodel estimate --help"]),
    # --- mixture-of-experts flags (MoE audit: a dense model took --moe-imbalance silently; an imbalance above
    #     experts ÷ top-k priced a 55 s step; Megatron-Core's refusals of the EP overlap were priced) ------------
    ("est-moe-flag-on-dense", ["estimate", "--model", "llama3-8b", "--gpus", "64", *H100, "--moe-imbalance", "2"], 1,
     ["--moe-imbalance", "llama3-8b is dense"]),
    ("plan-moe-overlap-on-dense", ["plan", "--model", "llama3-8b", "--gpus", "64", *H100, "--moe-a2a-overlap"], 1,
     ["--moe-a2a-overlap", "is dense"]),
    ("est-moe-imbalance-above-experts-over-topk", ["estimate", "--model", "mixtral-8x7b", "--gpus", "64", *H100,
                                                   "--ep", "8", "--zero", "1", "--moe-imbalance", "100"], 1,
     ["--moe-imbalance 100", "4 × the mean", "give 1 to 4"]),
    ("est-a2a-overlap-full-recompute", ["estimate", "--model", "mixtral-8x7b", "--gpus", "64", *H100, "--ep", "8",
                                        "--zero", "1", "--recompute", "full", "--moe-a2a-overlap"], 1,
     ["--moe-a2a-overlap", "full recompute", "drop --moe-a2a-overlap"]),
    ("plan-a2a-overlap-only-full-recompute", ["plan", "--model", "mixtral-8x7b", "--gpus", "64", *H100,
                                              "--recompute", "full", "--moe-a2a-overlap"], 1,
     ["--moe-a2a-overlap", "full recompute"]),
]


@pytest.fixture
def more(scratch: Path) -> Path:  # noqa: F811
    """The scratch folder with the extra bad files these cases read."""
    (scratch / "torn.bin").write_bytes(b"\x00a,b,c\nxx,y")  # binary whose last line looks torn: was cut to 7 bytes
    (scratch / "cr.csv").write_bytes(b"# commmodel measurements v1 (collectives)\nop,size_bytes\nall_reduce,8\r9,x\n")
    (scratch / "nccl_trunc.txt").write_text(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
        " #wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
        "  (GB/s)\n           8             2     float     sum      -1    31.5    0.00    0.00      0    3\n")
    (scratch / "results.json").write_text('{"results": "x"}')
    columns = ("op,size_bytes,num_ranks,num_nodes,group,algorithm,protocol,dtype,time_s_median,time_s_p10,time_s_p90,"
               "algbw_GBps,busbw_GBps,iters,time_stat,source")
    (scratch / "nan_times.csv").write_text("# commmodel measurements v1 (collectives)\n" + columns + "\n"
                                           "all_reduce,8,2,1,all,ring,,f32,nan,,,1,1,5,median,x\n")
    (scratch / "ts_word.json").write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": '
                                          '"ncclKernel_AllReduce_RING_LL_Sum_float", "ts": "abc", "dur": 5}]}')
    (scratch / "corrupt.json.gz").write_bytes(b"\x1f\x8b\x08\x00garbagegarbage")
    (scratch / "truncated.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "nccl' * 50)[:150])
    (scratch / "topo.xml").write_text('<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0" class="0x030200">'
                                      '<gpu dev="0" sm="90" rank="0" gdr="1"/></pci></cpu></system>\n')
    (scratch / "nccl.log").write_text("node1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")
    (scratch / "deep.xml").write_text('<system version="1">' + "<pci>" * 100_000 + "</pci>" * 100_000 + "</system>")
    (scratch / "bomb.xml").write_text('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><system>&a;</system>')
    (scratch / "broken.xml").write_text('<system version="1"><cpu numaid="0"><pci busid="x"')
    (scratch / "wrong_types.yaml").write_text("name: x\ngpu: h100-sxm-80gb\ngpus_per_node: eight\n"
                                              "scale_up: {link: nvlink4, domain_size: 8}\n")
    (scratch / "name_only.yaml").write_text("name: x\n")
    (scratch / "python_tag.yaml").write_text('!!python/object/apply:os.system ["true"]\n')
    (scratch / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    (scratch / "keys.yaml").write_text("name: big\ngpu: h100-sxm-80gb\n" + "".join(f"k{i}: {i}\n" for i in range(3000)))
    (scratch / "big.yaml").write_text("name: big\n" + "x" * (2**20 + 1) + ": 1\n")
    (scratch / "gpn_huge.yaml").write_text(Path(__file__).parent.parent.joinpath(
        "hardware_profiles", "systems", "dgx-h100.yaml").read_text().replace("gpus_per_node: 8", "gpus_per_node: 10**20"
                                                                              .replace("10**20", "1" + "0" * 20)))
    (scratch / "model_unit.yaml").write_text('name: m\npreset: llama2-13b\nhidden_size: "5120 units"\n')
    (scratch / "gloo_run.csv").write_bytes((Path(__file__).parent / "fixtures" / "calibrate" / "gloo_2ranks_devvm.csv")
                                          .read_bytes())
    _more_json(scratch)
    return scratch


def _more_json(folder: Path) -> None:
    """The JSON and table files of the second round (config.json values, nesting, damaged tables)."""
    import json

    base = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "vocab_size": 32000, "intermediate_size": 11008}
    for name, change in (("hf_bool", {"num_hidden_layers": True}), ("hf_huge", {"vocab_size": 10**30}),
                         ("hf_word", {"hidden_size": "big"}), ("hf_moe", {"num_local_experts": -8})):
        (folder / f"{name}.json").write_text(json.dumps({**base, **change}))
    (folder / "hf_inf.json").write_text(json.dumps(base).replace("4096", "Infinity", 1))
    (folder / "hf_deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "deep.json").write_text('{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (folder / "deep_report.json").write_text('{"results": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (folder / "config_str.json").write_text(json.dumps({"config": "x", "results": []}))
    head = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
            "busbw #wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
            "(us)  (GB/s)  (GB/s)\n")
    row = "           8             2     float     sum      -1    {t}    0.00    0.00      0    3.1   0.00   0.00  0\n"
    (folder / "no_busbw.txt").write_text(head.replace("busbw #wrong     time", "#wrong     time", 1) + row.format(t=3))
    (folder / "nan_time.txt").write_text(head + row.format(t="nan"))
    columns = ("op,size_bytes,num_ranks,num_nodes,group,algorithm,protocol,dtype,time_s_median,time_s_p10,time_s_p90,"
               "algbw_GBps,busbw_GBps,iters,time_stat,source")
    (folder / "empty_ranks.csv").write_text("# commmodel measurements v1 (collectives)\n" + columns + "\n"
                                            "all_reduce,8,,1,all,ring,,f32,1e-5,,,1,1,5,median,x\n")


@pytest.mark.parametrize(("case_id", "argv", "code", "fragments"), [pytest.param(*c, id=c[0]) for c in CASES])
def test_bad_invocation(case_id: str, argv: list[str], code: int, fragments: list[str], more: Path) -> None:
    check_bad_input(invoke(argv, more), code, fragments, more)


def test_the_table_is_large_and_new() -> None:
    """At least 60 cases, none a copy of one in test_bad_input_cli.py."""
    from tests.test_bad_input_cli import CASES as FIRST

    first = {tuple(c.values[1] if hasattr(c, "marks") else c[1]) for c in FIRST}
    assert len(CASES) >= 60
    assert not [c[0] for c in CASES if tuple(c[1]) in first]
    assert len({c[0] for c in CASES}) == len(CASES)


# --- measured data is never lost: each command that could write over a measurements file leaves it byte for byte


@pytest.mark.parametrize("argv", [
    ["calibrate", "fit", "{tmp}/m.csv", "--base", "dgx-h100", "--out", "{tmp}/m.csv"],
    ["profiles", "from-nccl", "{tmp}/topo.xml", "--out", "{tmp}/m.csv"],
    ["calibrate", "import", "{p5}", "--nodes", "1", "--out", "{tmp}/m.csv"],
    ["calibrate", "import", "{tmp}/binary.bin", "--append", "--out", "{tmp}/m.csv"],
    ["calibrate", "import", "{p5}", "--nodes", "1", "--algo", "foo", "--append", "--out", "{tmp}/m.csv"],
    ["calibrate", "compute", "--out", "{tmp}/m.csv"],
], ids=["fit-out", "from-nccl-out", "import-no-append", "import-append-binary-input", "import-append-bad-algo",
        "compute-out"])
def test_a_measurements_file_survives(argv: list[str], more: Path) -> None:
    assert invoke([*IMPORT, "--out", "{tmp}/m.csv"], more).exit_code == 0
    before = (more / "m.csv").read_bytes()
    result = invoke(argv, more)
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1, result.output
    assert (more / "m.csv").read_bytes() == before


def test_a_file_that_is_not_ours_is_not_cut(more: Path) -> None:
    """``import --append`` onto a binary file: refused before the torn-row repair could truncate it (before:
    torn.bin was cut from 12 bytes to 7, and cr.csv raised a csv.Error traceback)."""
    original = (more / "torn.bin").read_bytes()
    invoke([*IMPORT, "--append", "--out", "{tmp}/torn.bin"], more)
    assert (more / "torn.bin").read_bytes() == original
    original = (more / "cr.csv").read_bytes()
    invoke([*IMPORT, "--append", "--out", "{tmp}/cr.csv"], more)
    assert (more / "cr.csv").read_bytes() == original


def test_compute_refuses_an_existing_out_before_timing(more: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the whole GEMM sweep ran (minutes on a CPU) and only then was --out refused."""
    import commmodel.calibrate.compute as compute

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("timed GEMMs before checking --out")

    monkeypatch.setattr(compute, "run_matmuls", never)
    check_bad_input(invoke(["calibrate", "compute", "--out", "{p5csv}"], more), 1, ["already exists"], more)


def test_fit_reads_the_compute_file_before_fitting(more: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the ~1 s profile fit ran first, then a garbage --compute file was refused."""
    import commmodel.calibrate.report as report

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("fitted the profile before reading --compute")

    monkeypatch.setattr(report, "calibrate_system", never)
    argv = ["calibrate", "fit", "{p5csv}", "--base", "dgx-h100", "--compute", "{tmp}/garbage.csv"]
    check_bad_input(invoke(argv, more), 1, ["garbage.csv"], more)


def test_good_spellings_still_read(more: Path) -> None:
    """The new checks refuse nothing that was right: a model name with a dash and digits, an NCCL_ALGO
    spelling, the native library named explicitly, a size at the bound."""
    for argv in (["query", "llama3-8b on 8 H100"], [*EST, "--library", "nccl"],
                 [*COLL, "--size", "1e18"], [*IMPORT, "--algo", "NVLSTree", "--proto", "LL128", "--out", "{tmp}/o.csv"],
                 ["estimate", "--model", "1B", "--gpus", "8", "--system", "amd-mi300x", "--library", "rccl-2.20"]):
        result = invoke(argv, more)
        assert result.exit_code == 0, (argv, result.output)


@pytest.mark.slow
def test_one_gloo_rank_skips_send_recv(tmp_path: Path) -> None:
    """``torchrun --nproc_per_node 1 ... --backend gloo`` (a quick try on a laptop): before, send_recv to itself
    failed with gloo's "Pair is not connected" and ended the run; now it is skipped with its reason, the rest kept."""
    pytest.importorskip("torch")
    from commmodel.io.measurements import read_measurements
    from tests.test_calibrate_bench import torchrun

    out = tmp_path / "one.csv"
    result = torchrun(["--out", str(out), "--backend", "gloo", "--max-size", "64", "--iters", "1", "--warmup", "0"],
                      nproc=1)
    assert result.returncode == 0, result.stderr[-2000:]
    data = read_measurements(out)
    assert "send_recv" not in {r["op"] for r in data.rows} and len(data.rows) == 4 * 6  # 8..64 B, six ops
    assert any("send_recv" in n and "needs 2 ranks" in n for n in data.notes)


def test_emit_torchtitan_of_moe_recompute_is_a_note(more: Path) -> None:
    """Found by random flag combinations (1 in 1,500): ``--recompute moe --emit torchtitan`` was a KeyError
    traceback; torchtitan has no MoE-only checkpointing, so the arguments come with a note saying so."""
    result = invoke(["estimate", "--model", "mixtral-8x7b", "--gpus", "64", *H100, "--tp", "2", "--recompute", "moe",
                     "--emit", "torchtitan"], more)
    assert result.exit_code == 0, result.output
    assert "--parallelism.tensor_parallel_degree 2" in result.stdout
    assert "recompute moe: torchtitan has no such activation checkpointing" in result.stdout


def test_diagnose_reads_a_file_named_twice_once(more: Path) -> None:
    """``diagnose traces/ traces/rank0.json`` (an overlapping glob): before, the same rank was read and counted twice."""
    trace = str(Path(__file__).parent / "fixtures" / "evidence" / "hta-cpu-only-gloo-rank34.json.gz")
    result = invoke(["diagnose", trace, trace, str(Path(trace).parent / ".." / "evidence" / Path(trace).name), *H100],
                    more)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("backend gloo, rank 34 of 300") == 1


def test_resume_onto_a_profile_yaml_leaves_it_whole(tmp_path: Path) -> None:
    """``calibrate run --resume --out profile.yaml`` (the wrong file): before, the torn-row repair cut the YAML's
    last line (85 -> 44 bytes) and only then said it was not a measurements file."""
    from commmodel.errors import CalibrationError
    from commmodel.io.measurements import MeasurementWriter

    profile = tmp_path / "profile.yaml"
    profile.write_text("name: x\ngpu: h100-sxm-80gb\ngpus_per_node: 8\nscale_up: {link: nvlink4, domain_size: 8}")
    original = profile.read_bytes()
    with pytest.raises(CalibrationError, match="not a commmodel measurements file"):
        MeasurementWriter(profile, "collectives", {}, resume=True)
    assert profile.read_bytes() == original


def test_query_compare_on_one_gpu_prints_a_dash(more: Path) -> None:
    """Found by 2,000 random queries (1 failure): a comparison whose baseline takes 0 s (one GPU) has no speed-up,
    and formatting None was a TypeError traceback; now the column says '-'."""
    result = invoke(["query", "B200 on bf16 MI300X 1 nodes 1.5T alltoall"], more)
    assert result.exit_code == 0, result.output
    assert "amd-mi300x  none        0 s  0 B/s            -" in result.stdout


def test_a_zero_timeout_names_the_flag():
    """--timeout 0 said "timeout_s: Input should be greater than 0", the internal field's name."""
    from typer.testing import CliRunner

    from commmodel.cli.app import app

    result = CliRunner().invoke(app, ["calibrate", "run", "--out", "/nonexistent/x.csv", "--timeout", "0"])
    assert result.exit_code == 1 and "--timeout '0' must be above zero" in result.output
