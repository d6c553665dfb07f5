"""``commmodel profiles list|show|validate|schema``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from commmodel.cli.common import JsonOpt, echo, emit_json, format_table
from commmodel.errors import ProfileError
from commmodel.units import format_flops, format_rate, format_size, format_time

app = typer.Typer(help="List, show, validate hardware profiles and print their schema.", no_args_is_help=True)


def system_summary(system) -> dict:
    """The one-line facts of a system used by ``profiles list``."""
    out = system.scale_out
    return {
        "name": system.name,
        "description": system.description,
        "gpu": system.gpu.name,
        "gpus_per_node": system.gpus_per_node,
        "scale_up": system.scale_up.link,
        "scale_up_bw_GBps": system.scale_up.bw_bytes_per_s.value / 1e9,
        "domain_size": system.scale_up.domain_size,
        "scale_out": out.link if out else None,
        "nics_per_node": out.nics_per_node if out else None,
        "node_network_GBps": out.nics_per_node * out.nic_bw_bytes_per_s.value / 1e9 if out else None,
    }


@app.command("list")
def list_cmd(json_out: JsonOpt = False) -> None:
    """List the shipped systems."""
    from commmodel.io.profiles import list_systems

    systems = [system_summary(s) for s in list_systems()]
    if json_out:
        emit_json({"systems": systems})
        return
    rows = [
        [s["name"], s["gpu"], s["gpus_per_node"], s["scale_up"], f"{s['scale_up_bw_GBps']:g}",
         s["scale_out"] or "-", s["nics_per_node"] or "-",
         f"{s['node_network_GBps']:g}" if s["node_network_GBps"] else "-"]
        for s in systems
    ]
    echo(format_table(rows, ["system", "gpu", "gpus/node", "scale-up", "GB/s/gpu", "scale-out", "nics", "GB/s/node"],
                      align="lllrrlrr"))


@app.command("show")
def show_cmd(
    system: Annotated[str, typer.Argument(help="Profile name or YAML path.")],
    json_out: JsonOpt = False,
) -> None:
    """Show one system with every number and its source."""
    from commmodel.io.profiles import load_system

    resolved = load_system(system)
    if json_out:
        emit_json(resolved.model_dump(mode="json"))
        return
    g = resolved.gpu
    lines = [f"{resolved.name}: {resolved.description}", ""]
    lines.append(f"GPU          {g.name} ({g.description}) x {resolved.gpus_per_node} per node")
    for dtype, flops in g.peak_flops_per_s.items():
        lines.append(f"  peak {dtype:<6} {format_flops(flops.value):>16}   [{flops.source}]")
    lines.append(f"  HBM         {format_size(g.hbm_bytes.value):>16}   [{g.hbm_bytes.source}]")
    lines.append(f"  HBM bw      {format_rate(g.hbm_bw_bytes_per_s.value):>16}   [{g.hbm_bw_bytes_per_s.source}]")
    lines.append(f"  matmul eff  {g.matmul_efficiency.value:>16.3f}   [{g.matmul_efficiency.source}]")
    up = resolved.scale_up
    lines.append(f"Scale-up     {up.kind} via {up.link}, domain of {up.domain_size} GPUs")
    lines.append(f"  bw/GPU      {format_rate(up.bw_bytes_per_s.value):>16}   [{up.bw_bytes_per_s.source}]")
    lines.append(f"  efficiency  {up.efficiency.value:>16.3f}   [{up.efficiency.source}]")
    lines.append(f"  latency     {format_time(up.latency_s.value):>16}   [{up.latency_s.source}]")
    if up.in_network_reduction:
        inr = up.in_network_reduction
        lines.append(f"  {inr.name:<11} {inr.busbw_efficiency.value:>16.3f}   [{inr.busbw_efficiency.source}]")
    out = resolved.scale_out
    if out:
        lines.append(f"Scale-out    {out.kind} via {out.link}, {out.nics_per_node} NICs per node")
        lines.append(f"  bw/NIC      {format_rate(out.nic_bw_bytes_per_s.value):>16}   [{out.nic_bw_bytes_per_s.source}]")
        lines.append(f"  efficiency  {out.efficiency.value:>16.3f}   [{out.efficiency.source}]")
        lines.append(f"  latency     {format_time(out.latency_s.value):>16}   [{out.latency_s.source}]")
        if out.in_network_reduction:
            inr = out.in_network_reduction
            lines.append(f"  {inr.name:<11} {inr.busbw_efficiency.value:>16.3f}   [{inr.busbw_efficiency.source}]")
    else:
        lines.append("Scale-out    none (single box)")
    for source in resolved.sources:
        lines.append(f"Source       {source}")
    echo("\n".join(lines))


@app.command("validate")
def validate_cmd(
    paths: Annotated[list[Path], typer.Argument(help="System YAML files to check.")],
    json_out: JsonOpt = False,
) -> None:
    """Check user profile files; exit 1 naming the file, field and fix for the first bad one."""
    from commmodel.io.profiles import load_system_file

    checked = []
    for path in paths:
        system = load_system_file(path)
        checked.append({"path": str(path), "name": system.name, "ok": True})
    if json_out:
        emit_json({"checked": checked})
    else:
        for item in checked:
            echo(f"ok  {item['path']} ({item['name']})")


@app.command("schema")
def schema_cmd() -> None:
    """Print the JSON schema of a resolved system profile."""
    from commmodel.hardware.models import System

    if not hasattr(System, "model_json_schema"):  # pragma: no cover - pydantic v1 is not supported
        raise ProfileError("pydantic v2 is required for the schema")
    echo(json.dumps(System.model_json_schema(mode="validation"), indent=2))
