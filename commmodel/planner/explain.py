"""Why one layout beats another: the layout fields that differ and the step terms that moved most.

Works on plain row dictionaries (``PlanResult.row``) so the same function explains rank 1 vs rank 2
of one search and the best layouts of two systems in a comparison. A term's contribution is its
*exposed* time (``<term>/exposed_s``), the part that lengthens the step; link time that hides
behind compute does not decide a ranking.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from commmodel.step.layout import RECORD_FIELDS

LAYOUT_KNOBS: tuple[str, ...] = RECORD_FIELDS
"""Layout fields compared when explaining a difference: the schema's per-layout fields."""


def layout_label(row: Mapping[str, Any]) -> str:
    """A compact layout name: ``tp8 pp8 dp16 mb1 zero1 selective sp vpp3`` (``cp2`` after pp when cp > 1; ``ep8``
    and ``etp2`` after dp when a mixture of experts splits its experts)."""
    cp = [f"cp{row['cp']}"] if row.get("cp", 1) > 1 else []
    experts = [f"{k}{row[k]}" for k in ("ep", "etp") if row.get(k, 1) > 1]
    parts = [f"tp{row['tp']}", f"pp{row['pp']}", *cp, f"dp{row['dp']}", *experts, f"mb{row['micro_batch']}",
             f"zero{row['zero']}"]
    parts.append(f"recompute={row['recompute']}")
    if row["sequence_parallel"]:
        parts.append("sp")
    if row["vpp"] > 1:
        parts.append(f"vpp{row['vpp']}")
    return " ".join(parts)


def term_names(keys: Iterable[str]) -> list[str]:
    """Breakdown terms present in a set of column names (``"pp/bubble/exposed_s"`` -> ``"pp/bubble"``)."""
    return sorted({k[: -len("/exposed_s")] for k in keys if k.endswith("/exposed_s")})


def changed_fields(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Layout field -> [value in a, value in b] for every field that differs."""
    return {k: [a[k], b[k]] for k in LAYOUT_KNOBS if a.get(k) != b.get(k)}


def explain_pair(a: Mapping[str, Any], b: Mapping[str, Any], *, label_a: str, label_b: str,
                 max_terms: int = 3) -> dict[str, Any]:
    """How layout ``a`` compares with ``b``: time delta, changed fields, largest term differences.

    ``delta_s`` = b.step_time − a.step_time (positive: a is faster). ``terms`` lists up to
    ``max_terms`` breakdown terms by |exposed-time difference|, largest first.
    """
    delta_s = float(b["step_time_s"] - a["step_time_s"])
    terms = []
    for term in term_names(set(a) & set(b)):
        a_s, b_s = float(a[f"{term}/exposed_s"]), float(b[f"{term}/exposed_s"])
        if a_s != b_s:
            terms.append({"term": term, "a_s": a_s, "b_s": b_s, "delta_s": b_s - a_s})
    terms.sort(key=lambda t: -abs(t["delta_s"]))
    terms = terms[:max_terms]
    changed = changed_fields(a, b)
    relative = delta_s / b["step_time_s"] if b["step_time_s"] else 0.0
    verb = "beats" if delta_s > 0 else ("ties with" if delta_s == 0 else "trails")
    changes = ", ".join(f"{k} {v[0]}→{v[1]}" for k, v in changed.items()) or "same layout"
    moved = "; ".join(f"{t['term']} {t['a_s']:.4g} s vs {t['b_s']:.4g} s" for t in terms) or "no term differs"
    text = (f"{label_a} ({layout_label(a)}) {verb} {label_b} ({layout_label(b)}) by {abs(delta_s):.4g} s "
            f"({abs(relative):.1%} of {label_b}'s step); differences: {changes}; largest exposed terms: {moved}")
    return {"a": label_a, "b": label_b, "delta_s": delta_s, "relative": relative, "changed": changed,
            "terms": terms, "text": text}


def explain_plan(result: Any) -> list[dict[str, Any]]:
    """Rank 1 vs the runner-up (the first layout that is actually slower) of a
    :class:`~commmodel.planner.search.PlanResult`, and, when the runner-up keeps the same tp × pp split,
    rank 1 vs the best layout with a different split (the choice users weigh)."""
    if result.num_feasible < 2:
        return []
    best = result.row(0)
    times = result.columns["step_time_s"]
    slower = np.nonzero(times > times[0])[0]  # layouts tied with rank 1 differ only in knobs that cost nothing
    second = result.row(int(slower[0]) if slower.size else 1)
    out = [explain_pair(best, second, label_a="rank 1", label_b=f"rank {second['rank']}")]
    tp, pp = result.columns["tp"], result.columns["pp"]
    if (second["tp"], second["pp"]) == (best["tp"], best["pp"]):
        other = np.nonzero((tp != best["tp"]) | (pp != best["pp"]))[0]
        if other.size:
            row = result.row(int(other[0]))
            out.append(explain_pair(best, row, label_a="rank 1", label_b=f"rank {row['rank']}"))
    return out
