"""Bad input on every command (issue 2, DESIGN §8): exit 1 with ONE stderr line that starts with
"error:", names the bad value and says how to fix it; usage errors exit 2; never a traceback.

Each case is (id, argv, exit code, fragments). ``{tmp}`` in an argument is the test's scratch folder,
which :func:`scratch` fills with bad files. For exit 1 every fragment must appear in the one line (the
first fragment is the bad value itself; a fragment starting with "!" must not appear); for exit 2 they must appear in typer's usage message.
Cases that fail because of a bug in a module another engineer owns are strict xfails naming the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app

runner = CliRunner()

H100 = ["--system", "dgx-h100"]
COLL = ["collective", "all_reduce", "--gpus", "8", *H100]
EST = ["estimate", "--model", "1B", "--gpus", "8", *H100]
PLAN = ["plan", "--model", "1B", "--gpus", "8", *H100]
PLOT = ["plot", "collective", "all_reduce", "--gpus", "8", *H100]
TIMELINE = ["plot", "timeline", "--model", "1B", "--gpus", "8", *H100, "--out", "{tmp}/t.png"]


def _xfail(case: tuple, reason: str) -> pytest.param:
    return pytest.param(*case, id=case[0], marks=pytest.mark.xfail(reason=reason, strict=True))


CASES: list = [
    # --- collective: sizes, GPU counts, systems, networks, ops, algorithms -----------------------------
    ("coll-size-negative", [*COLL, "--size", "-1"], 1, ["'-1'", "negative", "≥ 0"]),
    ("coll-size-ambiguous-G", [*COLL, "--size", "16G"], 1, ["'16G'", "ambiguous", "GiB", "GB"]),
    ("coll-size-garbage", [*COLL, "--size", "abc"], 1, ["'abc'", "accepted forms"]),
    ("coll-size-bits-case", [*COLL, "--size", "4kib"], 1, ["4kib", "case"]),
    ("coll-size-nan", [*COLL, "--size", "nan"], 1, ["'nan'", "finite"]),
    ("coll-size-overflow", [*COLL, "--size", "1e400"], 1, ["'1e400'", "finite"]),
    ("coll-size-missing", COLL, 2, ["--size"]),
    ("coll-gpus-zero", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "0", *H100], 1,
     ["--gpus 0", "at least 1"]),
    ("coll-gpus-word", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "eight", *H100], 2, ["--gpus"]),
    ("coll-gpus-partial-node", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "12", *H100], 1,
     ["12 GPUs", "whole nodes of 8", "--gpus-per-node"]),
    ("coll-gpus-per-node-too-big", [*COLL, "--size", "1GiB", "--gpus-per-node", "16"], 1,
     ["--gpus-per-node 16", "8 GPUs"]),
    ("coll-gpus-per-node-zero", [*COLL, "--size", "1GiB", "--gpus-per-node", "0"], 2, ["--gpus-per-node"]),
    ("coll-unknown-system", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "8", "--system", "dgx-h1000"],
     1, ["'dgx-h1000'", "did you mean dgx-h100", "profiles list"]),
    ("coll-missing-system-file", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "8",
                                  "--system", "{tmp}/nope.yaml"], 1, ["nope.yaml", "no such file"]),
    ("coll-system-typo-yaml", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "8",
                               "--system", "{tmp}/system_typo.yaml"], 1,
     ["scale_ot", "unknown key", "did you mean scale_out"]),
    ("coll-system-malformed-yaml", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "8",
                                    "--system", "{tmp}/malformed.yaml"], 1, ["malformed.yaml", "malformed YAML"]),
    ("coll-unknown-network", [*COLL, "--size", "1GiB", "--network", "ib-ndrr:8"], 1,
     ["'ib-ndrr'", "did you mean ib-ndr"]),
    ("coll-network-zero-nics", [*COLL, "--size", "1GiB", "--network", "ib-ndr:0"], 1, ["'0'", "≥ 1", "ib-ndr:8"]),
    ("coll-network-word-nics", [*COLL, "--size", "1GiB", "--network", "ib-ndr:x"], 1, ["'x'", "whole number"]),
    ("coll-network-scale-up-link", [*COLL, "--size", "1GiB", "--network", "nvlink4"], 1, ["nvlink4"]),
    ("coll-unknown-op", ["collective", "allreduce2", "--size", "1GiB", "--gpus", "8", *H100], 1,
     ["'allreduce2'", "all_reduce"]),
    ("coll-unknown-algo", [*COLL, "--size", "1GiB", "--algo", "foo"], 1, ["'foo'", "ring"]),
    ("coll-algo-not-applicable", ["collective", "all_gather", "--size", "1GiB", "--gpus", "8", *H100,
                                  "--algo", "parameter_server"], 1,
     ["'parameter_server'", "all_gather", "--algo auto"]),
    ("coll-algo-not-applicable-bcast", ["collective", "broadcast", "--size", "1GiB", "--gpus", "8", *H100,
                                        "--algo", "rabenseifner"], 1, ["'rabenseifner'", "broadcast"]),
    # --- sweep ---------------------------------------------------------------------------------------
    ("sweep-range-reversed", ["sweep", "all_reduce", "--gpus", "8", *H100, "--min-size", "1GiB",
                              "--max-size", "1KiB"], 1, ["--min-size 1GiB", "--max-size 1KiB", "min ≤ max"]),
    ("sweep-factor-one", ["sweep", "all_reduce", "--gpus", "8", *H100, "--factor", "1"], 1,
     ["--factor 1", "must be > 1"]),
    ("sweep-factor-nan", ["sweep", "all_reduce", "--gpus", "8", *H100, "--factor", "nan"], 1,
     ["--factor nan", "must be > 1"]),
    ("sweep-bad-min-size", ["sweep", "all_reduce", "--gpus", "8", *H100, "--min-size", "2x"], 1,
     ["'2x'", "accepted forms"]),
    ("sweep-unknown-op", ["sweep", "allgather_v", "--gpus", "8", *H100], 1, ["'allgather_v'"]),
    ("plan-csv-and-emit", ["plan", "--model", "7B", "--gpus", "8", *H100, "--csv", "--emit", "megatron"], 2,
     ["--csv", "--emit"]),
    ("sweep-json-and-csv", ["sweep", "all_reduce", "--gpus", "8", *H100, "--max-size", "1KiB",
                            "--json", "--csv"], 2, ["--json", "--csv"]),
    ("collective-bad-selection", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "8", *H100,
                                  "--selection", "best"], 1, ["'best'", "nccl (or library, the same) or fastest"]),
    # --- estimate --------------------------------------------------------------------------------------
    ("est-unknown-preset", ["estimate", "--model", "gpt9", "--gpus", "8", *H100], 1, ["'gpt9'", "1B"]),
    ("est-dtype-no-peak", ["estimate", "--model", "1B", "--gpus", "4", "--system", "cpu-host", "--gpus-per-node", "4",
                           "--dtype", "bf16"], 1, ["'bf16'", "use --dtype fp32"]),
    ("est-bad-count", ["estimate", "--model", "1.5.3B", "--gpus", "8", *H100], 1,
     ["'1.5.3B'", "accepted forms: 7e9, 1B"]),
    ("est-negative-count", ["estimate", "--model", "-1B", "--gpus", "8", *H100], 1, ["'-1B'"]),
    ("est-zero-count", ["estimate", "--model", "0", "--gpus", "8", *H100], 1, ["0", "125M"]),
    ("est-tp-not-dividing", [*EST, "--tp", "3"], 1, ["tp 3", "does not divide 8 GPUs"]),
    ("est-heads-tp", ["estimate", "--model", "1B", "--gpus", "8", *H100, "--tp", "8", "--heads", "12",
                      "--hidden", "1536"], 1, ["heads 12", "tp 8"]),
    ("est-layers-pp-vpp", [*EST, "--pp", "4", "--vpp", "2", "--layers", "5"], 1, ["layers 5", "pp 4 × vpp 2"]),
    ("est-batch-mb-dp", [*EST, "--global-batch", "13", "--micro-batch", "2"], 1,
     ["global batch 13", "micro-batch 2 × dp 8 = 16"]),
    ("est-zero-5", [*EST, "--zero", "5"], 2, ["--zero"]),
    ("est-recompute-sometimes", [*EST, "--recompute", "sometimes"], 1, ["'sometimes'", "selective"]),
    ("est-vpp-without-pp", [*EST, "--vpp", "2"], 1, ["vpp 2", "pp 1"]),
    ("est-dtype", [*EST, "--dtype", "fp7"], 1, ["'fp7'", "bf16"]),
    ("est-bucket-size", [*EST, "--bucket-size", "25Q"], 1, ["'25Q'", "accepted forms"]),
    ("est-compression", [*EST, "--compression", "zip"], 1, ["'zip'", "int8"]),
    ("est-dp-mode", [*EST, "--dp-mode", "mesh"], 1, ["'mesh'", "parameter_server"]),
    ("est-schedule", [*EST, "--schedule", "zb"], 1, ["'zb'", "1f1b"]),
    ("est-topk-fraction", [*EST, "--topk-fraction", "2"], 1, ["2.0", "≤ 1"]),
    ("est-straggler-cv", [*EST, "--straggler-cv", "-1"], 1, ["-1.0", "≥ 0"]),
    ("est-model-yaml-typo", ["estimate", "--model", "{tmp}/model_typo.yaml", "--gpus", "8", *H100], 1,
            ["hiden", "unknown", "!{'"]),
    ("est-heads-hidden-no-dict-dump", [*EST, "--heads", "100"], 1, ["num_heads 100", "!{'"]),
    ("est-missing-model-file", ["estimate", "--model", "{tmp}/nope.yaml", "--gpus", "8", *H100], 1,
     ["nope.yaml", "no such"]),
    ("est-malformed-model-yaml", ["estimate", "--model", "{tmp}/malformed.yaml", "--gpus", "8", *H100], 1,
     ["malformed.yaml", "malformed YAML"]),
    # --- plan ----------------------------------------------------------------------------------------
    ("plan-top-zero", [*PLAN, "--top", "0"], 2, ["--top"]),
    ("plan-unknown-preset", ["plan", "--model", "gpt9", "--gpus", "8", *H100], 1, ["'gpt9'"]),
    ("plan-recompute-sometimes", [*PLAN, "--recompute", "sometimes"], 1, ["'sometimes'", "selective"]),
    ("plan-zero-5", [*PLAN, "--zero", "5"], 2, ["--zero"]),
    ("plan-unknown-system", ["plan", "--model", "1B", "--gpus", "8", "--system", "nope"], 1, ["'nope'"]),
    ("plan-unknown-network", [*PLAN, "--network", "ib-foo"], 1, ["ib-foo"]),
    ("plan-tp-not-dividing", [*PLAN, "--tp", "3"], 1, ["tp 3", "8"]),
    # --- compare ---------------------------------------------------------------------------------------
    ("compare-unknown-system", ["compare", "--model", "1B", "--gpus", "8", *H100, "--system", "nope"], 1,
     ["'nope'"]),
    ("compare-unknown-network", ["compare", "--model", "1B", "--gpus", "16", *H100, "--network", "ib-foo",
                                 "--network", "ib-ndr"], 1, ["ib-foo"]),
    ("compare-one-target", ["compare", "--model", "1B", "--gpus", "8", *H100], 1, ["two targets"]),
    ("compare-no-system", ["compare", "--model", "1B", "--gpus", "8"], 2, ["--system"]),
    # --- query ---------------------------------------------------------------------------------------
    ("query-empty", ["query", ""], 1, ["empty", "8 GPUs, 1B params"]),
    ("query-blank", ["query", "   "], 1, ["empty"]),
    ("query-garbage", ["query", "asdf qwerty zxcv"], 1, ["'asdf'", "'qwerty'", "understood: nothing"]),
    ("query-bad-count", ["query", "8 GPUs, 1.5.3B params, IB NDR"], 1, ["1.5.3b", "understood: 8 GPUs"]),
    ("query-unknown-system", ["query", "8 GPUs, 1B params, on dgx-h1000"], 1, ["dgx-h1000"]),
    ("query-top-zero", ["query", "8 GPUs, 1B params", "--top", "0"], 2, ["--top"]),
    ("query-missing-text", ["query"], 2, ["Missing argument 'text'"]),
    ("query-control-characters", ["query", "\x01\x02\x03"], 1, ["found nothing"]),
    ("query-typo-collective", ["query", "alreduce 1GB on 16 H100"], 1, ["'alreduce'", "did you mean all_reduce"]),
    ("query-family-size-no-preset", ["query", "llama 30b on 64 H100"], 1, ["30B", "llama3-70b", "!Mention("]),
    ("query-two-models-no-repr", ["query", "llama3-70b and gpt3-175b on 8 H100"], 1,
     ["llama3-70b, gpt3-175b", "!Mention("]),
    # --- validate --------------------------------------------------------------------------------------
    ("validate-unknown-option", ["validate", "--bogus"], 2, ["--bogus"]),
    ("validate-extra-argument", ["validate", "dgx-h100"], 2, ["dgx-h100"]),
    # --- profiles --------------------------------------------------------------------------------------
    ("profiles-show-unknown", ["profiles", "show", "nope"], 1, ["'nope'", "profiles list"]),
    ("profiles-show-close", ["profiles", "show", "dgx-a10"], 1, ["'dgx-a10'", "did you mean dgx-a100"]),
    ("profiles-show-missing-arg", ["profiles", "show"], 2, ["Missing argument 'system'"]),
    ("profiles-validate-missing", ["profiles", "validate", "{tmp}/nope.yaml"], 1, ["nope.yaml", "no such file"]),
    ("profiles-validate-empty-file", ["profiles", "validate", "{tmp}/empty.csv"], 1, ["empty.csv", "empty"]),
    ("profiles-validate-empty-dir", ["profiles", "validate", "{tmp}/nothing"], 1, ["nothing", "no YAML files"]),
    ("profiles-validate-bad-catalogue", ["profiles", "validate", "{tmp}/links.yaml"], 1,
     ["links.yaml", "must map link names to link specs"]),
    ("profiles-unknown-subcommand", ["profiles", "frobnicate"], 2, ["frobnicate"]),
    # --- plot --------------------------------------------------------------------------------------------
    ("plot-out-missing-folder", [*PLOT, "--out", "/nonexistent-folder/x.png"], 1,
     ["/nonexistent-folder/x.png", "does not exist"]),
    ("plot-out-bad-extension", [*PLOT, "--out", "{tmp}/x.txt"], 1, ["x.txt", "'.txt'", ".png"]),
    ("plot-out-is-directory", [*PLOT, "--out", "{tmp}/adir.png"], 1, ["adir.png", "cannot write"]),
    ("plot-measured-garbage", [*PLOT, "--out", "{tmp}/x.png", "--measured", "{tmp}/garbage.csv"], 1,
     ["garbage.csv", "size_bytes"]),
    ("plot-measured-missing", [*PLOT, "--out", "{tmp}/x.png", "--measured", "{tmp}/nope.csv"], 1,
     ["nope.csv", "no such file"]),
    ("plot-unknown-setup", [*PLOT, "--out", "{tmp}/x.png", "--setup", "nope"], 1, ["'nope'", "known:"]),
    ("plot-bad-max-size", [*PLOT, "--out", "{tmp}/x.png", "--max-size", "16G"], 1, ["--max-size", "'16G'"]),
    ("plot-scaling-neither", ["plot", "scaling", *H100, "--out", "{tmp}/x.png"], 1, ["--size", "--model"]),
    ("plot-scaling-negative-size", ["plot", "scaling", "all_reduce", *H100, "--size", "-3", "--out",
                                    "{tmp}/x.png"], 1, ["'-3'", "negative"]),
    ("plot-scaling-gpus-reversed", ["plot", "scaling", "all_reduce", *H100, "--size", "1GiB", "--min-gpus", "64",
                                    "--max-gpus", "8", "--out", "{tmp}/x.png"], 1, ["--max-gpus 8", "--min-gpus 64"]),
    ("plot-scaling-metric", ["plot", "scaling", *H100, "--model", "1B", "--metric", "speed", "--out",
                             "{tmp}/x.png"], 1, ["'speed'", "tokens_per_s"]),
    ("plot-breakdown-unknown-model", ["plot", "breakdown", "--model", "gpt9", "--gpus", "8", *H100, "--out",
                                      "{tmp}/x.png"], 1, ["'gpt9'"]),
    ("plot-timeline-tp", [*TIMELINE, "--tp", "3"], 1, ["tp 3", "8 GPUs", "--tp/--cp/--pp/--micro-batch"]),
    ("plot-timeline-recompute", [*TIMELINE, "--recompute", "sometimes"], 1, ["'sometimes'", "selective"]),
    ("plot-timeline-compression", [*TIMELINE, "--compression", "zip"], 1, ["'zip'", "topk"]),
    ("plot-timeline-bucket", [*TIMELINE, "--bucket-size", "25G"], 1, ["'25G'", "ambiguous"]),
    ("plot-whatif-network", ["plot", "whatif", "--model", "1B", "--gpus", "8", *H100, "--network", "ib-ndr:0",
                             "--out", "{tmp}/x.png"], 1, ["'ib-ndr:0'", "≥ 1"]),
    ("plot-calibration-garbage", ["plot", "calibration", "{tmp}/garbage.csv", "--out", "{tmp}/x.png"], 1,
     ["garbage.csv", "not a commmodel measurements file"]),
    ("plot-calibration-missing", ["plot", "calibration", "{tmp}/nope.csv", "--out", "{tmp}/x.png"], 1,
     ["nope.csv", "no such file"]),
    ("plot-unknown-kind", ["plot", "heatmap", "--out", "{tmp}/x.png"], 2, ["heatmap"]),
    # --- calibrate --------------------------------------------------------------------------------------
    ("import-missing", ["calibrate", "import", "{tmp}/nope.txt", "--out", "{tmp}/o.csv"], 1,
     ["nope.txt", "no such file"]),
    ("import-not-nccl-tests", ["calibrate", "import", "{tmp}/prose.txt", "--out", "{tmp}/o.csv"], 1,
     ["prose.txt", "no nccl-tests table"]),
    ("import-empty", ["calibrate", "import", "{tmp}/empty.csv", "--out", "{tmp}/o.csv"], 1,
     ["empty.csv", "empty"]),
    ("import-binary", ["calibrate", "import", "{tmp}/binary.bin", "--out", "{tmp}/o.csv"], 1,
     ["binary.bin", "binary"]),
    ("import-out-unwritable", ["calibrate", "import", "{p5}", "--nodes", "1", "--out", "/proc/no-such-dir/o.csv"], 1,
     ["/proc/no-such-dir/o.csv", "cannot write"]),
    ("import-out-exists", ["calibrate", "import", "{p5}", "--nodes", "1", "--out", "{tmp}/garbage.csv"], 1,
     ["garbage.csv", "already exists", "--append"]),
    ("import-nodes-not-dividing", ["calibrate", "import", "{p5}", "--nodes", "3", "--out", "{tmp}/o.csv"], 1,
     ["--nodes 3", "8 ranks"]),
    ("import-unknown-op", ["calibrate", "import", "{p5}", "--nodes", "1", "--op", "allreduce9", "--out",
                           "{tmp}/o.csv"], 1, ["'allreduce9'", "all_reduce"]),
    ("fit-unknown-base", ["calibrate", "fit", "{p5csv}", "--base", "nope", "--out", "{tmp}/p.yaml"], 1, ["'nope'"]),
    ("fit-unknown-op", ["calibrate", "fit", "{p5csv}", "--ops", "foo"], 1, ["'foo'", "all_reduce"]),
    ("fit-empty-csv", ["calibrate", "fit", "{tmp}/empty.csv"], 1, ["empty.csv", "not a commmodel measurements"]),
    ("fit-garbage-csv", ["calibrate", "fit", "{tmp}/garbage.csv"], 1, ["garbage.csv", "calibrate import"]),
    ("fit-header-only", ["calibrate", "fit", "{tmp}/header_only.csv"], 1, ["header_only.csv", "no header row"]),
    ("fit-bad-number", ["calibrate", "fit", "{tmp}/bad_number.csv"], 1,
     ["bad_number.csv:3", "size_bytes", "'lots'"]),
    ("fit-size-infinite", ["calibrate", "fit", "{tmp}/size_inf.csv"], 1,
     ["size_inf.csv:3", "size_bytes", "'inf'", "whole number"]),
    ("fit-ranks-nan", ["calibrate", "fit", "{tmp}/ranks_nan.csv"], 1, ["ranks_nan.csv:3", "num_ranks", "'nan'"]),
    ("fit-truncated-row", ["calibrate", "fit", "{tmp}/truncated.csv"], 1, ["truncated.csv:3", "cells"]),
    ("fit-missing", ["calibrate", "fit", "{tmp}/nope.csv"], 1, ["nope.csv", "no such file"]),
    ("calibrate-run-unknown-option", ["calibrate", "run", "--out", "{tmp}/r.csv", "--sizes", "abc"], 2,
     ["--sizes"]),
    # --- issue 16: bounds on every count (commmodel.limits) ------------------------------------------------
    ("plan-model-1e30", ["plan", "--model", "1e30", "--gpus", "8", *H100], 1, ["1e+30", "too large", "1M", "1e+15"]),
    ("plan-model-1e300", ["plan", "--model", "1e300", "--gpus", "8", *H100], 1, ["1e+300", "1e+15"]),
    ("est-model-1e30", ["estimate", "--model", "1e30", "--gpus", "8", *H100], 1, ["1e+30", "too large"]),
    ("plan-gpus-billion", ["plan", "--model", "7B", "--gpus", "1000000000", *H100], 1,
     ["--gpus 1000000000", "accepted range 1 to 16,777,216"]),
    ("plan-gpus-int64-overflow", ["plan", "--model", "7B", "--gpus", "9223372036854775808", *H100], 1,
     ["--gpus 9223372036854775808", "16,777,216"]),
    ("est-gpus-int64-overflow", ["estimate", "--model", "7B", "--gpus", "9223372036854775808", *H100], 1,
     ["--gpus 9223372036854775808", "16,777,216"]),
    ("coll-gpus-int64-overflow", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "9223372036854775808",
                                  *H100], 1, ["--gpus 9223372036854775808", "16,777,216"]),
    ("sweep-gpus-huge", ["sweep", "all_reduce", "--gpus", "99999999999", *H100], 1, ["--gpus 99999999999"]),
    ("query-gpus-huge", ["query", "8 GPUs, 1B params", "--gpus", "99999999999"], 1, ["--gpus 99999999999"]),
    ("plan-gpus-per-node-huge", [*PLAN, "--gpus-per-node", "5000"], 1, ["--gpus-per-node 5000", "1,024"]),
    ("coll-network-nics-huge", [*COLL, "--size", "1GiB", "--network", "ib-ndr:99999999999"], 1,
     ["'99999999999'", "at most 1024"]),
    ("plot-scaling-max-gpus-huge", ["plot", "scaling", "all_reduce", *H100, "--size", "1GiB", "--max-gpus",
                                    "99999999999", "--out", "{tmp}/x.png"], 1, ["--max-gpus 99999999999"]),
    # --- issue 16: output paths, unbounded reads, duplicate YAML keys ----------------------------------------
    ("fit-out-proc", ["calibrate", "fit", "{p5csv}", "--out", "/proc/x.yaml"], 1, ["/proc/x.yaml", "cannot write"]),
    ("fit-out-folder", ["calibrate", "fit", "{p5csv}", "--out", "{tmp}/nothing"], 1, ["nothing", "is a folder"]),
    ("fit-out-missing-folder", ["calibrate", "fit", "{p5csv}", "--out", "{tmp}/nope/x.yaml"], 1,
     ["nope/x.yaml", "does not exist", "mkdir -p"]),
    ("import-out-folder", ["calibrate", "import", "{p5}", "--nodes", "1", "--out", "{tmp}/nothing"], 1,
     ["nothing", "is a folder"]),
    ("import-dev-zero", ["calibrate", "import", "/dev/zero", "--out", "{tmp}/o.csv"], 1, ["/dev/zero", "device"]),
    ("fit-dev-zero", ["calibrate", "fit", "/dev/zero"], 1, ["/dev/zero", "device"]),
    ("profiles-validate-duplicate-key", ["profiles", "validate", "{tmp}/dup.yaml"], 1,
     ["dup.yaml", "duplicate key gpu", "lines 2 and 5"]),
    ("coll-system-duplicate-key", ["collective", "all_reduce", "--size", "1GiB", "--gpus", "8", "--system",
                                   "{tmp}/dup.yaml"], 1, ["dup.yaml", "duplicate key gpu"]),
    ("est-model-duplicate-key", ["estimate", "--model", "{tmp}/dup_model.yaml", "--gpus", "8", *H100], 1,
     ["dup_model.yaml", "duplicate key num_layers", "lines 2 and 4"]),
    # --- the root ----------------------------------------------------------------------------------------
    ("unknown-command", ["frobnicate"], 2, ["frobnicate"]),
]

_COLUMNS = ",".join(("op", "size_bytes", "num_ranks", "num_nodes", "group", "algorithm", "protocol", "dtype",
                     "time_s_median", "time_s_p10", "time_s_p90", "algbw_GBps", "busbw_GBps", "iters", "time_stat",
                     "source"))


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A folder of bad files the cases point at."""
    (tmp_path / "garbage.csv").write_text("a,b\n1,2\n")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "prose.txt").write_text("this is not nccl-tests output\njust words\n")
    (tmp_path / "binary.bin").write_bytes(b"\x00\x01\x02garbage\x00" * 20)
    (tmp_path / "model_typo.yaml").write_text("name: m\nnum_layers: 4\nhiden: 512\nnum_heads: 8\n"
                                              "vocab_size: 1000\nseq_len: 128\n")
    (tmp_path / "malformed.yaml").write_text("name: x\n\tgpu: [h100\n")
    (tmp_path / "system_typo.yaml").write_text("name: my-box\ngpu: h100-sxm-80gb\ngpus_per_node: 8\n"
                                               "scale_up: {link: nvlink4, domain_size: 8}\n"
                                               "scale_ot: {link: ib-ndr, nics_per_node: 8}\n")
    head = "# commmodel measurements v1 (collectives)\n"
    (tmp_path / "header_only.csv").write_text(head + "# backend: gloo\n")
    (tmp_path / "bad_number.csv").write_text(head + _COLUMNS + "\nall_reduce,lots,2,1,all,ring,,f32,1e-5,,,1,1,5,"
                                             "median,x\n")
    row = "all_reduce,{size},{ranks},1,all,ring,,f32,1e-5,,,1,1,5,median,x\n"
    (tmp_path / "size_inf.csv").write_text(head + _COLUMNS + "\n" + row.format(size="inf", ranks=2))
    (tmp_path / "ranks_nan.csv").write_text(head + _COLUMNS + "\n" + row.format(size=8, ranks="nan"))
    (tmp_path / "truncated.csv").write_text(head + _COLUMNS + "\nall_reduce,8,2\n")
    (tmp_path / "links.yaml").write_text("- nvlink4\n- ib-ndr\n")
    (tmp_path / "dup.yaml").write_text("name: x\ngpu: h100-sxm-80gb\ngpus_per_node: 8\n"
                                       "scale_up: {link: nvlink4, domain_size: 8}\ngpu: a100-sxm-80gb\n")
    (tmp_path / "dup_model.yaml").write_text("preset: llama3-8b\nnum_layers: 4\nseq_len: 128\nnum_layers: 8\n")
    (tmp_path / "adir.png").mkdir()
    (tmp_path / "nothing").mkdir()
    return tmp_path


def invoke(argv: list[str], folder: Path):
    """Run the CLI in-process with ``{tmp}`` replaced; COMMMODEL_DEBUG is cleared so errors stay one line."""
    p5 = str(Path(__file__).parent / "fixtures" / "nccl_tests" / "aws-p5-1n_all_reduce_perf.txt")
    if any("{p5csv}" in a for a in argv):  # a good measurements file, so the bad part is the option
        assert runner.invoke(app, ["calibrate", "import", p5, "--nodes", "1", "--out", f"{folder}/p5.csv"]).exit_code == 0
    args = [a.replace("{tmp}", str(folder)).replace("{p5csv}", f"{folder}/p5.csv").replace("{p5}", p5) for a in argv]
    return runner.invoke(app, args, env={"COMMMODEL_DEBUG": ""})


def check_bad_input(result, code: int, fragments: list[str], folder: Path) -> None:
    """The contract for one bad invocation (shared with the profiles-directory test)."""
    stderr = result.stderr
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"unexpected exception {result.exception!r}")
    assert result.exit_code == code, f"exit {result.exit_code}, wanted {code}; stderr: {stderr!r}"
    assert result.stdout == "", f"a failing command printed on stdout: {result.stdout!r}"
    lines = stderr.splitlines()  # a usage error (exit 2) is one line too, naming the command's --help
    assert len(lines) == 1, f"wanted one stderr line, got {len(lines)}: {stderr!r}"
    assert lines[0].startswith("error: "), lines[0]
    assert code == 1 or "--help')" in lines[0], lines[0]
    message = lines[0]
    for fragment in fragments:
        fragment = fragment.replace("{tmp}", str(folder))
        if fragment.startswith("!"):  # must NOT appear (e.g. "!{'": no dict dumped into the line)
            assert fragment[1:] not in message, f"{fragment[1:]!r} should not be in {message!r}"
        else:
            assert fragment in message, f"{fragment!r} is not in {message!r}"


@pytest.mark.parametrize(("case_id", "argv", "code", "fragments"),
                         [c if hasattr(c, "marks") else pytest.param(*c, id=c[0]) for c in CASES])
def test_bad_invocation(case_id: str, argv: list[str], code: int, fragments: list[str], scratch: Path) -> None:
    check_bad_input(invoke(argv, scratch), code, fragments, scratch)


def test_the_table_covers_every_command() -> None:
    """At least 60 bad invocations, and every command of DESIGN §8 appears in the table."""
    argvs = [c.values[1] if hasattr(c, "marks") else c[1] for c in CASES]
    assert len(argvs) >= 60
    firsts = {a[0] if a[0] not in ("profiles", "plot", "calibrate") else " ".join(a[:2]) for a in argvs}
    for command in ("collective", "sweep", "estimate", "plan", "compare", "query", "validate", "profiles show",
                    "profiles validate", "plot collective", "plot scaling", "plot breakdown", "plot timeline",
                    "plot whatif", "plot calibration", "calibrate import", "calibrate fit"):
        assert command in firsts, command


def test_profiles_validate_reports_every_bad_file_of_a_directory(scratch: Path) -> None:
    """A directory of bad profiles: one "error:" line per bad file (all of them, not just the first), exit 1."""
    folder = scratch / "bad_profiles"
    folder.mkdir()
    (folder / "a.yaml").write_text("name: x\n\tgpu: h\n")
    (folder / "b.yaml").write_text("name: y\ngpu: h100-sxm-80gb\ngpus_per_node: 8\n"
                                   "scale_up: {link: nvlink4, domain_size: 8}\ncolour: red\n")
    (folder / "c.yaml").write_text("name: z\ngpu: h100-sxm-80gb\ngpus_per_node: -8\n"
                                   "scale_up: {link: nvlink4, domain_size: 8}\n")
    result = invoke(["profiles", "validate", str(folder)], scratch)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 3, lines
    assert all(line.startswith("error: ") for line in lines)
    assert "a.yaml" in lines[0] and "malformed YAML" in lines[0]
    assert "b.yaml" in lines[1] and "colour: unknown key" in lines[1]
    assert "c.yaml" in lines[2] and "gpus_per_node" in lines[2] and "-8" in lines[2]
    assert "Traceback" not in result.output


def test_debug_env_shows_the_traceback(scratch: Path) -> None:
    """COMMMODEL_DEBUG=1 lets the domain error through (so the boundary really is the only thing hiding it)."""
    from commmodel.errors import UnitError

    result = runner.invoke(app, [*COLL, "--size", "abc"], env={"COMMMODEL_DEBUG": "1"})
    assert isinstance(result.exception, UnitError)
