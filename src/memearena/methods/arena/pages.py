"""The Arena's pages in the viewer: its leaderboards and pairwise matrix, its memes (every
context, answer, guideline round and battle of one meme), its battles (both orders' verdicts
beside the two answers and the guideline they were judged against), and where each of its
calls served. Registered as ``PAGES`` (``memearena.view.app.MethodPages``); templates in
``html/``. Its queries read the run through the viewer's read-only ``RunReader``.

Every string shown is untrusted (model output, dataset text, names from a config): it reaches
the page through autoescaping only."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web

from memearena.view.app import MethodPages, View, finite
from memearena.view.queries import (
    MAX_PER_PAGE,
    OUTCOMES,
    Page,
    RunReader,
    ViewError,
    last_hash,
    like,
    outcome_of,
)

__all__ = ["PAGES", "battle", "battles", "meme", "meme_image", "memes", "pairwise", "resolve_votes"]

SEP = "\x1f"
"""Separates the parts of a member coord (``methods.arena.stages.SEP``)."""

DIFF_MAX_UNITS = 2_000
"""Guideline rounds are compared word by word when their words and spaces multiply to at most
this squared (real rounds: a few hundred words each)."""

_MEMES = "arena.memes"
_PAIRWISE = "arena.pairwise"


def resolve_votes(forward: str | None, backward: str | None, policy: str) -> list[str]:
    """The battle outcomes of one criterion judged in both orders, for (model_a=x,
    model_b=y), as ``pipelines.resolve.resolve_pair`` makes them (a test keeps the two equal):
    a missing order gives none (never a tie); ``tie``: agreement wins, disagreement ties;
    ``both``: one battle per order."""
    if forward is None or backward is None:
        return []

    def vote(winner: str, first_is_x: bool) -> str:
        if winner == "tie":
            return "tie"
        return "x" if (winner == "A") == first_is_x else "y"

    votes = [vote(forward, True), vote(backward, False)]
    name = {"x": "model_a", "y": "model_b", "tie": "tie"}
    if policy == "both":
        return [name[v] for v in votes]
    return [name[votes[0]] if votes[0] == votes[1] else "tie"]


def _meme_text(payload: dict[str, Any]) -> tuple[str, str | None]:
    """The meme's text (between the prompt's ``<meme_text>`` tags, as the model saw it) and
    image hash from a decoded request."""
    text, image = "", None
    for m in payload.get("messages", []):
        for part in m.get("content", []):
            if part.get("type") == "image" and image is None:
                image = part.get("sha256")
            elif part.get("type") == "text" and not text:
                t = part.get("text", "")
                start = t.find("<meme_text>\n")
                end = t.find("\n</meme_text>", start)
                if start >= 0 and end > start:
                    text = t[start + len("<meme_text>\n") : end]
    return text, image


def _tagged(text: str, tag: str) -> str | None:
    """The text between a prompt's ``<tag>`` and ``</tag>`` lines (None when absent)."""
    start = text.find(f"<{tag}>\n")
    if start < 0:
        return None
    start += len(tag) + 3
    end = text.find(f"\n</{tag}>", start)
    return text[start:end] if end >= start else None


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """What a guideline round changed: ``(op, text)`` runs, op ``=`` kept, ``+`` added, ``-``
    removed (words and whitespace runs are the units)."""
    import difflib
    import re

    a, b = re.findall(r"\S+|\s+", old), re.findall(r"\S+|\s+", new)
    if len(a) * len(b) > DIFF_MAX_UNITS**2:
        # Comparing is quadratic at worst (8,000 shuffled words: 85 s): past the bound, a
        # round is shown as replaced whole.
        return [("-", old), ("+", new)]
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("=", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("-", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("+", "".join(b[j1:j2])))
    return out


class _BattleRow(msgspec.Struct):
    """The fields of a resolved battle the win-rate matrix reads (others are skipped)."""

    model_a: str
    model_b: str
    winner: str


@dataclass
class _MemeIndex:
    ids: list[str] = field(default_factory=list)
    info: dict[str, tuple[str, str | None, str]] = field(default_factory=dict)
    """uid -> (text, image sha256, context key)."""


# ------------------------------------------------------------------ queries


def meme_index(r: RunReader) -> _MemeIndex:
    """Each meme the Arena recorded a context for: its text and image, read once per run."""
    with r.lock:
        known = r.state.get(_MEMES)
        if isinstance(known, _MemeIndex):
            return known
        idx = _MemeIndex()
        rows = r.q("SELECT key FROM artifacts WHERE kind='context' ORDER BY key")
        keys: dict[str, str] = {}
        for (key,) in rows:
            uid = key.rsplit("|", 1)[0]
            keys[uid] = key  # the latest context of a meme (keys sort by hash: any one)
        for uid, key in keys.items():
            req = r.request(last_hash(key))
            text, image = _meme_text(req) if req else ("", None)
            idx.ids.append(uid)
            idx.info[uid] = (text, image, key)
        r.state[_MEMES] = idx
        return idx


def memes(
    r: RunReader,
    q: str = "",
    outcome: str = "",
    model: str = "",
    offset: int = 0,
    limit: int = 50,
) -> Page:
    """Memes of the Arena, searched by id or text (``q``, case-insensitive), filtered by
    an outcome some call for them had (refusal, parse failure, error), optionally of one
    model."""
    idx = meme_index(r)
    ids = idx.ids
    if q:
        ql = q.lower()
        ids = [u for u in ids if ql in u.lower() or ql in idx.info[u][0].lower()]
    if outcome:
        hit = _memes_with(r, outcome, model)
        ids = [u for u in ids if u in hit]
    limit = max(1, min(limit, MAX_PER_PAGE))
    chunk = ids[offset : offset + limit]
    rows = [{"uid": u, "text": idx.info[u][0], "image": idx.info[u][1]} for u in chunk]
    return Page(rows, offset, limit, offset + limit < len(ids), len(ids))


def _memes_with(r: RunReader, outcome: str, model: str = "") -> set[str]:
    if outcome == "refusal":
        sql = (
            "SELECT m.meme, a.key FROM members m JOIN artifacts a ON a.kind='answer'"
            " AND a.key=m.ref1 WHERE m.view='arena.answers'"
            " AND json_extract(a.value, '$.refusal')=1"
        )
        rows = r.q(sql)
        return {u for u, k in rows if not model or k.split("|")[-2] == model}
    if outcome == "parse_failure":
        rows = r.q(
            "SELECT key FROM artifacts WHERE kind='verdict'"
            " AND json_extract(value, '$.error') IS NOT NULL"
        )
        out = set()
        for (key,) in rows:
            parts = key.split("|")  # setting|meme|level|a|b|judge|request
            if not model or model in parts[-4:-1]:
                out.add("|".join(parts[1:-5]))
        return out
    if outcome == "error":
        rows = r.q("SELECT key FROM errors")
        known = set(meme_index(r).ids)
        out = set()
        for (key,) in rows:
            parts = key.split("|")
            for i in range(1, len(parts)):
                uid = "|".join(parts[:i])
                if uid in known and (not model or model in parts):
                    out.add(uid)
            if parts[0] in ("memearena", "judge", "human") and len(parts) > 1:
                out.add(parts[1])
        return out
    raise ViewError(f"unknown outcome {outcome!r}; choose {', '.join(OUTCOMES)}")


def meme(r: RunReader, uid: str) -> dict[str, Any] | None:
    """Everything the Arena did with one meme: text, image, contexts, answers per context,
    guideline rounds, battles with both orders' raw verdicts."""
    idx = meme_index(r)
    if uid not in idx.info:
        return None
    text, image, ctx_key = idx.info[uid]
    ctx = r.artifact("context", ctx_key) or {}
    contexts = ctx.get("contexts") or []
    answers: dict[str, list[dict[str, Any]]] = {}
    for key, value in r.q(
        "SELECT a.key, a.value FROM members m JOIN artifacts a ON a.kind='answer'"
        " AND a.key=m.ref1 WHERE m.view='arena.answers' AND m.meme=? ORDER BY m.seq",
        (uid,),
    ):
        v = json.loads(value)
        parts = key.split("|")
        answers.setdefault(parts[-3], []).append(
            {
                "model": parts[-2],
                "text": v.get("text") or v.get("raw") or v.get("error") or "",
                "outcome": outcome_of(v),
                "format_ok": v.get("format_ok"),
                "call": r.call_for(last_hash(key)),
            }
        )
    rounds = []
    for key, v in r.prefixed("guideline_round", uid + "|"):
        parts = key[len(uid) + 1 :].split("|")
        rounds.append(
            {
                "round": int(parts[0]) if parts[0].isdigit() else parts[0],
                "judge": v.get("judge"),
                "analysis": v.get("analysis"),
                "guideline": v.get("guideline") or "",
                "skipped": bool(v.get("skipped")),
                "call": r.call_for(last_hash(key)) if len(last_hash(key)) == 64 else None,
            }
        )
    rounds.sort(key=lambda r: (str(r["round"]).zfill(4), str(r["judge"])))
    for i, rd in enumerate(rounds):
        rd["changed"] = i == 0 or rd["guideline"] != rounds[i - 1]["guideline"]
        rd["diff"] = word_diff(str(rounds[i - 1]["guideline"]), str(rd["guideline"])) if i else []
    pairs = battles(r, meme=uid, limit=MAX_PER_PAGE).rows
    return {
        "uid": uid,
        "text": text,
        "image": image,
        "contexts": contexts,
        "answers": answers,
        "rounds": rounds,
        "battles": pairs,
        "errors": [
            {"kind": k, "key": key, "reason": r}
            for k, key, r in r.q(
                "SELECT kind, key, reason FROM errors WHERE key LIKE ? ESCAPE '\\'",
                (like(uid + "|"),),
            )
        ],
    }


def _judged_views(r: RunReader) -> list[str]:
    arena = r.board.get("arena")
    setting = arena.get("setting") if isinstance(arena, dict) else None
    views = [f"arena.judged:{setting}"] if setting else []
    if not views or not r.q("SELECT 1 FROM members WHERE view=? LIMIT 1", (views[0],)):
        views = [
            v
            for (v,) in r.q(
                "SELECT DISTINCT view FROM members WHERE view >= 'arena.judged:'"
                " AND view < 'arena.judged;'"
            )
        ]
    return views


def _policy(r: RunReader) -> str:
    cfg = (r.board.get("run") or {}).get("config") or {}
    arena = cfg.get("arena") if isinstance(cfg, dict) else None
    return str((arena or {}).get("resolution") or "tie")


def battles(
    r: RunReader,
    *,
    meme: str = "",
    model: str = "",
    judge: str = "",
    criterion: str = "",
    outcome: str = "",
    offset: int = 0,
    limit: int = 50,
) -> Page:
    """Judged pairs (both orders), newest run order first within a meme; filtered by meme,
    model (either side), judge, and a verdict outcome; ``criterion`` narrows each pair's
    verdicts to one criterion."""
    views = _judged_views(r)
    if not views:
        return Page([], offset, limit, False, 0)
    limit = max(1, min(limit, MAX_PER_PAGE))
    where = ["m.view=?"]
    params: list[Any] = [views[0]]
    if meme:
        where.append("m.meme=?")
        params.append(meme)
    if judge:
        where.append("m.coord LIKE ? ESCAPE '\\'")
        params.append("%" + SEP + like(judge)[1:-1])
    if model:
        where.append("m.coord LIKE ? ESCAPE '\\'")
        params.append(like(SEP + model + SEP))
    if outcome in ("refusal", "parse_failure"):
        field_ = "$.refusal" if outcome == "refusal" else "$.error"
        where.append(
            f"(json_extract(a1.value, '{field_}') IS NOT NULL"
            f" OR json_extract(a2.value, '{field_}') IS NOT NULL)"
        )
    elif outcome == "error":
        where.append("(a1.value IS NULL OR a2.value IS NULL)")
    elif outcome:
        raise ViewError(f"unknown outcome {outcome!r}; choose {', '.join(OUTCOMES)}")
    sql = (
        "SELECT m.coord, m.ref1, m.ref2, a1.value, a2.value FROM members m"
        " LEFT JOIN artifacts a1 ON a1.kind='verdict' AND a1.key=m.ref1"
        " LEFT JOIN artifacts a2 ON a2.kind='verdict' AND a2.key=m.ref2"
        f" WHERE {' AND '.join(where)} ORDER BY m.seq LIMIT ? OFFSET ?"
    )
    rows = r.q(sql, (*params, limit + 1, offset))
    policy = _policy(r)
    out = []
    for coord, r1, r2, v1, v2 in rows[:limit]:
        parts = coord.split(SEP)
        if len(parts) != 5:
            continue
        uid, level, x, y, j = parts
        if judge and j != judge:
            continue
        if model and model not in (x, y):
            continue
        out.append(_pair(r, uid, level, x, y, j, r1, r2, v1, v2, policy, criterion, coord))
    return Page(out, offset, limit, len(rows) > limit)


def _pair(
    r: RunReader,
    uid: str,
    level: str,
    x: str,
    y: str,
    judge: str,
    r1: str | None,
    r2: str | None,
    v1: str | None,
    v2: str | None,
    policy: str,
    criterion: str,
    coord: str,
) -> dict[str, Any]:
    fwd = json.loads(v1) if v1 else None
    bwd = json.loads(v2) if v2 else None
    fv = (fwd or {}).get("verdicts") or {}
    bv = (bwd or {}).get("verdicts") or {}
    crits = [criterion] if criterion else list(dict.fromkeys([*fv, *bv]))
    per = []
    for c in crits:
        f = (fv.get(c) or {}).get("winner")
        b = (bv.get(c) or {}).get("winner")
        per.append(
            {
                "criterion": c,
                "forward": f,
                "backward": b,
                "forward_rationale": (fv.get(c) or {}).get("rationale"),
                "backward_rationale": (bv.get(c) or {}).get("rationale"),
                "resolved": resolve_votes(f, b, policy),
            }
        )
    return {
        "coord": coord,
        "meme": uid,
        "context": level,
        "model_a": x,
        "model_b": y,
        "judge": judge,
        "forward_outcome": outcome_of(fwd),
        "backward_outcome": outcome_of(bwd),
        "forward_key": r1,
        "backward_key": r2,
        "forward": fwd,
        "backward": bwd,
        "criteria": per,
        "policy": policy,
    }


def battle(r: RunReader, coord: str) -> dict[str, Any] | None:
    """One judged pair with both orders' calls (request as sent and raw reply)."""
    for view in _judged_views(r):
        rows = r.q(
            "SELECT m.coord, m.ref1, m.ref2, a1.value, a2.value FROM members m"
            " LEFT JOIN artifacts a1 ON a1.kind='verdict' AND a1.key=m.ref1"
            " LEFT JOIN artifacts a2 ON a2.kind='verdict' AND a2.key=m.ref2"
            " WHERE m.view=? AND m.coord=?",
            (view, coord),
        )
        if rows:
            c, r1, r2, v1, v2 = rows[0]
            parts = c.split(SEP)
            if len(parts) != 5:
                return None
            uid, level, x, y, j = parts
            pair = _pair(r, uid, level, x, y, j, r1, r2, v1, v2, _policy(r), "", c)
            pair["forward_call"] = r.call_for(last_hash(r1)) if r1 else None
            pair["backward_call"] = r.call_for(last_hash(r2)) if r2 else None
            pair["shown"] = _judged_texts(r, last_hash(r1) if r1 else "")
            return pair
    return None


def _judged_texts(r: RunReader, request_hash: str) -> dict[str, str | None]:
    """What the judge was shown in the first order, as sent: the task, the guideline
    (None: judged without one) and the two answers (A, then B)."""
    req = r.request(request_hash) if request_hash else None
    text = "\n".join(
        str(part.get("text", ""))
        for m in (req or {}).get("messages", [])
        for part in m.get("content", [])
        if part.get("type") == "text"
    )
    return {tag: _tagged(text, tag) for tag in ("task", "guideline", "response_a", "response_b")}


def meme_ids(r: RunReader) -> frozenset[str]:
    """The memes with a page of their own (those the Arena recorded a context for)."""
    return frozenset(meme_index(r).ids)


def meme_image(r: RunReader, uid: str) -> str | None:
    """The image hash of an Arena meme (None when the run has no context for it)."""
    info = meme_index(r).info.get(uid)
    return info[1] if info else None


def pairwise(r: RunReader) -> dict[str, Any]:
    """Pairwise win rates (ties count half) and battle counts between models, as the Arena's
    analysis stored them with the leaderboard (``arena.pairwise``, computed from the battles
    the leaderboard was fitted on): a page never re-reads the battles. Only a run written
    before the analysis stored them is read from ``battles.jsonl``, once per version of the
    file."""
    arena = r.board.get("arena")
    order = [
        str(r.get("model"))
        for r in (arena.get("overall") if isinstance(arena, dict) else None) or []
        if isinstance(r, dict)
    ]
    stored = arena.get("pairwise") if isinstance(arena, dict) else None
    if isinstance(stored, dict):
        given: list[Any] = stored.get("models") or []
        rates: list[Any] = stored.get("win_rate") or []
        games: list[Any] = stored.get("battles") or []
        m = len(given) if isinstance(given, list) else -1
        # leaderboard.json is a file on disk: a matrix of the wrong shape is not drawn
        # from, the battles are read instead.
        if (
            m > 0
            and all(isinstance(x, str) for x in given)
            and isinstance(rates, list)
            and isinstance(games, list)
            and len(rates) == len(games) == m
            and all(isinstance(r, list) and len(r) == m for r in (*rates, *games))
        ):
            at = {x: k for k, x in enumerate(given)}
            ranked = [x for x in order if x in at] + [x for x in given if x not in order]

            def met(x: str, y: str) -> bool:
                n = games[at[x]][at[y]]
                return isinstance(n, int | float) and not isinstance(n, bool) and n > 0

            return {
                "models": ranked,
                "rate": {
                    x: {
                        y: rates[at[x]][at[y]]
                        for y in ranked
                        if met(x, y) and isinstance(rates[at[x]][at[y]], int | float)
                    }
                    for x in ranked
                },
                "count": {x: {y: games[at[x]][at[y]] for y in ranked if met(x, y)} for x in ranked},
            }
    path = r.inside("battles.jsonl")
    if path is None:
        return {}
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return {}
    kept = r.state.get(_PAIRWISE)
    if isinstance(kept, tuple) and kept[0] == mtime:
        return dict(kept[1])
    wins: dict[tuple[str, str], float] = {}
    count: dict[tuple[str, str], int] = {}
    names: dict[str, None] = {}
    decode = msgspec.json.Decoder(_BattleRow).decode
    try:
        f = path.open("rb")
    except OSError:
        return {}
    with f:  # streamed: memory follows the models, not the battles
        for line in f:
            try:
                row = decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            a, b, w = row.model_a, row.model_b, row.winner
            names.update(dict.fromkeys((a, b)))
            score = 1.0 if w == "model_a" else 0.0 if w == "model_b" else 0.5
            for x, y, sc in ((a, b, score), (b, a, 1.0 - score)):
                wins[(x, y)] = wins.get((x, y), 0.0) + sc
                count[(x, y)] = count.get((x, y), 0) + 1
    models = [m for m in order if m in names] + [m for m in names if m not in order]
    out = {
        "models": models,
        "rate": {
            x: {y: wins[(x, y)] / count[(x, y)] for y in models if (x, y) in count} for x in models
        },
        "count": {x: {y: count[(x, y)] for y in models if (x, y) in count} for x in models},
    }
    r.state[_PAIRWISE] = (mtime, out)
    return out


# ------------------------------------------------------------------ pages


def _leaderboards(v: View, request: web.Request) -> web.Response:
    from memearena.labels.store import LABELS_FILE
    from memearena.methods.arena.view import convergence_view

    n, r = v.reader(request)
    arena = r.board.get("arena")
    if not isinstance(arena, dict):
        raise ViewError("this run has no Arena results")
    boards: list[tuple[str, str, list[dict[str, Any]]]] = [
        ("overall", "", arena.get("overall") or [])
    ]
    for group, key in (
        ("criterion", "by_criterion"),
        ("judge", "by_judge"),
        ("context", "by_context"),
        ("source", "by_source"),
    ):
        for name, rows in (arena.get(key) or {}).items():
            boards.append((group, str(name), rows or []))
    ratings = [
        float(x)
        for _, _, rows in boards
        for row in rows
        for x in (row.get("ci_low"), row.get("ci_high"))
        if finite(x)
    ]
    lo, hi = (min(ratings), max(ratings)) if ratings else (0.0, 1.0)
    return v.render(
        request,
        "arena/arena.html.j2",
        n=n,
        label=v.label(n),
        arena=arena,
        boards=boards,
        lo=lo,
        hi=hi,
        matrix=pairwise(r),
        convergence=convergence_view(arena.get("fusion_convergence")),
        people_rated=(r.dir / LABELS_FILE).is_file(),
    )


def _memes_page(v: View, request: web.Request) -> web.Response:
    _, r = v.reader(request)
    # Its filters are the Arena's own (leaderboard.json): no scan of the calls for them.
    return v.listing(
        request, "arena/memes.html.j2", memes, ("q", "outcome", "model"), f=filter_values(r)
    )


def _meme_page(v: View, request: web.Request) -> web.Response:
    n, r = v.reader(request)
    m = meme(r, request.query.get("id", ""))
    if m is None:
        raise ViewError("no such meme in this run")
    return v.render(request, "arena/meme.html.j2", n=n, label=v.label(n), m=m)


def _battles_page(v: View, request: web.Request) -> web.Response:
    _, r = v.reader(request)
    filters = ("meme", "model", "judge", "criterion", "outcome")
    return v.listing(request, "arena/battles.html.j2", battles, filters, f=filter_values(r))


def _battle_page(v: View, request: web.Request) -> web.Response:
    n, r = v.reader(request)
    b = battle(r, request.query.get("coord", ""))
    if b is None:
        raise ViewError("no such battle in this run")
    return v.render(request, "arena/battle.html.j2", n=n, label=v.label(n), b=b)


def filter_values(r: RunReader) -> dict[str, list[str]]:
    """Values the Arena's filters offer: its models, judges and criteria (the reader's
    ``filter_values`` holds them, with every method's and the calls')."""
    board = r.board
    arena: dict[str, Any] = board["arena"] if isinstance(board.get("arena"), dict) else {}
    cfg = ((board.get("run") or {}).get("config") or {}).get("arena") or {}
    criteria = list(arena.get("by_criterion") or cfg.get("criteria") or [])
    return {
        "models": [str(x.get("model")) for x in arena.get("overall") or []],
        "judges": [str(j.get("judge")) for j in arena.get("judges") or []],
        "criteria": [str(c) for c in criteria],
    }


_ROLE_KINDS = {
    "arena.answer": "answer",
    "arena.context": "context",
    "arena.guideline_draft": "guideline_round",
    "arena.guideline_refine": "guideline_round",
    "arena.judge": "verdict",
}


def served(r: RunReader, request_hash: str, role: str) -> list[dict[str, Any]]:
    """Where a call of an Arena role served: its meme (a context, an answer, a guideline
    round) and, for a judge's verdict, its battle."""
    kind = _ROLE_KINDS.get(role)
    if kind is None:
        return []
    out: list[dict[str, Any]] = []
    rows = r.q(
        "SELECT key FROM artifacts WHERE kind=? AND key LIKE ? LIMIT 1",
        (kind, "%|" + request_hash),
    )
    known = set(meme_index(r).ids)
    for (key,) in rows:
        parts = key.split("|")
        uid = next(
            (
                "|".join(parts[a:b])
                for a in (0, 1)
                for b in range(a + 1, len(parts))
                if "|".join(parts[a:b]) in known
            ),
            None,
        )
        if uid is None:
            continue
        out.append({"href": "/meme?" + _qs(id=uid), "label": f"meme {uid}", "note": ""})
        if kind == "verdict":
            for (coord,) in r.q(
                "SELECT coord FROM members WHERE meme=? AND (ref1=? OR ref2=?) LIMIT 1",
                (uid, key, key),
            ):
                out.append(
                    {"href": "/battle?" + _qs(coord=coord), "label": "its battle", "note": ""}
                )
    return out


def _qs(**values: str) -> str:
    from urllib.parse import urlencode

    return urlencode(values)


def meme_pages(r: RunReader) -> Mapping[str, Mapping[str, str | None]]:
    """The memes with a page here (those the Arena recorded a context for), by uid: that
    page's path and the meme's image."""
    idx = meme_index(r)
    return {uid: {"href": "/meme?" + _qs(id=uid), "image": idx.info[uid][1]} for uid in idx.ids}


def _warm(r: RunReader) -> None:
    meme_index(r)


PAGES = MethodPages(
    routes=(
        ("/arena", _leaderboards),
        ("/memes", _memes_page),
        ("/meme", _meme_page),
        ("/battles", _battles_page),
        ("/battle", _battle_page),
    ),
    nav=(("/arena", "Arena"), ("/memes", "Memes"), ("/battles", "Battles")),
    search=("/memes", "meme id or text"),
    served=served,
    meme_pages=meme_pages,
    warm=_warm,
    filters=filter_values,
    queries={f.__name__: f for f in (memes, meme, battles, battle, pairwise, meme_ids, meme_image)},
)
