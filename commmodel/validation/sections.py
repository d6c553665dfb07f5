"""The sections of ``commmodel validate``, in print order.

A **validator** is one section of the report: a name, a title, and a function returning
``{"records": [...], "summary": [...]}`` (plain dicts, JSON-ready), optionally with a ``"text"``
rendering. Adding a section is one entry in :data:`VALIDATORS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from commmodel.validation.collectives import run_collectives
from commmodel.validation.modern import run_modern
from commmodel.validation.moe import run_moe
from commmodel.validation.training import run_training


@dataclass(frozen=True)
class Validator:
    """One section of ``commmodel validate``."""

    name: str
    """Key of the section in the JSON document (e.g. "collectives")."""
    title: str
    """Heading of the human table."""
    run: Callable[[], dict[str, Any]]
    """Returns {"records": [...], "summary": [...]} of plain, JSON-ready dicts."""


VALIDATORS: tuple[Validator, ...] = (
    Validator("collectives", "Collectives vs published nccl-tests rows (commmodel/data/nccl_tests.csv)",
              run_collectives),
    Validator("training", "Training steps vs published Megatron-LM rows (commmodel/data/training_throughput.csv)",
              run_training),
    Validator("modern", "Today's training stacks vs published runs, each under the stack it ran "
              "(commmodel/data/training_modern.yaml)", run_modern),
    Validator("moe", "Mixture-of-experts training runs vs published throughput (commmodel/data/training_moe.yaml)",
              run_moe),
)
"""Every section, in print order."""
