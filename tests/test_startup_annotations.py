"""Modules whose annotations pydantic, typer or typing.NamedTuple read keep them as objects (issue 17, start-up).

With ``from __future__ import annotations`` every annotation is a string, and pydantic (building a model
class) and typer (building a command's options) ``eval()`` each one: compiling 300-odd strings took ~3 ms of
a ~0.2 s command; ``typing.NamedTuple`` compiles each of its fields' strings into a ``ForwardRef`` (~4 µs a
field, ~230 fields on a query's path). Without it Python evaluates them once, when the module runs, with no
compile step. So a module that defines a pydantic model, a typer option or a NamedTuple does not postpone
its annotations."""

import __future__
import ast
import importlib
import pkgutil
import typing
from pathlib import Path

import pydantic

import commmodel

PACKAGE = Path(commmodel.__file__).resolve().parent


def _postponed(module_name: str) -> bool:
    return importlib.import_module(module_name).__dict__.get("annotations") is __future__.annotations


def test_pydantic_model_modules_do_not_postpone_annotations() -> None:
    for info in pkgutil.walk_packages(commmodel.__path__, "commmodel."):
        importlib.import_module(info.name)
    models = {cls.__module__ for cls in _subclasses(pydantic.BaseModel) if cls.__module__.startswith("commmodel.")}
    assert len(models) >= 8  # hardware, workload, step options/layout/stacks, planner space, calibrate bench
    assert sorted(m for m in models if _postponed(m)) == []


def test_typer_option_modules_do_not_postpone_annotations() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "typer.Option(" not in source and "typer.Argument(" not in source:
            continue
        tree = ast.parse(source)
        if any(isinstance(node, ast.ImportFrom) and node.module == "__future__" and
               any(a.name == "annotations" for a in node.names) for node in tree.body):
            offenders.append(path.relative_to(PACKAGE).as_posix())
    assert offenders == []


def test_named_tuple_modules_do_not_postpone_annotations() -> None:
    for info in pkgutil.walk_packages(commmodel.__path__, "commmodel."):
        importlib.import_module(info.name)
    modules = {cls.__module__ for cls in _subclasses(tuple)
               if typing.NamedTuple in getattr(cls, "__orig_bases__", ()) and cls.__module__.startswith("commmodel.")}
    assert len(modules) >= 15  # query records, registries' entries, step/planner/collective array bundles
    assert sorted(m for m in modules if _postponed(m)) == []


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found
