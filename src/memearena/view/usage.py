"""A run's calls as the viewer's overview and calls filters show them: usage per model (calls,
cached, refusals, errors, tokens, cost, latency, unsettled), failed calls by kind, and the
models and roles on record; and the record of them a method stores with its leaderboard section
(``USAGE_KEY``), so that a viewer's first page reads them from ``leaderboard.json`` instead of
scanning every call.

The record carries the stamp of the calls it was summed from (how many, and the newest id). A
call row is written by the process that made the call and settled or withdrawn only by that
process, so once the run that wrote the record has ended, an equal stamp means the same rows: a
later run, a live one, or one killed mid-way adds rows and changes it. A viewer uses the record
only when its stamp equals the calls' as it finds them and every field has the type the scan
gives (``leaderboard.json`` is a file on disk: a damaged or crafted record is not used, the
calls are scanned instead). The record is made by the same queries as the scan, so either way a
page shows the same figures."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "USAGE_COLUMNS",
    "USAGE_KEY",
    "Query",
    "call_values",
    "calls_stamp",
    "stored_usage",
    "usage",
    "usage_record",
]

Query = Callable[[str, tuple[Any, ...]], list[Any]]
"""A read-only query over ``run.db`` (``RunReader.q``): rows, ``[]`` where a table is absent."""

USAGE_KEY = "run_usage"
"""The key, in a method's section of ``leaderboard.json``, of the record of the run's calls."""

USAGE_COLUMNS = (
    "model",
    "calls",
    "cached",
    "errors",
    "refusals",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_s",
    "unsettled",
    "unsettled_usd",
)
"""A model's row of the overview's usage table."""


def usage(q: Query) -> dict[str, list[dict[str, Any]]]:
    """``models``: usage per model, by model; ``call_errors``: failed calls by kind, the most
    frequent first (one pass over the calls each)."""
    rows = q(
        "SELECT model, COUNT(*), SUM(status='cached'), SUM(status='error'),"
        " SUM(status='refusal'), SUM(input_tokens), SUM(output_tokens), SUM(cost_usd),"
        " SUM(latency_s), SUM(status='sent'),"
        " SUM(CASE WHEN status='sent' THEN cost_bound_usd ELSE 0 END)"
        # One pass over the table: grouping through the model index would visit every
        # row out of order (about a third slower on a large run).
        " FROM calls NOT INDEXED GROUP BY model ORDER BY model",
        (),
    )
    models = [dict(zip(USAGE_COLUMNS, (v or 0 for v in r), strict=True)) for r in rows]
    for m in models:
        m["model"] = str(m["model"])
    # The failed calls are the rows counted in ``errors``: none there, none to look for.
    failed = any(m["errors"] for m in models)
    call_errors = [
        {"kind": k or "unknown", "count": n}
        for k, n in (
            q(
                "SELECT error_kind, COUNT(*) FROM calls WHERE status='error'"
                " GROUP BY error_kind ORDER BY COUNT(*) DESC",
                (),
            )
            if failed
            else []
        )
    ]
    return {"models": models, "call_errors": call_errors}


def call_values(q: Query) -> dict[str, list[str]]:
    """The models and the roles of the calls on record, each sorted (the calls filters)."""
    return {
        "call_models": [str(m) for (m,) in q("SELECT DISTINCT model FROM calls ORDER BY 1", ())],
        "roles": [str(r) for (r,) in q("SELECT DISTINCT role FROM calls ORDER BY 1", ())],
    }


def calls_stamp(q: Query) -> list[int]:
    """How many calls are on record and the newest one's id (``[0, 0]`` without any)."""
    rows = q("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM calls", ())
    return [int(rows[0][0]), int(rows[0][1])] if rows else [0, 0]


def usage_record(q: Query) -> dict[str, Any]:
    """The record a method stores under ``USAGE_KEY``: the calls' stamp, ``usage`` and
    ``call_values``, read while no call is being written (at the end of a run)."""
    return {"calls": calls_stamp(q), **usage(q), **call_values(q)}


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _valid(rec: Mapping[str, Any]) -> bool:
    models, errors = rec.get("models"), rec.get("call_errors")
    if not isinstance(models, list) or not isinstance(errors, list):
        return False
    for m in models:
        if not isinstance(m, dict) or tuple(m) != USAGE_COLUMNS or not isinstance(m["model"], str):
            return False
        if not all(_number(m[c]) for c in USAGE_COLUMNS[1:]):
            return False
    for e in errors:
        if not isinstance(e, dict) or tuple(e) != ("kind", "count"):
            return False
        if not isinstance(e["kind"], str) or type(e["count"]) is not int:
            return False
    return _strings(rec.get("call_models")) and _strings(rec.get("roles"))


def stored_usage(
    board: Mapping[str, Any], sections: list[str], stamp: Callable[[], list[int]]
) -> dict[str, Any] | None:
    """The first record under ``USAGE_KEY`` in ``board``'s ``sections`` that was summed from
    calls of the stamp ``stamp()`` gives (read only when some section holds a record) and is
    well formed (None when none is: scan the calls)."""
    records = [
        rec
        for name in sections
        if isinstance(section := board.get(name), dict)
        and isinstance(rec := section.get(USAGE_KEY), dict)
    ]
    if not records:
        return None
    now = stamp()
    for rec in records:
        calls = rec.get("calls")
        if calls != now or not all(type(x) is int for x in calls):
            continue
        if _valid(rec):
            return rec
    return None
