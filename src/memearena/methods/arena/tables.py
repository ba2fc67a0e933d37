"""The Arena's export tables (``TABLES``, loaded through
``memearena.engine.registry.method_tables``): ``battles``, and its answers in ``answers``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memearena.engine.results import read_jsonl
from memearena.export import MEME, Answers, Column, MethodTables, Table, columns, need

if TYPE_CHECKING:
    from memearena.store import RunStore

__all__ = ["TABLES"]


def _battles(run_dir: Path) -> Iterator[dict[str, Any]]:
    main = need(run_dir / "battles.jsonl", "battles")
    for path, self_judged in ((main, False), (run_dir / "battles.self_judged.jsonl", True)):
        if not path.is_file():
            continue
        for row in read_jsonl(path):
            reqs = row.get("requests") if isinstance(row.get("requests"), list) else []
            yield {
                "meme": row.get("item"),
                **{k: row.get(k) for k in ("source", "setting", "context", "criterion")},
                **{k: row.get(k) for k in ("judge", "model_a", "model_b", "winner")},
                "request_hash": reqs[0] if reqs else None,
                "request_hash_2": reqs[1] if len(reqs) > 1 else None,
                "self_judged": self_judged,
            }


def _answers(store: RunStore) -> Iterator[dict[str, Any]]:
    for key, value in store.artifacts("answer"):  # meme|level|model|request
        meme, level, model, request = (key.rsplit("|", 3) + [None] * 4)[:4]
        yield {
            "meme": meme,
            "model": model,
            "context": level,
            "request_hash": request,
            "text": value.get("text"),
            "format_ok": value.get("format_ok"),
        }


TABLES = MethodTables(
    tables=(
        Table(
            "battles",
            "resolved Arena battle (a judge's verdict on one criterion, both orders)",
            "battles.jsonl, battles.self_judged.jsonl",
            columns(
                MEME,
                ("source", "string", "The dataset entry the meme came from."),
                ("setting", "string", "The guideline setting judged under."),
                ("context", "string", "The context level the answers were given with."),
                ("criterion", "string", "The criterion judged."),
                ("judge", "string", "The judge model."),
                ("model_a", "string", "The first target."),
                ("model_b", "string", "The second target."),
                ("winner", "string", "model_a, model_b or tie."),
                ("request_hash", "string", "The verdict's request, first order."),
                ("request_hash_2", "string", "The verdict's request, swapped order (or null)."),
                (
                    "self_judged",
                    "bool",
                    "The judge is of a target's family: left out of the ranking.",
                ),
            ),
            read=_battles,
        ),
    ),
    answers=Answers(
        "Arena answers",
        keys=(Column("context", "string", "Arena: the context level (else null)."),),
        facts=(Column("format_ok", "bool", "Arena: it had the requested sections (else null)."),),
        read=_answers,
    ),
)
"""The Arena's tables (see the module)."""
