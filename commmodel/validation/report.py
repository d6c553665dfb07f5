"""Plain-text tables for the validation sections (shared by ``commmodel validate`` and benchmarks/)."""

from __future__ import annotations

from typing import Any


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _ruled(head: str, body: list[str], footer: str | None = None) -> str:
    """A header line, a rule as wide as it, the body lines and an optional footer (after a blank line)."""
    return "\n".join([head, "-" * len(head), *body, *([f"\n{footer}"] if footer is not None else [])])


def render_collective_summary(summary: list[dict[str, Any]], bands: list[dict[str, Any]] | None = None,
                              libraries: list[dict[str, Any]] | None = None) -> str:
    """One line per setup × band (rows, median, worst, the setup's target, PASS/FAIL), then one line per
    band over the setups when ``bands`` is given and one per library × band when ``libraries`` is."""
    head = f"{'setup':<34} {'band':<5} {'rows':>4}  {'median':>8} {'worst':>8}  {'target':<22} {'result':<6}"
    body = []
    for s in summary:
        if s["band"] == "small":
            med, worst = f"x{s['median_factor']:.2f}", f"x{s['worst']:.2f}"
        else:
            med, worst = f"{s['median'] * 100:.1f}%", _pct(s["worst"])
        verdict = "PASS" if s["passed"] else "FAIL"
        body.append(f"{s['setup_id']:<34} {s['band']:<5} {s['rows']:>4}  {med:>8} {worst:>8}  {s['target']:<22} {verdict:<6}")
    passed = sum(1 for s in summary if s["passed"])
    footer = (f"{passed} of {len(summary)} setup×band cells meet DESIGN §9 (small: median time factor "
              f"max(pred/meas, meas/pred), worst signed ratio; mid/large: median |busbw error|, worst signed)")
    if bands:
        footer += "\n\n" + render_band_summary(bands)
    if libraries:
        footer += "\n\n" + render_library_summary(libraries)
    return _ruled(head, body, footer)


def render_library_summary(libraries: list[dict[str, Any]]) -> str:
    """One line per library × band: median of its setups' medians, worst setup, target, setups over it."""
    head = (f"{'library':<7} {'band':<5} {'setups':>6}  {'median':>8}  {'worst setup':<34} {'worst':>7}  "
            f"{'target':<24} result  setups over target")
    body = []
    for b in libraries:
        fmt = (lambda v: f"x{v:.2f}") if b["band"] == "small" else (lambda v: f"{v * 100:.1f}%")
        body.append(f"{b['library']:<7} {b['band']:<5} {b['setups']:>6}  {fmt(b['median']):>8}  "
                    f"{b['worst_setup']:<34} {fmt(b['worst']):>7}  {b['target']:<24} "
                    f"{'PASS' if b['passed'] else 'FAIL':<6}  {', '.join(b['setups_over_target']) or '-'}")
    return _ruled(head, body)


def render_band_summary(bands: list[dict[str, Any]]) -> str:
    """One line per size band over the setups: median of the setup medians, worst setup, PASS/FAIL."""
    head = f"{'band':<5} {'setups':>6}  {'median':>8}  {'worst setup':<34} {'worst':>7}  {'target':<36} result"
    body = []
    for b in bands:
        fmt = (lambda v: f"x{v:.2f}") if b["band"] == "small" else (lambda v: f"{v * 100:.1f}%")
        body.append(f"{b['band']:<5} {b['setups']:>6}  {fmt(b['median']):>8}  {b['worst_setup']:<34} "
                    f"{fmt(b['worst']):>7}  {b['target']:<36} {'PASS' if b['passed'] else 'FAIL'}")
    return _ruled(head, body)


def render_collective_rows(records: list[dict[str, Any]]) -> str:
    """One line per published row: measured vs predicted time and busbw, the algorithm that won."""
    head = (f"{'setup':<34} {'op':<14} {'n':>3} {'size':>12} {'meas us':>10} {'pred us':>10} {'ratio':>6} "
            f"{'meas bus':>9} {'pred bus':>9} {'err':>7}  algorithm")
    return _ruled(head, [
        f"{r['setup_id']:<34} {r['op']:<14} {r['num_ranks']:>3} {int(r['size_bytes']):>12} "
        f"{r['measured_time_s'] * 1e6:>10.2f} {r['predicted_time_s'] * 1e6:>10.2f} {r['time_ratio']:>6.2f} "
        f"{r['measured_busbw_GBps']:>9.2f} {r['predicted_busbw_GBps']:>9.2f} {_pct(r['busbw_error']):>7}  "
        f"{r['algorithm']}/{r['protocol']}"
        for r in records
    ])


def render_out_of_sample(records: list[dict[str, Any]]) -> str:
    """One line per prose reference point (not in nccl_tests.csv): measured vs predicted busbw."""
    head = (f"{'point':<26} {'n':>3} {'algo asked':<10} {'won':<10} {'meas bus':>9} {'pred bus':>9} {'err':>7} "
            f"{'tol':>5}  result")
    body = []
    for r in records:
        verdict = "PASS" if r["within"] else "MISS"
        if r["status"] == "known_miss":
            verdict += " (known)"
        body.append(f"{r['id']:<26} {r['num_ranks']:>3} {r['algorithm_asked']:<10} {r['algorithm']:<10} "
                     f"{r['measured_busbw_GBps']:>9.1f} {r['predicted_busbw_GBps']:>9.1f} {_pct(r['busbw_error']):>7} "
                     f"{r['tolerance'] * 100:>4.0f}%  {verdict}")
    passed = sum(1 for r in records if r["within"])
    return _ruled(head, body, f"{passed} of {len(records)} out-of-sample points within tolerance")


_TRAINING_TARGETS = (("throughput", "MAE <= 10%, worst <= 20%"), ("iteration_time", "within 15%"),
                     ("full_recompute", "reported"))
"""The DESIGN §9 target printed under each group of training metrics."""


def render_training(records: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """One line per published training comparison, then MAE and worst row per metric group."""
    lines = [f"{'row':>3}  {'model':<22} {'gpus':>5}  {'metric':<32} {'published':>10} {'predicted':>10} {'error':>8}"]
    for r in records:
        lines.append(f"{r['row']:>3}  {r['model'][:22]:<22} {r['num_gpus']:>5}  {r['metric']:<32} "
                     f"{r['published']:>10.4g} {r['predicted']:>10.4g} {r['error_pct']:>+7.1f}%")
    for key, target in _TRAINING_TARGETS:
        s = summary[key]
        if s["count"]:
            lines.append(f"{key}: {s['count']} rows, MAE {s['mae_pct']:.1f}%, worst {s['worst_pct']:+.1f}% "
                         f"({s['worst_row']}); target {target}")
    return "\n".join(lines)


def render_modern(records: list[dict[str, Any]], scores: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Today's stacks: one line per run (stack, dtype, metric, error), then MAE and worst per stack and per GPU
    generation (issue 12 target: MAE ≤ 10%, worst ≤ 25% with the stack the run used)."""
    head = (f"{'run':<44} {'stack':<14} {'dtype':<11} {'gpus':>5} {'metric':<21} {'published':>9} {'predicted':>9} "
            f"{'error':>7}")
    body = [f"{r['id'][:44]:<44} {r['stack']:<14} {r['dtype']:<11} {r['num_gpus']:>5} {r['metric']:<21} "
            f"{r['published']:>9.4g} {r['predicted']:>9.4g} {r['error_pct']:>+6.1f}%"
            + ("" if r["fits"] else "  (does not fit)") for r in records]
    for key, groups in scores.items():
        body.append("")
        for name, s in groups.items():
            verdict = "PASS" if s["mae_pct"] <= 10.0 and abs(s["worst_pct"]) <= 25.0 else "FAIL"
            body.append(f"{key} {name:<22} n={s['count']:<3} MAE {s['mae_pct']:5.1f}%  worst {s['worst_pct']:+6.1f}% "
                        f"({s['worst_id']})  target MAE <= 10%, worst <= 25%  {verdict}")
    return _ruled(head, body)


def render_moe(records: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """Mixture-of-experts runs: one line per run (tokens/s per GPU), then MAE and worst against issue 13's targets."""
    head = f"{'run':<44} {'published':>9} {'predicted':>9} {'error':>7}"
    body = []
    for r in records:
        if "error" in r:
            body.append(f"{r['id'][:44]:<44} not priced: {r['error'][:80]}")
            continue
        body.append(f"{r['id'][:44]:<44} {r['published']:>9.4g} {r['predicted']:>9.4g} {r['error_pct']:>+6.1f}%"
                    + ("" if r["fits"] else "  (does not fit)"))
    if not summary["count"]:
        return _ruled(head, body, "no run could be priced")
    footer = (f"MoE n={summary['count']}  MAE {summary['mae_pct']:.1f}%  worst {summary['worst_pct']:+.1f}% "
              f"({summary['worst_id']}); target MAE <= 15%, worst <= 30%  {'PASS' if summary['pass'] else 'FAIL'}")
    return _ruled(head, body, footer)
