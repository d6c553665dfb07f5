"""Field docstrings reach JSON schemas without ``use_attribute_docstrings`` (issue 17: no source parsing at import).

The oracle is pydantic itself: a subprocess imports the same models with ``use_attribute_docstrings=True``
forced into every ``ConfigDict`` and prints their schemas; ours must be identical, key for key.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from commmodel.calibrate.bench import BenchConfig
from commmodel.hardware.catalogue import LinkSpec
from commmodel.hardware.models import GPU, InNetworkReduction, ScaleOutTier, ScaleUpTier, Sourced, System
from commmodel.hardware.cluster import Cluster
from commmodel.io.field_docs import documented_json_schema, field_docs
from commmodel.planner.space import SearchSpace
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions
from commmodel.step.stacks import Behaviour, Stack
from commmodel.workload.model import TransformerModel

MODELS = [System, Cluster, GPU, ScaleUpTier, ScaleOutTier, InNetworkReduction, LinkSpec,
          TransformerModel, Layout, StepOptions, SearchSpace, BenchConfig, Stack, Behaviour]

_PYDANTIC_WITH_DOCSTRINGS = """
import json, sys, importlib
import pydantic
plain = pydantic.ConfigDict
pydantic.ConfigDict = lambda **kw: plain(**kw, use_attribute_docstrings=True)
out = {}
for path in sys.argv[1:]:
    module, name = path.rsplit(".", 1)
    out[path] = getattr(importlib.import_module(module), name).model_json_schema(mode="validation")
print(json.dumps(out))
"""


def _path(model: type) -> str:
    return f"{model.__module__}.{model.__qualname__}"


def test_schemas_equal_pydantic_use_attribute_docstrings():
    done = subprocess.run([sys.executable, "-c", _PYDANTIC_WITH_DOCSTRINGS, *map(_path, MODELS)],
                          capture_output=True, text=True, check=True)
    expected = json.loads(done.stdout)
    for model in MODELS:
        ours = json.loads(json.dumps(documented_json_schema(model, mode="validation")))
        assert ours == expected[_path(model)], model.__name__


def test_models_no_longer_parse_source_at_import():
    for model in MODELS:
        assert not model.model_config.get("use_attribute_docstrings"), model.__name__


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_field_has_a_docstring(model):
    assert set(model.model_fields) - set(field_docs(model)) == set()


def test_subclass_and_generic_inherit_the_base_docstrings():
    docs = field_docs(Sourced[float])
    assert docs["source"].startswith("Where the number comes from")
    assert set(field_docs(LinkSpec)) >= set(LinkSpec.model_fields)


def test_profiles_schema_every_property_is_described():
    schema = documented_json_schema(System)
    blocks = [schema, *schema["$defs"].values()]
    missing = [name for block in blocks for name, prop in block.get("properties", {}).items()
               if not prop.get("description")]
    assert missing == []
    assert schema["$defs"]["GPU"]["properties"]["hbm_bytes"]["description"].startswith(
        "Device memory capacity as the driver reports it")
