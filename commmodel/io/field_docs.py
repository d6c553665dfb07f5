"""Field docstrings as JSON-schema descriptions, read from the source only when a schema is asked for.

Every pydantic field in commmodel has a docstring on the line below it (STYLE §3). Pydantic's
``use_attribute_docstrings=True`` turns those into ``description``s, but it parses each class's
module source while the class is built, i.e. at import (60-160 ms of every command's start-up,
issue 17). Here the same docstrings are read with :mod:`ast` once per module, when
``commmodel profiles schema`` (or a notebook) asks for a schema, and the schema is byte-identical
to what pydantic printed with the setting on (``tests/test_field_docs.py`` checks against pydantic's
own extractor).
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue


def _attribute_docs(body: list[ast.stmt]) -> dict[str, str]:
    """``{field: docstring}`` for each ``name: type`` statement followed by a string (pydantic's rule)."""
    docs: dict[str, str] = {}
    for stmt, after in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


@functools.cache
def _module_docs(module_name: str) -> dict[str, dict[str, str]]:
    """``{class qualname: {field: docstring}}`` for every class in a module's source (parsed once)."""
    module = sys.modules.get(module_name)
    try:
        tree = ast.parse(inspect.getsource(module)) if module is not None else None
    except (OSError, TypeError):  # no source shipped (frozen app, zip without .py)
        return {}
    found: dict[str, dict[str, str]] = {}

    def walk(nodes: list[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                found[prefix + node.name] = _attribute_docs(node.body)
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body if tree else [], "")
    return found


def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` of a class and its bases (a subclass's docstring wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        origin = getattr(klass, "__pydantic_generic_metadata__", {}).get("origin")
        if origin is not None:  # Sourced[float] has no source of its own: Sourced's is the one
            continue
        docs.update(_module_docs(klass.__module__).get(klass.__qualname__, {}))
    return docs


class _DocumentedSchema(GenerateJsonSchema):
    """Pydantic's JSON schema with each field's docstring as its ``description``.

    As with ``use_attribute_docstrings``, the docstring replaces a description that comes from the
    field's type (a unit type's "A quantity with its unit ..."); ``Field(description=...)`` wins.
    """

    def model_schema(self, schema: Any) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        cls = schema["cls"]
        properties = json_schema.get("properties", {})
        for name, doc in field_docs(cls).items():
            if name in properties and cls.model_fields[name].description is None:
                properties[name]["description"] = doc
        return json_schema


def documented_json_schema(model: type[BaseModel], mode: str = "validation") -> dict[str, Any]:
    """``model.model_json_schema(mode=mode)`` with every field's docstring as its description."""
    return model.model_json_schema(mode=mode, schema_generator=_DocumentedSchema)  # type: ignore[arg-type]
