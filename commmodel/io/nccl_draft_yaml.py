"""A from-nccl :class:`~commmodel.io.nccl_draft.Draft` written out: as terse system YAML with every field's provenance
as a comment (``profiles from-nccl --out``), or as the ``--json`` record."""

from __future__ import annotations

import json
from pathlib import Path

from commmodel.io.nccl_draft import Draft, DraftField


def _comment(f: DraftField) -> str:
    return f"  # {f.source}" if f.source.startswith(f.status) else f"  # {f.status}: {f.source}"


def draft_yaml(draft: Draft, name: str) -> str:
    """The draft as terse system YAML, every field followed by its provenance as a comment."""
    def value(path: str) -> tuple[object, str]:
        f = draft.get(path)
        assert f is not None, path
        return f.value, _comment(f)

    out = [f"# Draft profile written by `commmodel profiles from-nccl` from {', '.join(draft.files)}",
           "# read: the value is stated by that file (file: line); assumed: a catalogue default - check it.",
           f"name: {json.dumps(name)}",
           f"description: {json.dumps('draft from NCCL topology/log: ' + ', '.join(Path(p).name for p in draft.files))}"]
    for key in ("gpu", "gpus_per_node"):
        v, c = value(key)
        out.append(f"{key}: {json.dumps(v)}{c}")
    out.append("scale_up:")
    for key in ("link", "domain_size"):
        v, c = value(f"scale_up.{key}")
        out.append(f"  {key}: {json.dumps(v)}{c}")
    if draft.get("scale_up.in_network_reduction") is not None:
        out.append(f"  in_network_reduction: null{_comment(draft.get('scale_up.in_network_reduction'))}")  # type: ignore[arg-type]
    if draft.get("scale_out") is not None:
        out.append(f"scale_out: null{_comment(draft.get('scale_out'))}")  # type: ignore[arg-type]
    else:
        out.append("scale_out:")
        for key in ("link", "nics_per_node"):
            v, c = value(f"scale_out.{key}")
            out.append(f"  {key}: {json.dumps(v)}{c}")
        speed = draft.get("scale_out.nic_bw_bytes_per_s")
        if speed is not None:
            out.append(f"  nic_bw_bytes_per_s: {{value: {json.dumps(speed.value)}, source: {json.dumps(speed.source)}}}")
    out.append("sources:")
    out.extend(f"  - {json.dumps(f'{f.path} = {f.value} ({f.status}): {f.source}')}" for f in draft.fields + draft.facts)
    return "\n".join(out) + "\n"


def draft_record(draft: Draft) -> dict:
    """The --json form: files, fields (path, value, status, source), facts and notes."""
    def rows(items: list[DraftField]) -> list[dict]:
        return [{"field": f.path, "value": f.value, "status": f.status, "source": f.source} for f in items]
    return {"files": draft.files, "fields": rows(draft.fields), "facts": rows(draft.facts), "notes": draft.notes}
