"""Adapt's export tables (``TABLES``, loaded through
``memearena.engine.registry.method_tables``): ``scores`` and ``chains``, and its answers in
``answers``. Adapt steps are stored once per request, named by the first item that reached
it: a row whose request another item reached first has no ``request_hash``."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memearena.engine.results import read_jsonl
from memearena.export import (
    MEME,
    Answers,
    Column,
    MethodTables,
    Table,
    as_int,
    columns,
    need,
    open_store,
)

if TYPE_CHECKING:
    from memearena.store import RunStore

__all__ = ["TABLES"]

Named = tuple[str, str, str, str, int | None]
"""(meme, variant, category, target, repeat): the item an Adapt step names in its ``for``."""


def _adapt_for(value: Mapping[str, Any]) -> Named | None:
    """(meme, variant, category, target, repeat) an Adapt step names in its ``for``."""
    parts = str(value.get("for") or "").split("|")
    if len(parts) < 5:
        return None
    try:
        repeat: int | None = int(parts[4])
    except ValueError:
        repeat = None
    return parts[0], parts[1], parts[2], parts[3], repeat


def _answers(store: RunStore) -> Iterator[dict[str, Any]]:
    for key, value in store.artifacts("adapt.answer"):  # the request hash
        named = _adapt_for(value)
        meme, variant, category, _, repeat = named or (None, None, None, None, None)
        yield {
            "meme": meme,
            "model": value.get("model"),
            "category": category,
            "repeat": repeat,
            "variant": variant,
            "request_hash": key,
            "text": value.get("answer"),
            "refused": bool(value.get("refusal")),
        }


def _requests(run_dir: Path) -> dict[Named, str]:
    """Each Adapt answer's request hash by the (meme, variant, category, target, repeat) that
    first reached it (a request reached again by another item names only the first)."""
    out: dict[Named, str] = {}
    if not (run_dir / "run.db").is_file():
        return out
    with open_store(run_dir) as store:
        for key, value in store.artifacts("adapt.answer"):
            named = _adapt_for(value)
            if named is not None:
                out.setdefault(named, key)
    return out


def _scores(run_dir: Path) -> Iterator[dict[str, Any]]:
    rows = read_jsonl(need(run_dir / "adapt_scores.jsonl", "Adapt scores"))
    requests = _requests(run_dir)
    for row in rows:
        meme, cat, model = row.get("meme"), row.get("category"), row.get("target")
        repeat = as_int(row.get("repeat"))
        image = row.get("image") if isinstance(row.get("image"), dict) else {}
        own = row.get("original_image") if isinstance(row.get("original_image"), dict) else {}
        yield {
            "meme": meme,
            "model": model,
            "category": cat,
            "repeat": repeat,
            **{k: row.get(k) for k in ("outcome", "score", "by_scorer", "self_scored")},
            **{k: row.get(k) for k in ("refused", "reason")},
            "image_sha256": image.get("sha256"),
            # The erased image equals the meme's own where nothing was erased: one request,
            # named by whichever of the two reached it first.
            "request_hash": requests.get((meme, "loop", cat, model, repeat))
            or (
                requests.get((meme, "", cat, model, repeat))
                if image.get("sha256") and image.get("sha256") == own.get("sha256")
                else None
            ),
            "original_image_outcome": own.get("outcome"),
            "original_image_score": own.get("score"),
            "original_image_request_hash": (
                requests.get((meme, "", cat, model, repeat)) if own else None
            ),
        }


def _chains(run_dir: Path) -> Iterator[dict[str, Any]]:
    rows = read_jsonl(need(run_dir / "adapt_chains.jsonl", "Adapt chains"))
    requests = _requests(run_dir)
    for n, chain in enumerate(rows, start=1):
        model, cat = chain.get("target"), chain.get("category")
        repeat = as_int(chain.get("repeat"))
        for st in chain.get("steps") or []:
            text = st.get("text")
            variant = "rw:" + hashlib.sha256(text.encode()).hexdigest()[:16] if text else None
            meme = st.get("meme")
            yield {
                "chain": n,
                "model": model,
                "category": cat,
                "repeat": repeat,
                **{k: chain.get(k) for k in ("mode", "seed", "stop")},
                "step": as_int(st.get("step")),
                "meme": meme,
                "misbelief": st.get("misbelief"),
                "text": text,
                **{k: st.get(k) for k in ("score_before", "score_after", "score_outcome")},
                "decision": st.get("decision") or st.get("outcome"),
                "request_hash": (
                    requests.get((meme, variant, cat, model, repeat)) if variant else None
                ),
            }


TABLES = MethodTables(
    tables=(
        Table(
            "scores",
            "Adapt score of a target's answer about an original meme",
            "adapt_scores.jsonl",
            columns(
                MEME,
                ("model", "string", "The target."),
                ("category", "string", "The harm category."),
                ("repeat", "int", "The repeat."),
                ("outcome", "string", "scored, refused or unparsed."),
                ("score", "float", "The scorers' mean, 1-10 (null unless scored)."),
                ("by_scorer", "json", "Each scorer's score."),
                ("self_scored", "bool", "A scorer scored its own model's answer."),
                ("refused", "bool", "The target refused."),
                ("reason", "string", "Why it has no score."),
                ("image_sha256", "string", "The image shown (the erased image)."),
                (
                    "request_hash",
                    "string",
                    "The answer's request (variant 'loop'; null when the "
                    "request was first reached by another item).",
                ),
                ("original_image_outcome", "string", "The same on the meme's own image."),
                ("original_image_score", "float", "The score on the meme's own image."),
                ("original_image_request_hash", "string", "That answer's request."),
            ),
            read=_scores,
        ),
        Table(
            "chains",
            "step of an Adapt refinement chain",
            "adapt_chains.jsonl",
            columns(
                ("chain", "int", "The chain's line in adapt_chains.jsonl (1-based)."),
                ("model", "string", "The target."),
                ("category", "string", "The harm category."),
                ("repeat", "int", "The repeat."),
                ("mode", "string", "conditional (the loop) or control."),
                ("seed", "string", "The chain's seed meme."),
                ("stop", "string", "Why the chain stopped."),
                ("step", "int", "The step (1-based)."),
                MEME,
                ("misbelief", "string", "The misbelief the rewrite must keep."),
                ("text", "string", "The rewrite (untrusted model output)."),
                ("score_before", "float", "The score before this step."),
                ("score_after", "float", "The score on the rewrite (null when not scored)."),
                ("score_outcome", "string", "scored, refused or unparsed."),
                ("decision", "string", "What the step decided (lowered, held, ...)."),
                (
                    "request_hash",
                    "string",
                    "The target's answer to the rewrite (null when the "
                    "request was first reached by another item).",
                ),
            ),
            read=_chains,
        ),
    ),
    answers=Answers(
        "Adapt answers",
        keys=(
            Column("category", "string", "Adapt: the harm category asked about (else null)."),
            Column("repeat", "int", "Adapt: the repeat (else null)."),
            Column(
                "variant",
                "string",
                "Adapt: '' the original on its own image, 'loop' the "
                "original on the erased image, 'rw:<hash>' a rewrite (else null).",
            ),
        ),
        facts=(Column("refused", "bool", "Adapt: the model refused (else null)."),),
        read=_answers,
    ),
    joins="Adapt steps are stored once per request, named by the first item that reached it:"
    " when two items send the same request, only the first one's row carries its"
    " `request_hash` (the other's is null).",
)
"""Adapt's tables (see the module)."""
