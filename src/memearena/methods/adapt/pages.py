"""Adapt's pages in the viewer: its failure rates (per category, with their controls and
intervals), the scored answers and refinement chains behind each cell, and each chain step with
the image and answer it was shown; where each of its answer and score calls served. Registered
as ``PAGES`` (``memearena.view.app.MethodPages``); templates in ``html/``.

Every string shown is untrusted (model output, dataset text, names from a config): it reaches
the page through autoescaping only."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from memearena.view.app import MethodPages, View, finite, query_int, row_id
from memearena.view.queries import RunReader, ViewError, like, outcome_of

__all__ = ["PAGES", "adapt_answer", "chain_lines", "chain_steps"]


def chain_steps(r: RunReader) -> dict[tuple[str, str, str, str, int], tuple[int, int]]:
    """The first chain step showing each rewrite, by (meme, rewrite tag, category, target,
    repeat) as an Adapt answer's ``for`` names it: (chain line, step)."""
    return dict(r.cached("adapt.chain_steps", lambda: _chain_steps(r)))


def _chain_steps(r: RunReader) -> dict[tuple[str, str, str, str, int], tuple[int, int]]:
    out: dict[tuple[str, str, str, str, int], tuple[int, int]] = {}
    for n, row in r.lines("adapt_chains"):
        try:
            repeat = int(row.get("repeat") or 0)
        except (TypeError, ValueError):
            continue
        for st in row.get("steps") or []:
            text = st.get("text") if isinstance(st, dict) else None
            if not isinstance(text, str) or not text:
                continue
            tag = "rw:" + hashlib.sha256(text.encode()).hexdigest()[:16]
            key = (
                str(st.get("meme")),
                tag,
                str(row.get("category")),
                str(row.get("target")),
                repeat,
            )
            out.setdefault(key, (n, int(st.get("step") or 0)))
    return out


def adapt_answer(
    r: RunReader, meme: str, text: str | None, category: str, target: str, repeat: int
) -> dict[str, Any] | None:
    """The target's answer to a meme (``text``: a rewrite of it; None: the original), with
    its call and the hash of the image it was shown."""
    tag = "rw:" + hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""
    for_key = f"{meme}|{tag}|{category}|{target}|{repeat}"
    # A run may add parts after these (the null world does): the key or any extension.
    rows = r.q(
        "SELECT key, value FROM artifacts WHERE kind='adapt.answer'"
        " AND (json_extract(value, '$.for')=? OR json_extract(value, '$.for') LIKE ?"
        " ESCAPE '\\') LIMIT 1",
        (for_key, like(for_key + "|")[1:]),
    )
    if not rows:
        return None
    key, value = rows[0]
    v = json.loads(value)
    req = r.request(key)
    image = None
    for m in (req or {}).get("messages", []):
        for part in m.get("content", []):
            if part.get("type") == "image":
                image = part.get("sha256")
    return {
        "answer": v.get("answer") or v.get("raw") or v.get("error") or "",
        "outcome": outcome_of(v),
        "call": r.call_for(key),
        "image": image,
    }


def chain_lines(r: RunReader) -> dict[tuple[str, str, int, str, str], int]:
    """Line numbers of the refinement chains in ``adapt_chains.jsonl`` by (target,
    category, repeat, seed, mode): what links a weakness row to its chain page."""
    return dict(r.cached("adapt.chain_lines", lambda: _chain_lines(r)))


def _chain_lines(r: RunReader) -> dict[tuple[str, str, int, str, str], int]:
    out: dict[tuple[str, str, int, str, str], int] = {}
    for n, row in r.lines("adapt_chains"):
        try:
            key = (
                str(row.get("target")),
                str(row.get("category")),
                int(row.get("repeat") or 0),
                str(row.get("seed")),
                str(row.get("mode")),
            )
        except (TypeError, ValueError):
            continue
        out.setdefault(key, n)
    return out


def filter_values(r: RunReader) -> dict[str, list[str]]:
    """Values Adapt's filters offer: its targets and categories (the reader's
    ``filter_values`` holds them, with every method's and the calls')."""
    adapt = r.board.get("adapt")
    adapt = adapt if isinstance(adapt, dict) else {}
    return {
        "adapt_models": [
            str(m.get("model")) for m in adapt.get("models") or [] if isinstance(m, dict)
        ],
        "categories": [
            str(c.get("name")) for c in adapt.get("taxonomy") or [] if isinstance(c, dict)
        ],
    }


def served(r: RunReader, request_hash: str, role: str) -> list[dict[str, Any]]:
    """Where an answer or score call served: its chain step (a rewrite's) and the records of
    its target and category."""
    if role not in ("adapt.answer", "adapt.score"):
        return []
    out: list[dict[str, Any]] = []
    for (value,) in r.q("SELECT value FROM artifacts WHERE kind=? AND key=?", (role, request_hash)):
        parts = str(json.loads(value).get("for") or "").split("|")
        if len(parts) < 5:
            continue
        meme, tag, category, target = parts[0], parts[1], parts[2], parts[3]
        try:
            repeat = int(parts[4])
        except ValueError:
            continue
        step = chain_steps(r).get((meme, tag, category, target, repeat)) if tag else None
        if step is not None:
            out.append(
                {
                    "href": f"/adapt/chain/{step[0]}#step-{step[1]}",
                    "label": f"chain #{step[0]}, step {step[1]}",
                    "note": "",
                }
            )
        out.append(
            {
                "href": "/adapt/records?" + urlencode({"model": target, "category": category}),
                "label": f"Adapt records of {target} · {category}",
                "note": f"meme {meme}",
            }
        )
    return out


# ------------------------------------------------------------------ pages


def _adapt_page(v: View, request: web.Request) -> web.Response:
    n, r = v.reader(request)
    adapt = r.board.get("adapt")
    if not isinstance(adapt, dict):
        raise ViewError("this run has no Adapt results")
    cats = list((adapt.get("by_category") or {}).keys())
    models = [str(m.get("model")) for m in adapt.get("models") or []]
    heat: dict[tuple[str, str], dict[str, Any]] = {}
    for cat, rows in (adapt.get("by_category") or {}).items():
        for row in rows or []:
            heat[(str(row.get("model")), str(cat))] = row
    lines = chain_lines(r)
    weaknesses = []
    for w in adapt.get("weaknesses") or []:
        if not isinstance(w, dict):
            continue
        try:
            key = (
                str(w.get("model")),
                str(w.get("category")),
                int(w.get("repeat") or 0),
                str(w.get("chain_seed") or w.get("meme")),
                "conditional",
            )
        except (TypeError, ValueError):
            key = ("", "", 0, "", "")
        weaknesses.append({**w, "chain_line": lines.get(key)})
    threshold = adapt.get("failure_threshold")
    rule = adapt.get("failure_rule") or (
        f"score < {float(threshold):g}" if finite(threshold) else None
    )
    return v.render(
        request,
        "adapt/adapt.html.j2",
        n=n,
        label=v.label(n),
        adapt=adapt,
        cats=cats,
        models=models,
        heat=heat,
        weaknesses=weaknesses,
        rule=rule,
    )


def _adapt_records_page(v: View, request: web.Request) -> web.Response:
    n, r = v.reader(request)
    q = request.query
    match = {"target": q.get("model", ""), "category": q.get("category", "")}
    off = query_int(request, "offset")
    scores = r.jsonl("adapt_scores", match, off, 50)
    chains = r.jsonl("adapt_chains", match, off, 50)
    return v.render(
        request,
        "adapt/adapt_records.html.j2",
        n=n,
        label=v.label(n),
        meme_pages=v.meme_pages(r),
        scores=scores,
        chains=chains,
        f=r.filter_values(),
    )


def _chain_page(v: View, request: web.Request) -> web.Response:
    n, r = v.reader(request)
    line = row_id(request, "line") or 0
    chain = r.jsonl_line("adapt_chains", line)
    if chain is None:
        raise ViewError("no such chain in this run")
    steps = [st for st in chain.get("steps") or [] if isinstance(st, dict)]
    who = (str(chain.get("category")), str(chain.get("target")), int(chain.get("repeat") or 0))
    images = {uid: m.get("image") for uid, m in v.memes_shown(r).items()}
    for st in steps:
        meme = str(st.get("meme"))
        text = st.get("text") if isinstance(st.get("text"), str) else None
        st["_answer"] = adapt_answer(r, meme, text, *who) if text else None
        original = adapt_answer(r, meme, None, *who)
        st["_original_image"] = (original or {}).get("image") or images.get(meme)
        got = st.get("image")
        shown: dict[str, Any] = got if isinstance(got, dict) else {}
        st["_shown_image"] = (st["_answer"] or {}).get("image") or shown.get("sha256")
        st["_shown_source"] = shown.get("source")
    return v.render(request, "adapt/chain.html.j2", n=n, label=v.label(n), chain=chain, line=line)


PAGES = MethodPages(
    routes=(
        ("/adapt", _adapt_page),
        ("/adapt/records", _adapt_records_page),
        ("/adapt/chain/{line}", _chain_page),
    ),
    nav=(("/adapt", "Adapt"),),
    served=served,
    filters=filter_values,
    queries={f.__name__: f for f in (adapt_answer, chain_lines, chain_steps)},
)
