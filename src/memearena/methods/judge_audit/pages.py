"""The Judge audit's pages in the viewer: its leaderboard (in the section's own order, with
the column it is ordered by), and per bias type the scored pairs with each judge's reply.
Registered as ``PAGES`` (``memearena.view.app.MethodPages``); templates in ``html/``.

Every string shown is untrusted (model output, dataset text, names from a config): it reaches
the page through autoescaping only."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from memearena.view.app import MethodPages, View, finite, query_int
from memearena.view.queries import RunReader, ViewError

__all__ = ["PAGES", "score_replies", "served"]

_REPLIES = "judge_audit.replies"
_SCORES = "judge_audit_scores"
"""The run's score log (``<name>.jsonl``): every scored pair, with its scores' requests."""


def _value(e: Any) -> float | None:
    v = e.get("value") if isinstance(e, dict) else None
    return float(v) if finite(v) else None


_ORDER_FIELDS = ("trust", "overall")
"""The leaderboard columns a Judge-audit section may be ordered by, in the order shown."""


def _order_field(section: dict[str, Any], rows: list[dict[str, Any]]) -> str | None:
    """The column the Judge-audit leaderboard is ordered by: the one the section names
    (``order_by``), else the shown column whose values fall with the rank (the rows keep the
    analysis's order; the viewer never sorts them)."""
    named = section.get("order_by", section.get("ranked_by"))
    if isinstance(named, str) and named:
        return named
    for name in _ORDER_FIELDS:
        got = [_value(r.get(name)) for r in rows]
        vals = [v for v in got if v is not None]
        if rows and len(vals) == len(got) and all(a >= b for a, b in itertools.pairwise(vals)):
            return name
    return None


def score_replies(
    r: RunReader, shown: list[tuple[str, str, str]], judges: list[str], scan: int = 200_000
) -> list[dict[str, dict[str, Any]]]:
    """For each ``(image, query, response)`` a Judge-audit judge was shown, per judge the
    score call that showed it (its id and raw reply); stops once every judge is found for
    every one (at most ``scan`` score calls are read)."""
    key = (tuple(shown), tuple(judges))
    memo: dict[Any, list[dict[str, dict[str, Any]]]] = r.state.setdefault(_REPLIES, {})
    hit = memo.get(key)
    if hit is not None:
        return hit
    out: list[dict[str, dict[str, Any]]] = [{} for _ in shown]
    # Matched in the payload's own JSON text (each string encoded as the key's payload is).
    tags = [
        (
            json.dumps(image),
            json.dumps(f"<query>\n{q}\n</query>", ensure_ascii=False)[1:-1],
            json.dumps(f"<response>\n{r}\n</response>", ensure_ascii=False)[1:-1],
        )
        for image, q, r in shown
    ]
    want = set(judges)
    rows = r.q(
        "SELECT c.id, c.model, c.response, r.dict, r.body FROM calls c"
        " JOIN requests r ON r.key = c.request_hash"
        " WHERE c.role='judge_audit.score' ORDER BY c.id LIMIT ?",
        (scan,),
    )
    for call_id, model, reply, d, body in rows:
        if all(want <= o.keys() for o in out):
            break
        text = r.unpack(body, r.zdict(int(d)))
        for o, (image, q_tag, r_tag) in zip(out, tags, strict=True):
            if model not in o and image in text and q_tag in text and r_tag in text:
                o[str(model)] = {"call": int(call_id), "reply": reply}
    memo[key] = out
    return out


_HASH = re.compile(r"[0-9a-f]{64}")

_ITEM_KINDS = {"judge_audit.respond": "ja_response", "judge_audit.describe": "ja_description"}
"""Roles whose step key names the item: ``item|model|request``."""


def served(r: RunReader, request_hash: str, role: str) -> list[dict[str, Any]]:
    """Where a Judge-audit call served: a response or description, the scored pairs of its
    item; a score, the pairs whose score it gave (the score log names each score's request;
    in an older log, the pairs its judge scored); a pairwise verdict (position and verbosity
    probes, kept only as the leaderboard's figures), the leaderboard."""
    if _HASH.fullmatch(request_hash) is None:
        return []
    kind = _ITEM_KINDS.get(role)
    if kind is not None:
        out: list[dict[str, Any]] = []
        rows = r.q(
            "SELECT key FROM artifacts WHERE kind=? AND key LIKE ? LIMIT 1",
            (kind, "%|" + request_hash),
        )
        for (key,) in rows:
            parts = str(key).rsplit("|", 2)
            if len(parts) == 3:
                item = parts[0]
                href = "/judge-audit/pairs?" + urlencode({"item": item})
                out.append({"href": href, "label": f"Judge-audit pairs of item {item}", "note": ""})
        return out
    kind = {"judge_audit.score": "ja_score", "judge_audit.pairwise": "ja_pairwise"}.get(role)
    if kind is None:
        return []
    # The step key is ``judge|request``: the judge as the audit named it.
    rows = r.q(
        "SELECT key FROM artifacts WHERE kind=? AND key LIKE ? LIMIT 1",
        (kind, "%|" + request_hash),
    )
    if not rows:
        return []
    judge = str(rows[0][0]).rsplit("|", 1)[0]
    if kind == "ja_pairwise":
        return [
            {
                "href": "/judge-audit#evaluators",
                "label": "Judge-audit leaderboard",
                "note": f"a position or verbosity verdict of {judge}",
            }
        ]
    out = []
    for row in _pairs_scored_by(r, request_hash):
        item, bias_type = str(row.get("id")), str(row.get("bias_type"))
        side = "unbiased" if row.get("unbiased_request") == request_hash else "biased"
        query = {"bias_type": bias_type, "judge": judge, "item": item}
        out.append(
            {
                "href": "/judge-audit/pairs?" + urlencode(query),
                "label": f"{bias_type} pair of item {item}",
                "note": f"the {side} score",
            }
        )
    if not out:  # a score log written before it named each score's request
        href = "/judge-audit/pairs?" + urlencode({"judge": judge})
        out.append({"href": href, "label": f"Judge-audit pairs scored by {judge}", "note": ""})
    return out


_SERVED_PAIRS = 5
"""Scored pairs a score call's page links to (the unperturbed item's score serves one pair per
bias type)."""


def _pairs_scored_by(r: RunReader, request_hash: str) -> list[dict[str, Any]]:
    """The first rows of the score log naming ``request_hash`` as a score's request."""
    path = r.inside(f"{_SCORES}.jsonl")
    out: list[dict[str, Any]] = []
    if path is None or not path.is_file():
        return out
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if request_hash not in line:  # most lines: no JSON parsed
                    continue
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if isinstance(row, dict) and request_hash in (
                    row.get("unbiased_request"),
                    row.get("biased_request"),
                ):
                    out.append(row)
                    if len(out) >= _SERVED_PAIRS:
                        break
    except OSError:
        return out
    return out


# ------------------------------------------------------------------ pages


def _judge_audit_page(v: View, request: web.Request) -> web.Response:
    n, r = v.reader(request)
    ja = r.board.get("judge_audit")
    if not isinstance(ja, dict):
        raise ViewError("this run has no Judge audit results")
    rows = [r for r in ja.get("leaderboard") or [] if isinstance(r, dict)]
    shown = [f for f in _ORDER_FIELDS if any(isinstance(r.get(f), dict) for r in rows)]
    return v.render(
        request,
        "judge_audit/judge_audit.html.j2",
        n=n,
        label=v.label(n),
        ja=ja,
        rows=rows,
        columns=shown,
        order=_order_field(ja, rows),
    )


def _ja_pairs_page(v: View, request: web.Request) -> web.Response:
    n, r = v.reader(request)
    q = request.query
    match = {
        "bias_type": q.get("bias_type", ""),
        "judge": q.get("judge", ""),
        "id": q.get("item", ""),
    }
    page = r.jsonl(_SCORES, match, query_int(request, "offset"), 50)
    ja = r.board.get("judge_audit") or {}
    examples = (ja.get("examples") or {}).get(q.get("bias_type", "")) or []
    shown = [
        (str(s.get("image", "")), str(s.get("query", "")), str(s.get("response", "")))
        for e in examples
        for s in (e.get("unbiased") or {}, e.get("biased") or {})
    ]
    judges = sorted({j for e in examples for j in e.get("scores") or {}})
    found = score_replies(r, shown, judges)
    replies = [{"unbiased": found[2 * i], "biased": found[2 * i + 1]} for i in range(len(examples))]
    return v.render(
        request,
        "judge_audit/ja_pairs.html.j2",
        n=n,
        label=v.label(n),
        page=page,
        ja=ja,
        examples=examples,
        replies=replies,
    )


PAGES = MethodPages(
    routes=(("/judge-audit", _judge_audit_page), ("/judge-audit/pairs", _ja_pairs_page)),
    nav=(("/judge-audit", "Judge audit"),),
    served=served,
    image_folders=("judge_audit/images",),
    queries={"score_replies": score_replies},
)
