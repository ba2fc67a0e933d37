"""The Judge audit's export tables (``TABLES``, loaded through
``memearena.engine.registry.method_tables``): ``audit_scores``, and its responses in
``answers``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memearena.engine.results import read_jsonl
from memearena.export import MEME, Answers, MethodTables, Table, columns, need

if TYPE_CHECKING:
    from memearena.store import RunStore

__all__ = ["TABLES"]


def _audit_scores(run_dir: Path) -> Iterator[dict[str, Any]]:
    rows = read_jsonl(need(run_dir / "judge_audit_scores.jsonl", "Judge-audit scores"))
    for row in rows:
        status = row.get("status") if isinstance(row.get("status"), list) else [None, None]
        yield {
            "meme": row.get("id"),
            **{k: row.get(k) for k in ("judge", "responder", "bias_type")},
            "unbiased_score": row.get("unbiased_score"),
            "biased_score": row.get("biased_score"),
            "unbiased_status": status[0] if status else None,
            "biased_status": status[1] if len(status) > 1 else None,
            # An older log has no request keys: null, never a guess.
            "unbiased_request_hash": row.get("unbiased_request"),
            "biased_request_hash": row.get("biased_request"),
        }


def _responses(store: RunStore) -> Iterator[dict[str, Any]]:
    for key, value in store.artifacts("ja_response"):  # meme|responder|request
        meme, model, request = (key.rsplit("|", 2) + [None] * 3)[:3]
        yield {"meme": meme, "model": model, "request_hash": request, "text": value.get("text")}


TABLES = MethodTables(
    tables=(
        Table(
            "audit_scores",
            "Judge-audit scored pair (a judge's scores of the unbiased and biased item)",
            "judge_audit_scores.jsonl",
            columns(
                MEME,
                ("judge", "string", "The audited judge."),
                ("responder", "string", "The model whose response was judged (or null)."),
                ("bias_type", "string", "The perturbation."),
                ("unbiased_score", "float", "The score of the unperturbed item."),
                ("biased_score", "float", "The score of the perturbed item."),
                ("unbiased_status", "string", "ok, abstained, unparsed, refused, ..."),
                ("biased_status", "string", "The same for the perturbed item."),
                (
                    "unbiased_request_hash",
                    "string",
                    "The request of the unperturbed item's score (calls.request_hash; null in"
                    " a log written before requests were recorded).",
                ),
                ("biased_request_hash", "string", "The same for the perturbed item."),
            ),
            read=_audit_scores,
        ),
    ),
    answers=Answers("Judge-audit responses", read=_responses),
    joins="`audit_scores` names both scores' requests (`unbiased_request_hash`,"
    " `biased_request_hash`); a request can serve several rows (the unperturbed item is"
    " shared by its bias types), and a log written before requests were recorded has them"
    " null (join it by `meme`, `judge` and `responder`).",
)
"""The Judge audit's tables (see the module)."""
