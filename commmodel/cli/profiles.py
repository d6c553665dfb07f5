"""``commmodel profiles list|show|validate|schema|links|gpus|from-nccl``."""

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from commmodel.cli.common import JsonOpt, echo, emit_json
from commmodel.io.outpath import check_out_option
from commmodel.io.text_table import format_table
from commmodel.errors import CommModelError, ProfileError
from commmodel.units import format_flops, format_rate, format_size, format_time

app = typer.Typer(
    help="List, show and validate hardware profiles; print the link and GPU catalogues and the schema.",
    no_args_is_help=True,
)


def system_summary(system) -> dict:
    """The one-line facts of a system used by ``profiles list`` (bandwidths unidirectional, GB/s = 1e9 B/s)."""
    up = system.scale_up
    out = system.scale_out
    return {
        "name": system.name,
        "description": system.description,
        "gpu": system.gpu.name,
        "gpus_per_node": system.gpus_per_node,
        "scale_up": up.link,
        "scale_up_kind": up.kind,
        "scale_up_bw_GBps": up.bw_bytes_per_s.value / 1e9,
        "domain_size": up.domain_size,
        "scale_out": out.link if out else None,
        "scale_out_kind": out.kind if out else None,
        "nics_per_node": out.nics_per_node if out else None,
        "node_network_GBps": out.nics_per_node * out.nic_bw_bytes_per_s.value / 1e9 if out else None,
        "node_network_achievable_GBps": out.node_bw_bytes_per_s / 1e9 if out else None,
    }


@app.command("list")
def list_cmd(json_out: JsonOpt = False) -> None:
    """List the shipped systems (network GB/s per node are line rates, unidirectional)."""
    from commmodel.io.profiles import list_systems

    systems = [system_summary(s) for s in list_systems()]
    if json_out:
        emit_json({"systems": systems})
        return
    rows = [
        [s["name"], s["gpu"], s["gpus_per_node"], s["scale_up"], f"{s['scale_up_bw_GBps']:g}", s["domain_size"],
         s["scale_out"] or "-", s["nics_per_node"] or "-",
         f"{s['node_network_GBps']:g}" if s["node_network_GBps"] else "-"]
        for s in systems
    ]
    echo(format_table(rows, ["system", "gpu", "gpus/node", "scale-up", "GB/s/gpu", "domain", "scale-out", "nics",
                             "GB/s/node"], align="lllrrrlrr"))


def _line(label: str, value: str, source: str) -> str:
    return f"  {label:<11} {value:>16}   [{source}]"


def _calibrated_lines(tier) -> list[str]:
    """A tier's fitted Simple-protocol fixed cost and the message sizes its calibration measured, where it has them."""
    lines = []
    if tier.simple_fixed_s is not None:
        lines.append(_line("simple fix", format_time(tier.simple_fixed_s.value), tier.simple_fixed_s.source))
    if tier.calibrated_sizes is not None:
        sizes = tier.calibrated_sizes
        span = f"{format_size(sizes.min_bytes)}-{format_size(sizes.max_bytes)}"
        lines.append(_line("calibrated", span, sizes.source))
    return lines


def _host_lines(resolved) -> list[str]:
    """The host's stated numbers and each calibrated host library's transport (``calibrate fit`` on gloo or MPI)."""
    lines = []
    for field, label, fmt in (("host_cores", "host cores", lambda v: f"{v:g}"),
                              ("host_memory_bw_bytes_per_s", "host mem bw", format_rate),
                              ("host_link_bw_bytes_per_s", "host link", format_rate),
                              ("host_llc_bytes", "host LLC", format_size)):
        value = getattr(resolved, field)
        if value is not None:
            lines.append(_line(label, fmt(value.value), value.source))
    for name, lib in (resolved.host_libraries or {}).items():
        lines.append(f"Host library {name} (calibrated transport inside a node)")
        for label, item, fmt in (("call", lib.call_s, format_time), ("message", lib.message_s, format_time),
                                 ("bw", lib.bw_bytes_per_s, format_rate), ("reduce bw", lib.reduce_bw_bytes_per_s,
                                                                           format_rate)):
            lines.append(_line(label, fmt(item.value), item.source))
    return lines


def _describe(resolved) -> str:
    g = resolved.gpu
    lines = [f"{resolved.name}: {resolved.description}", ""]
    lines.append(f"GPU          {g.name} ({g.description}) x {resolved.gpus_per_node} per node")
    for dtype, flops in g.peak_flops_per_s.items():
        lines.append(_line(f"peak {dtype}", format_flops(flops.value), flops.source))
    lines.append(_line("memory", format_size(g.hbm_bytes.value), g.hbm_bytes.source))
    lines.append(_line("memory bw", format_rate(g.hbm_bw_bytes_per_s.value), g.hbm_bw_bytes_per_s.source))
    lines.append(_line("matmul eff", f"{g.matmul_efficiency.value:.3f}", g.matmul_efficiency.source))
    if g.matmul_efficiency_fp8 is not None:
        lines.append(_line("fp8 mm eff", f"{g.matmul_efficiency_fp8.value:.3f}", g.matmul_efficiency_fp8.source))
    if g.fp8_rowwise_gemm_ratio is not None:
        lines.append(_line("fp8 rowwise", f"x{g.fp8_rowwise_gemm_ratio.value:.3f}", g.fp8_rowwise_gemm_ratio.source))
    up = resolved.scale_up
    lines.append(f"Scale-up     {up.kind} via {up.link}, domain of {up.domain_size} GPUs, "
                 f"achievable {format_rate(up.effective_bw_bytes_per_s)} per GPU")
    lines.append(_line("bw/GPU", format_rate(up.bw_bytes_per_s.value), up.bw_bytes_per_s.source))
    lines.append(_line("efficiency", f"{up.efficiency.value:.3f}", up.efficiency.source))
    lines.append(_line("latency", format_time(up.latency_s.value), up.latency_s.source))
    lines += _calibrated_lines(up)
    if up.in_network_reduction:
        inr = up.in_network_reduction
        lines.append(_line(inr.name, f"{inr.busbw_efficiency.value:.3f}", inr.busbw_efficiency.source))
    out = resolved.scale_out
    if out:
        line_rate = out.nics_per_node * out.nic_bw_bytes_per_s.value
        nics = f"{out.nics_per_node} NIC{'' if out.nics_per_node == 1 else 's'}"
        lines.append(f"Scale-out    {out.kind} via {out.link}, {nics} per node = "
                     f"{format_rate(line_rate)} line, {format_rate(out.node_bw_bytes_per_s)} achievable per node")
        lines.append(_line("bw/NIC", format_rate(out.nic_bw_bytes_per_s.value), out.nic_bw_bytes_per_s.source))
        lines.append(_line("efficiency", f"{out.efficiency.value:.3f}", out.efficiency.source))
        lines.append(_line("latency", format_time(out.latency_s.value), out.latency_s.source))
        lines += _calibrated_lines(out)
        if out.oversubscription != 1.0:
            lines.append(f"  oversubscription {out.oversubscription:g}:1")
        if out.in_network_reduction:
            inr = out.in_network_reduction
            lines.append(_line(inr.name, f"{inr.busbw_efficiency.value:.3f}", inr.busbw_efficiency.source))
    else:
        lines.append("Scale-out    none (single box)")
    lines += _host_lines(resolved)
    for source in resolved.sources:
        lines.append(f"Source       {source}")
    return "\n".join(lines)


@app.command("show")
def show_cmd(
    system: Annotated[str, typer.Argument(help="Profile name (see `profiles list`) or a YAML path.")],
    json_out: JsonOpt = False,
) -> None:
    """Show one system with every number and its source."""
    from commmodel.io.profiles import load_system

    resolved = load_system(system)
    if json_out:
        emit_json(resolved.model_dump(mode="json"))
        return
    echo(_describe(resolved))


def _profile_files(path: Path) -> list[tuple[Path, Path | None]]:
    """The files to check under ``path``, each with the catalogue folder its systems resolve against.

    A directory is a profile library: its links.yaml/gpus.yaml (if present) come first and resolve its
    systems (in ``systems/`` or at the top).
    """
    if not os.path.isdir(path):  # os.path: no OSError for a name too long, the reader says why
        return [(path, None)]
    own = path if (path / "links.yaml").is_file() and (path / "gpus.yaml").is_file() else None
    catalogues = [path / name for name in ("links.yaml", "gpus.yaml") if (path / name).is_file()]
    systems = sorted((path / "systems").glob("*.y*ml")) if (path / "systems").is_dir() else []
    systems += sorted(p for p in path.glob("*.y*ml") if p.name not in {"links.yaml", "gpus.yaml"})
    if not catalogues and not systems:
        raise ProfileError(f"{path}: no YAML files here; give system files or a profile directory")
    return [(f, None) for f in catalogues] + [(f, own) for f in systems]


def _check_file(path: Path, catalogue_dir: Path | None = None) -> dict:
    """Validate one file; catalogue files (links.yaml, gpus.yaml) are checked as catalogues."""
    from commmodel.io.profiles import load_system_file, read_gpu_catalogue, read_link_catalogue

    if path.name == "links.yaml":
        return {"path": str(path), "name": f"link catalogue, {len(read_link_catalogue(path))} links", "ok": True}
    if path.name == "gpus.yaml":
        return {"path": str(path), "name": f"GPU catalogue, {len(read_gpu_catalogue(path))} GPUs", "ok": True}
    return {"path": str(path), "name": load_system_file(path, catalogue_dir).name, "ok": True}


@app.command("validate")
def validate_cmd(
    paths: Annotated[list[Path], typer.Argument(help="System YAML files, catalogue files or profile directories.")],
    json_out: JsonOpt = False,
) -> None:
    """Check profile files; every bad file gets one line naming the file, the field and the fix (exit 1)."""
    checked: list[dict] = []
    failures: list[CommModelError] = []

    def attempt(path: Path, check: Any) -> Any:
        try:
            return check()
        except CommModelError as err:
            if os.environ.get("COMMMODEL_DEBUG"):
                raise
            failures.append(err)
            checked.append({"path": str(path), "name": None, "ok": False, "error": str(err)})
            return None

    for path in paths:
        for file, catalogue_dir in attempt(path, lambda: _profile_files(path)) or []:
            item = attempt(file, lambda: _check_file(file, catalogue_dir))  # noqa: B023 (called at once)
            if item is not None:
                checked.append(item)
    if json_out:
        emit_json({"checked": checked})
    else:
        for item in checked:
            if item["ok"]:
                echo(f"ok  {item['path']} ({item['name']})")
    if failures:
        for err in failures[:-1]:
            typer.echo(f"error: {' '.join(str(err).split())}", err=True)
        raise failures[-1]


@app.command("links")
def links_cmd(json_out: JsonOpt = False) -> None:
    """List the link catalogue (names usable in system files, `--network` and queries)."""
    from commmodel.io.profiles import load_links

    links = load_links()
    records = [
        {"name": s.name, "tier": s.tier, "kind": s.kind, "bw_GBps": s.bw_bytes_per_s.value / 1e9,
         "efficiency": s.efficiency.value, "latency_us": s.latency_s.value * 1e6,
         "in_network_reduction": s.in_network_reduction.name if s.in_network_reduction else None,
         "description": s.description}
        for s in links.values()
    ]
    if json_out:
        emit_json({"links": records})
        return
    rows = [[r["name"], r["tier"], r["kind"], f"{r['bw_GBps']:g}", f"{r['efficiency']:.3g}",
             f"{r['latency_us']:g}", r["in_network_reduction"] or "-"] for r in records]
    echo(format_table(rows, ["link", "tier", "kind", "GB/s", "eff", "alpha us", "reduction"], align="lllrrrl"))
    echo("GB/s: unidirectional line rate per GPU (scale_up) or per NIC (scale_out).")


@app.command("gpus")
def gpus_cmd(json_out: JsonOpt = False) -> None:
    """List the GPU catalogue (dense peaks; matmul efficiency = measured MAMF / peak)."""
    from commmodel.hardware.models import GPU
    from commmodel.io.profiles import load_gpus

    gpus = [GPU.model_validate(data) for data in load_gpus().values()]
    records = [
        {"name": g.name, "description": g.description,
         "peak_TFLOPs": {dtype: f.value / 1e12 for dtype, f in g.peak_flops_per_s.items()},
         "memory_GB": g.hbm_bytes.value / 1e9, "memory_GiB": g.hbm_bytes.value / 2**30,
         "memory_bw_GBps": g.hbm_bw_bytes_per_s.value / 1e9,
         "matmul_efficiency": g.matmul_efficiency.value}
        for g in gpus
    ]
    if json_out:
        emit_json({"gpus": records})
        return
    rows = [[r["name"], _sixteen_bit_peak_text(r["peak_TFLOPs"]), f"{r['memory_GiB']:.4g}", f"{r['memory_bw_GBps']:g}",
             f"{r['matmul_efficiency']:.3g}"] for r in records]
    # capacities are the driver's totals in binary units (an "80 GB" H100 reports 79.65 GiB), bandwidths decimal
    echo(format_table(rows, ["gpu", "bf16/fp16 TFLOP/s", "memory GiB", "memory GB/s", "matmul eff"], align="lrrrr"))


def _sixteen_bit_peak_text(peaks_tflops: dict[str, float]) -> str:
    """The bf16 (else fp16) dense peak, or "-" for a part with neither (a CPU rank has only fp32)."""
    peak_tflops = peaks_tflops.get("bf16", peaks_tflops.get("fp16"))
    return "-" if not peak_tflops else f"{peak_tflops:g}"


@app.command("schema")
def schema_cmd() -> None:
    """Print the JSON schema of a resolved system profile (what `profiles show --json` prints)."""
    from commmodel.hardware.models import System
    from commmodel.io.field_docs import documented_json_schema

    echo(json.dumps(documented_json_schema(System, mode="validation"), indent=2))


@app.command("from-nccl")
def from_nccl_cmd(
    files: Annotated[list[Path], typer.Argument(help="NCCL topology XML (NCCL_TOPO_DUMP_FILE output or an "
                                                     "NCCL_TOPO_FILE) and/or NCCL_DEBUG=INFO logs.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the draft system YAML.",
                                      callback=check_out_option)],
    name: Annotated[str | None, typer.Option("--name", help="Profile name (default: the --out file's stem).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Draft a system profile from what NCCL saw; every field is read from a file (file: line) or assumed."""
    from commmodel.io.nccl_draft import draft_from_nccl, read_nccl_files
    from commmodel.io.nccl_draft_yaml import draft_record, draft_yaml
    from commmodel.errors import ProfileError
    from commmodel.io.outpath import (YAML_SUFFIXES, OutputPathError, check_out_format, refuse_measurements,
                                      replace_checked)
    from commmodel.io.profiles import check_new_profile_name, load_system_file

    if any(os.path.realpath(out) == os.path.realpath(f) for f in files):  # realpath: a symlink loop is no error
        raise OutputPathError(f"--out {out} is one of the input files; the draft would replace it: choose another "
                              f"file, e.g. --out {out.with_suffix('.yaml').name if out.suffix != '.yaml' else 'draft.yaml'}")
    refuse_measurements(out, "a system YAML")
    check_out_format(out, YAML_SUFFIXES, "a system YAML")
    check_new_profile_name(out.stem if name is None else name, OutputPathError,
                           f"--name {name!r}" if name is not None else f"--out {out.name} (its name names the profile)")
    draft = draft_from_nccl(*read_nccl_files(files))
    replace_checked(out, draft_yaml(draft, name or out.stem), load_system_file, ProfileError,  # out kept if it fails
                    f"the draft from {', '.join(str(f) for f in files)}")
    if json_out:
        emit_json({"out": str(out), **draft_record(draft)})
        return
    echo(f"wrote {out} (check it: commmodel profiles validate {out})")
    for title, items in (("read", [f for f in draft.fields if f.status == "read"]),
                         ("assumed", [f for f in draft.fields if f.status == "assumed"]), ("facts", draft.facts)):
        if items:
            echo(f"{title}:")
            echo("\n".join(f"  {f.path} = {f.value}   [{f.source}]" for f in items))
    for note in draft.notes:
        echo(f"note: {note}")
