"""``commmodel validate``: the model against the published measurements it ships (DESIGN §8, §9).

Prints every registered section of :mod:`commmodel.validation.sections` (collectives vs nccl-tests rows;
other parts of commmodel add theirs). Misses are reported, not hidden: each setup × size band says
PASS or FAIL against DESIGN §9's targets. The exit code stays 0 (a report is not an input error).
"""

from __future__ import annotations

from typing import Any

from commmodel.cli.common import JsonOpt, echo, emit_json


def validate_cmd(json_out: JsonOpt = False) -> None:
    """Compare the model with every published measurement shipped in commmodel/data (error per setup and size band)."""
    from commmodel.validation.report import render_collective_summary
    from commmodel.validation.sections import VALIDATORS

    document: dict[str, Any] = {}
    for validator in VALIDATORS:
        document[validator.name] = validator.run()
    if json_out:
        emit_json(document)
        return
    for validator in VALIDATORS:
        section = document[validator.name]
        echo(validator.title)
        echo("=" * len(validator.title))
        if validator.name == "collectives":
            echo(render_collective_summary(section["summary"], section.get("bands"), section.get("libraries")))
        elif "text" in section:
            echo(section["text"])
        else:
            for line in section.get("summary", []):
                echo(str(line))
        echo()
