"""Phrasings a user would type: every one answers, with the system, model and assumptions it should."""

from __future__ import annotations

import pytest

from commmodel.io.profiles import list_systems, load_gpus, load_links
from commmodel.query.answer import QueryOverrides, answer_query
from commmodel.query.parse import parse_query


@pytest.fixture(scope="module")
def catalogues():
    return {"systems": {s.name: s for s in list_systems()}, "links": load_links(), "gpus": load_gpus()}


def ask(catalogues, text):
    return answer_query(parse_query(text, tuple(catalogues["systems"])), catalogues, QueryOverrides())


def fields(doc):
    return {a["field"]: a["value"] for a in doc["assumptions"]}


PHRASINGS = [
    # (query, expected answer kind, substring of the system name)
    ("8 L40S, 1B", "plan", "l40s"),
    ("16 L40S, 1B", "plan", "l40s"),
    ("8 V100, 1B params", "plan", "v100"),
    ("16 V100 over 100GbE, gpt3-1.3b", "plan", "v100"),
    ("64 A100 over IB HDR, llama 3 8b", "plan", "dgx-a100"),
    ("32 H100, llama3-70b, batch 1024", "plan", "dgx-h100"),
    ("2 nodes of 8 H100, llama 3 8b", "plan", "dgx-h100"),
    ("16 H200 with NDR, 7B", "plan", "hgx-h200"),
    ("64 B200, 70B", "plan", "b200"),
    ("72 GB200, llama3-405b", "plan", "gb200-nvl72"),  # the vendor-neutral rack before Azure's and GCP's VMs
    ("72 GB300, llama3-405b", "plan", "gb300-nvl72"),
    ("16 H200 on GCP, 8B params", "plan", "gcp-a3-ultra"),
    ("8 4090, 1B", "plan", "4090"),
    ("8 RTX 4090 without p2p, 350M", "plan", "4090"),
    ("llama 3 8b on p5", "plan", "aws-p5"),
    ("llama3-70b on a3-mega, 128 GPUs", "plan", "gcp-a3-mega"),
    ("mixtral on 64 H100", "plan", "dgx-h100"),
    ("mixtral 8x7b, 32 A100", "plan", "dgx-a100"),
    ("7B on 16 A100, batch 4M tokens", "plan", "dgx-a100"),
    ("13B on 64 H100, seq 8k", "plan", "dgx-h100"),
    ("70B on 256 H100 on azure", "plan", "azure-nd-h100"),
    ("llama3-8b on 64 H100 on aws", "plan", "aws-p5"),
    ("1B, 4 GPUs, PCIe", "plan", "pcie"),
    ("16 A100 PCIe, 7B", "plan", "a100-pcie"),
    ("GPT-3 175B on 1024 A100s", "plan", "dgx-a100"),
    ("8 GPUs, 1B params, IB NDR", "plan", "dgx-h100"),
    ("175B on 512 H100 over RoCE", "plan", "roce"),
    ("all-reduce 512MB on 16 A100 across 2 nodes with HDR", "collective", "dgx-a100"),
    ("alltoall 2 GiB on 8 H100", "collective", "dgx-h100"),
    ("reduce-scatter 1GB on 32 H100", "collective", "dgx-h100"),
    ("all-gather 256 MiB on 64 GPUs over 400GbE", "collective", "400g"),
    ("broadcast 1GB on 8 GPUs", "collective", "dgx-h100"),
    ("all-reduce 1GB on 16 V100", "collective", "v100"),
]


@pytest.mark.parametrize(("text", "kind", "system"), PHRASINGS)
def test_phrasing_answers(catalogues, text, kind, system):
    doc = ask(catalogues, text)
    answer = doc["answer"]
    assert answer["kind"] == kind
    assert system in answer["system"]
    if kind == "plan":
        assert answer["best_layouts"], f"{text!r} printed no layout"


@pytest.mark.parametrize("text", ["what if I switch from 100GbE to NDR, 64 A100, 7B", "what if 8 A100 vs 8 H100, 13B"])
def test_what_if_phrasings(catalogues, text):
    doc = ask(catalogues, text)
    assert len(doc["answer"]["targets"]) == 2


def test_v100_is_composed_from_the_catalogue_in_fp16(catalogues):
    doc = ask(catalogues, "8 V100, 1B params")
    notes = fields(doc)
    assert "nvlink2" in notes["system"] and notes["dtype"] == "fp16"  # Volta has no bf16 tensor cores
    system = doc["answer"]["system"]
    assert system.startswith("8x-v100")


def test_pcie_request_composes_a_pcie_node(catalogues):
    notes = fields(ask(catalogues, "1B, 4 GPUs, PCIe"))
    assert notes["system"].startswith("8x-h100-pcie") and notes["system"].endswith("pcie5")


def test_family_alone_names_its_preset(catalogues):
    assert ask(catalogues, "mixtral on 64 H100")["answer"]["model"].startswith("mixtral-8x7b")
