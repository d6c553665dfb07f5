"""Readers of the published measurements shipped in ``commmodel/data`` (see data/README.md).

Reading only: the files become lists of plain dicts of strings or YAML values. Pricing them with the
model is :mod:`commmodel.validation`'s job (it sits above the step model; io stays a low layer).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import yaml

from commmodel.errors import CommModelError, ProfileError
from commmodel.io.yaml_read import read_yaml_file

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
NCCL_TESTS_CSV = DATA_DIR / "nccl_tests.csv"
"""Published nccl-tests rows (one per setup × collective × size)."""
NCCL_SETUPS_YAML = DATA_DIR / "nccl_setups.yaml"
"""Which shipped profile describes each nccl-tests setup, how it was launched, what was forced."""
NCCL_OUT_OF_SAMPLE_YAML = DATA_DIR / "nccl_out_of_sample.yaml"
"""Prose all-reduce reference points that are not in nccl_tests.csv."""
TRAINING_CSV = DATA_DIR / "training_throughput.csv"
"""Published Megatron-LM rows (Narayanan et al. 2021 Table 1; Korthikanti et al. 2022 Tables 3, 5)."""
TRAINING_OUT_OF_SAMPLE_YAML = DATA_DIR / "training_out_of_sample.yaml"
"""Published training runs that are not in training_throughput.csv (newer GPUs and software)."""

TRAINING_MODERN_YAML = DATA_DIR / "training_modern.yaml"
"""Published runs of today's stacks (FSDP2/torchtitan, Megatron-Core, Composer FSDP), with stack and dtype."""
TRAINING_MOE_YAML = DATA_DIR / "training_moe.yaml"
"""Published mixture-of-experts training runs (Megatron-Core, DeepSeek-V3), with layout (ep, etp) and stack."""

TE_GEMM_YAML = DATA_DIR / "te_gemm_recipes.yaml"
"""Transformer Engine's GEMM benchmark per training format (a B300, an H200 NVL), as its documentation publishes it."""
OOS_METRICS = ("mfu", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "tokens_per_s_per_gpu", "step_time_s")
"""The metrics a run of training_out_of_sample.yaml or training_modern.yaml may publish."""


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file with a header line, as dictionaries of strings."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def read_nccl_rows(path: Path = NCCL_TESTS_CSV) -> list[dict[str, str]]:
    """The published nccl-tests rows as dictionaries of strings."""
    return read_csv_rows(path)


def read_setups(path: Path = NCCL_SETUPS_YAML) -> dict[str, dict[str, Any]]:
    """setup_id -> {system, gpus_per_process, algorithm?, algorithms?}."""
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    if not isinstance(data, dict):
        raise CommModelError(f"{path}: must map setup ids to {{system, gpus_per_process, ...}}")
    return data


def read_nccl_out_of_sample(path: Path = NCCL_OUT_OF_SAMPLE_YAML) -> dict[str, dict[str, Any]]:
    """point id -> {gpu, gpus_per_node, scale_up, ranks, size, busbw_GBps, tolerance, source, ...}, or ``system``
    (a shipped profile's name) in place of the composed hardware."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def read_training_rows(path: Path = TRAINING_CSV) -> list[dict[str, str]]:
    """The published Megatron-LM rows as dictionaries of strings."""
    return read_csv_rows(path)


def read_training_modern(path: Path = TRAINING_MODERN_YAML) -> list[dict[str, Any]]:
    """The runs of ``training_modern.yaml``: as :func:`read_training_out_of_sample`, each with ``stack`` and ``dtype``."""
    runs = read_training_out_of_sample(path)
    for run in runs:
        if not run.get("stack") or not run.get("dtype"):
            raise ProfileError(f"{path}: run {run.get('id')!r} needs a 'stack' and a 'dtype'; see the file's header")
    return runs


def read_training_moe(path: Path = TRAINING_MOE_YAML) -> list[dict[str, Any]]:
    """The runs of ``training_moe.yaml`` (each: id, source, model preset, system, num_gpus, layout, stack, published
    tokens/s per GPU)."""
    data = read_yaml_file(path, ProfileError, "a YAML file with a 'runs' list")
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not runs:
        raise ProfileError(f"{path}: expected a non-empty 'runs' list; see the file's header")
    for run in runs:
        required = ("id", "model", "system", "num_gpus", "layout", "stack", "published")
        missing = [key for key in required if key not in run]
        if missing:
            raise ProfileError(f"{path}: run {run.get('id')!r} lacks {', '.join(missing)}; see the file's header")
    return runs


def read_training_out_of_sample(path: Path = TRAINING_OUT_OF_SAMPLE_YAML) -> list[dict[str, Any]]:
    """The runs of ``training_out_of_sample.yaml`` (each: id, source, model, system, layout, metric, ...)."""
    data = read_yaml_file(path, ProfileError, "a YAML file with a 'runs' list")
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not runs:
        raise ProfileError(f"{path}: expected a non-empty 'runs' list; see the file's header")
    for run in runs:
        if run.get("metric") not in OOS_METRICS:
            raise ProfileError(f"{path}: run {run.get('id')!r} metric {run.get('metric')!r} is not one of "
                               f"{', '.join(OOS_METRICS)}")
    return runs


def read_te_gemm(path: Path = TE_GEMM_YAML) -> dict[str, Any]:
    """``te_gemm_recipes.yaml``: shape, recipes, setups (each: id, gpu, per_layer_ms per mode, optional fprop_ms);
    one-line error on a file that lacks them."""
    data = read_yaml_file(path, ProfileError, "a YAML mapping")
    missing = [key for key in ("shape", "recipes", "setups") if not isinstance(data, dict) or key not in data]
    if missing:
        raise ProfileError(f"{path}: lacks {', '.join(missing)}; see the file's header")
    for setup in data["setups"]:
        lacks = [key for key in ("id", "gpu", "per_layer_ms") if key not in setup]
        if lacks:
            raise ProfileError(f"{path}: setup {setup.get('id')!r} lacks {', '.join(lacks)}; see the file's header")
        unknown = {name for table in setup["per_layer_ms"].values() for name in table} - set(data["recipes"])
        if unknown:
            raise ProfileError(f"{path}: setup {setup['id']!r} names {', '.join(sorted(unknown))}, which 'recipes' "
                               "does not map")
    return data
