"""Presets against published parameter totals, shapes from a bare count, model YAML files."""

from __future__ import annotations

import re

import pytest

from commmodel.errors import WorkloadError
from commmodel.io.models import load_model, resolve_model
from commmodel.workload import PRESETS, TransformerModel, get_model


@pytest.mark.parametrize(
    ("name", "published", "rel_tol", "source"),
    [
        # Exact totals of the released checkpoints (Hugging Face model cards / safetensors index).
        ("llama2-7b", 6_738_415_616, 1e-9, "meta-llama/Llama-2-7b-hf"),
        ("llama2-13b", 13_015_864_320, 1e-9, "meta-llama/Llama-2-13b-hf"),
        ("llama2-70b", 68_976_648_192, 1e-9, "meta-llama/Llama-2-70b-hf"),
        ("llama3-8b", 8_030_261_248, 1e-9, "meta-llama/Meta-Llama-3-8B"),
        ("llama3-70b", 70_553_706_496, 1e-9, "meta-llama/Meta-Llama-3-70B"),
        ("llama3-405b", 405_853_388_800, 1e-9, "meta-llama/Llama-3.1-405B"),
        ("bloom-176b", 176_247_271_424, 1e-9, "bigscience/bloom model card: 176,247,271,424 parameters"),
        ("mixtral-8x7b", 46_702_792_704, 1e-9, "mistralai/Mixtral-8x7B-v0.1: 46.7B total"),
        # Rounded totals printed in the papers.
        ("gpt3-175b", 175e9, 0.005, "Brown et al. 2020 Table 2.1"),
        ("gpt3-13b", 13e9, 0.02, "Brown et al. 2020 Table 2.1 (d_model 5120 used, see presets.py)"),
        ("gpt3-6.7b", 6.7e9, 0.01, "Brown et al. 2020 Table 2.1"),
        ("gpt3-125m", 125e6, 0.005, "Brown et al. 2020 Table 2.1"),
        ("narayanan-1.7b", 1.7e9, 0.03, "Narayanan et al. 2021 Table 1 (label rounded to 0.1B)"),
        ("narayanan-18.4b", 18.4e9, 0.003, "Narayanan et al. 2021 Table 1"),
        ("narayanan-145.6b", 145.6e9, 0.001, "Narayanan et al. 2021 Table 1"),
        ("narayanan-529.6b", 529.6e9, 0.001, "Narayanan et al. 2021 Table 1"),
        ("narayanan-1t", 1008.0e9, 0.001, "Narayanan et al. 2021 Table 1 (1008.0B)"),
        ("korthikanti-22b", 22e9, 0.01, "Korthikanti et al. 2022 Table 3"),
        ("nemotron4-15b", 15.7e9, 0.01, "arXiv:2402.16819 §2: 12.5B non-embedding + 3.2B embedding parameters"),
        ("nemotron4-340b", 340e9, 0.005, "arXiv:2406.11704: 340B"),
    ],
)
def test_preset_parameter_totals(name: str, published: float, rel_tol: float, source: str) -> None:
    assert PRESETS[name].num_params == pytest.approx(published, rel=rel_tol), source


def test_narayanan_closed_form() -> None:
    """P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)) (Narayanan et al. 2021 §5.1) for every Megatron shape."""
    for name, m in PRESETS.items():
        if name.startswith("narayanan-"):
            l, h, v, s = m.num_layers, m.hidden_size, m.vocab_size, m.seq_len
            closed = 12 * l * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * l * h))
            assert m.num_params == pytest.approx(closed + 2 * h, rel=1e-12)  # + the final LayerNorm


def test_moe_active_parameters() -> None:
    """Mixtral 8x7B: 12.9B parameters active per token (Jiang et al. 2024)."""
    assert PRESETS["mixtral-8x7b"].num_active_params == pytest.approx(12.9e9, rel=0.01)


@pytest.mark.parametrize("count", ["125M", "350M", "760M", "1B", "1.3B", "2B", "3B", "5B", "7e9", "8B", "13B", "20B",
                                   "30B", "40B", "70B", "100B", "175B", "300B", "500B", "1T"])
def test_shape_from_count(count: str) -> None:
    from commmodel.units import parse_count

    m = get_model(count)
    assert m.num_params == pytest.approx(parse_count(count), rel=0.03)
    assert m.hidden_size % m.num_heads == 0
    if m.hidden_size >= 2048:
        assert m.num_heads % 8 == 0 and m.num_layers % 4 == 0  # tp 8 and pp 4 divide a derived shape


def test_aliases_and_unknown() -> None:
    assert get_model("GPT3") is PRESETS["gpt3-175b"]
    assert get_model("llama-3-8b") is PRESETS["llama3-8b"]
    with pytest.raises(WorkloadError, match="unknown model 'llama9-1b'.*close: llama"):
        get_model("llama9-1b")
    with pytest.raises(WorkloadError, match="too small"):
        get_model("1k")


def test_defaults_derive_widths() -> None:
    m = TransformerModel(name="t", num_layers=2, hidden_size=4096, num_heads=32, vocab_size=100, seq_len=8, gated_mlp=True)
    assert m.num_kv_heads == 32 and m.ffn_hidden_size == 11008  # Llama's 8h/3 rounded up to 256
    with pytest.raises(ValueError, match="hidden_size 100 is not a multiple of num_heads 3"):
        TransformerModel(name="t", num_layers=2, hidden_size=100, num_heads=3, vocab_size=10, seq_len=8)


def test_model_yaml(tmp_path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("preset: llama2-7b\nnum_layers: 16\nseq_len: 8192\n")
    m = resolve_model(str(path))
    assert (m.name, m.num_layers, m.seq_len, m.hidden_size) == ("mine", 16, 8192, 4096)
    assert resolve_model("llama2-7b") is PRESETS["llama2-7b"]
    assert resolve_model("7e9").num_params == get_model("7e9").num_params
    with pytest.raises(WorkloadError, match="is a file; read it with commmodel.io.models.resolve_model"):
        get_model(str(path))  # the core stays pure: no file I/O in workload
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_layers: 2\nhidden_size: -4\nnum_heads: 2\nvocab_size: 10\nseq_len: 8\n")
    with pytest.raises(WorkloadError, match="bad.yaml: field hidden_size"):
        load_model(bad)
    with pytest.raises(WorkloadError, match="no such file; give a preset name, a parameter count"):
        load_model(tmp_path / "missing.yaml")


def test_workload_imports_no_io() -> None:
    """Purity (DESIGN §1): the workload package never imports commmodel.io."""
    import ast
    from pathlib import Path

    import commmodel.workload as workload

    for file in Path(workload.__file__).parent.glob("*.py"):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module] + [
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [n for n in names if n.startswith("commmodel.io")], file.name


def test_shape_from_count_stays_within_3_percent_over_four_decades() -> None:
    import numpy as np

    from commmodel.workload.presets import shape_for_params

    tp8 = []
    for count in np.geomspace(125e6, 1e12, 41):
        m = shape_for_params(float(count))
        assert m.num_params == pytest.approx(count, rel=0.03), m.describe()
        assert m.hidden_size % m.num_heads == 0 and m.num_heads % 2 == 0
        assert m.num_layers < 8 or m.num_layers % 4 == 0
        if count >= 1e9:
            tp8.append(m.num_heads % 8 == 0)
    # 8-way tensor parallelism divides the heads unless no width within 3% allows it (1.85B: 30 heads)
    assert sum(tp8) >= 0.9 * len(tp8)


def test_one_billion_is_not_915m() -> None:
    m = get_model("1B")
    assert (m.num_layers, m.hidden_size, m.num_heads) == (32, 1536, 24)  # 988M, -1.2%
    assert get_model("1.3B").hidden_size == 2048 and get_model("1.3B").num_layers == 24  # GPT-3 XL's shape


@pytest.mark.parametrize(("spec", "fragment"), [("-7B", "it is negative"), ("nan", "not a finite number"),
                                                ("1e400B", "not a finite number"), ("7Q", "unknown count suffix 'Q'")])
def test_a_spec_that_starts_like_a_count_gets_the_counts_error(spec: str, fragment: str) -> None:
    """"-7B", "nan", "1e400B" were "unknown model" with the 650-character list of presets."""
    said = rf"model '{re.escape(spec)}' is not a parameter count to train: .*{fragment}"
    with pytest.raises(WorkloadError, match=said):
        get_model(spec)
