"""Hugging Face config.json → TransformerModel: parameter counts against the published totals.

Fixtures hold the published config.json values (huggingface.co/<repo>/blob/main/config.json).
Totals: Llama-3-8B 8,030,261,248 (meta-llama/Meta-Llama-3-8B, safetensors metadata "8.03B params");
Mistral-7B-v0.1 7.24B (mistralai/Mistral-7B-v0.1, "7.24B params"); Qwen2-7B 7.62B (Qwen/Qwen2-7B,
"7.62B params"; the card: "7.07B non-embedding"). Tolerance 1% (the issue's bar)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import WorkloadError
from commmodel.io.hf_config import model_from_hf
from commmodel.io.models import resolve_model

HF = Path(__file__).parent / "fixtures" / "hf"
PUBLISHED = {"llama-3-8b": 8.03e9, "mistral-7b-v0.1": 7.24e9, "qwen2-7b": 7.62e9}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_within_one_percent_of_published(name):
    model = resolve_model(str(HF / f"{name}.json"))
    assert model.num_params == pytest.approx(PUBLISHED[name], rel=0.01)
    assert model.gated_mlp and model.norm == "rmsnorm" and not model.tied_embeddings


def test_qwen2_non_embedding_count():
    model = model_from_hf(HF / "qwen2-7b.json")
    non_embedding = model.num_params - model.vocab_size * model.hidden_size  # Qwen counts the LM head in
    assert non_embedding == pytest.approx(7.07e9, rel=0.01)


def test_folder_holding_config_json(tmp_path):
    shutil.copy(HF / "mistral-7b-v0.1.json", tmp_path / "config.json")
    assert resolve_model(str(tmp_path)).num_kv_heads == 8


def test_mixtral_experts_are_read(tmp_path):
    cfg = (HF / "mistral-7b-v0.1.json").read_text().replace('"vocab_size"', '"num_local_experts": 8, '
                                                               '"num_experts_per_tok": 2, "vocab_size"')
    (tmp_path / "config.json").write_text(cfg)
    model = model_from_hf(tmp_path)
    assert (model.num_experts, model.experts_per_token) == (8, 2)
    assert model.num_params == pytest.approx(46.7e9, rel=0.01)  # Mixtral-8x7B model card: 46.7B total


def test_missing_fields_is_one_cli_line():
    bad = HF / "missing-fields.json"
    with pytest.raises(WorkloadError, match="num_hidden_layers, vocab_size"):
        model_from_hf(bad)
    out = CliRunner().invoke(app, ["estimate", "--model", str(bad), "--gpus", "8", "--system", "dgx-a100",
                                   "--tp", "1", "--pp", "1"])
    assert out.exit_code == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and str(bad) in lines[0]


def test_qwen3_configs_norm_every_query_and_key_head(tmp_path):
    """Qwen3 (model_type qwen3 / qwen3_moe) builds q_norm and k_norm in every attention block; config.json has no
    field for it, so the model type decides. Qwen2 has none."""
    cfg = (HF / "qwen2-7b.json").read_text().replace('"model_type": "qwen2"', '"model_type": "qwen3"')
    assert '"model_type": "qwen3"' in cfg
    (tmp_path / "config.json").write_text(cfg)
    qwen3 = model_from_hf(tmp_path)
    assert qwen3.qk_layernorm and not model_from_hf(HF / "qwen2-7b.json").qk_layernorm
    assert qwen3.qk_norm_width == qwen3.num_heads * qwen3.head_dim + qwen3.num_kv_heads * qwen3.head_dim


def test_a_field_given_twice_is_refused(tmp_path):
    """A config.json with hidden_size twice (4096, then 8192) loaded as the 8192-wide model, without a word."""
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,'
                      ' "intermediate_size": 11008, "vocab_size": 32000, "hidden_size": 8192}')
    with pytest.raises(WorkloadError, match=r"the field 'hidden_size' is given twice \(4096, then 8192\): keep one"):
        model_from_hf(config)
