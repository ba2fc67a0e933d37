"""Read-only queries over one run directory (``run.db`` and ``leaderboard.json``) for the
viewer's pages: the pages never see SQL, and nothing here writes.

Every string returned is untrusted (model output, dataset text, model names from a config):
the templates escape it. Lists are paginated in SQL (``LIMIT``/``OFFSET``), so a page costs
the same on a 10,000-meme run as on the demo; the one exception is the meme index (each meme's
text and image hash, read from its context request once per run and kept in memory)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from memearena.engine.registry import method_names
from memearena.errors import MemearenaError
from memearena.jsonsafe import loads_bounded
from memearena.store.images import find_image
from memearena.store.requests import decode_payload, unpack

__all__ = [
    "OUTCOMES",
    "Page",
    "RunReader",
    "ViewError",
    "find_runs",
    "resolve_votes",
]

SEP = "\x1f"
"""Separates the parts of a member coord (``pipelines.arena.SEP``)."""

OUTCOMES = ("refusal", "parse_failure", "error")
"""Outcomes a list can be filtered by."""

MAX_PER_PAGE = 200


class ViewError(MemearenaError):
    """A directory the viewer cannot show (missing, not a run)."""


class DamagedRecord(ViewError):
    """A record of the run that cannot be read (a damaged or crafted row or file)."""


DIFF_MAX_UNITS = 2_000
"""Guideline rounds are compared word by word when their words and spaces multiply to at most
this squared (real rounds: a few hundred words each)."""

BOARD_MAX_BYTES = 512 * 1024 * 1024
"""The largest leaderboard.json read (the demo's is under 1 MB)."""


@dataclass(frozen=True)
class Page:
    """One page of a list: its rows, where it starts and whether more follow."""

    rows: list[dict[str, Any]]
    offset: int
    limit: int
    more: bool
    total: int | None = None


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching itself anywhere (``%`` and ``_`` escaped)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _last(key: str) -> str:
    """The request hash that ends an artifact key."""
    return key.rsplit("|", 1)[-1]


def _is_run(path: Path) -> bool:
    return (path / "run.db").is_file() or (path / "leaderboard.json").is_file()


def find_runs(root: Path, depth: int = 3) -> list[Path]:
    """Run directories at or under ``root`` (``root`` itself when it is one, with any runs
    nested in it), sorted by path. Raises ViewError when there is none."""
    root = Path(root)
    if not root.is_dir():
        raise ViewError(f"{root}: no such directory")
    found: list[Path] = []

    def walk(p: Path, d: int) -> None:
        if _is_run(p):
            found.append(p)
        if d == 0:
            return
        try:
            children = sorted(c for c in p.iterdir() if c.is_dir() and not c.is_symlink())
        except OSError:
            return
        for c in children:
            walk(c, d - 1)

    walk(root, depth)
    if not found:
        raise ViewError(f"{root}: not a run directory (no run.db or leaderboard.json here)")
    return found


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


def _verdict_outcome(value: dict[str, Any] | None) -> str:
    if value is None:
        return "error"
    if value.get("refusal"):
        return "refusal"
    if "error" in value:
        return "parse_failure"
    return "ok"


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


def _word_diff(old: str, new: str) -> list[tuple[str, str]]:
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


class RunReader:
    """One run directory, opened read-only (``run.db`` with ``mode=ro``; the file is never
    written, not even its WAL index when the directory is read-only)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = Path(run_dir)
        if not _is_run(self.dir):
            raise ViewError(f"{self.dir}: not a run directory (no run.db or leaderboard.json)")
        self._root = self.dir.resolve()
        self.board_error: str | None = None
        """Why leaderboard.json was not read (damaged, or a link out of the run), or None."""
        self._db: sqlite3.Connection | None = None
        db_path = self.dir / "run.db"
        if db_path.is_file() and self.inside("run.db") is None:
            raise ViewError(f"{db_path}: a link to a file outside the run directory, not read")
        if db_path.is_file():
            try:
                self._db = sqlite3.connect(
                    f"{db_path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
                )
                self._db.execute("PRAGMA query_only=1")
                self._db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            except sqlite3.Error as e:
                raise ViewError(f"{db_path}: not a readable run database ({e})") from None
        self._board: dict[str, Any] | None = None
        self._board_mtime: float | None = None
        self._memes: _MemeIndex | None = None
        self._zdicts: dict[int, bytes] | None = None
        self._pairwise: tuple[float, dict[str, Any]] | None = None
        self._summaries: dict[str, tuple[tuple[Any, ...], Any]] = {}
        self._replies: dict[tuple[Any, ...], list[dict[str, dict[str, Any]]]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    # ------------------------------------------------------------------ basics
    def _q(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self._db is None:
            return []
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):  # an older run: that part is not on record
                return []
            raise

    def inside(self, name: str) -> Path | None:
        """The file ``name`` of the run directory, links resolved, or None when it resolves
        to a place outside the run directory: only the run's own files are ever read."""
        try:
            path = (self._root / name).resolve()
        except (OSError, RuntimeError):
            return None
        return path if path.is_relative_to(self._root) else None

    def _has_table(self, name: str) -> bool:
        return bool(self._q("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)))

    @property
    def board(self) -> dict[str, Any]:
        """leaderboard.json (re-read when it changes), ``{}`` when absent or unreadable."""
        path = self.inside("leaderboard.json")
        if path is None:
            self.board_error = (
                "leaderboard.json is a link to a file outside the run directory: not read"
            )
            return {}
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return {}
        if self._board is None or self._board_mtime != mtime:
            self.board_error = None
            try:
                # Bounded: a deeply nested or huge file is a damaged record, not a crash.
                board = loads_bounded(path.read_bytes(), max_bytes=BOARD_MAX_BYTES, allow_nan=True)
            except OSError as e:
                board, self.board_error = {}, f"leaderboard.json cannot be read ({e.strerror})"
            except ValueError as e:
                board, self.board_error = {}, f"leaderboard.json is damaged ({e}): not shown"
            if not isinstance(board, dict):
                board, self.board_error = {}, "leaderboard.json is damaged (not an object)"
            self._board = board
            self._board_mtime = mtime
        return self._board

    def artifact(self, kind: str, key: str) -> dict[str, Any] | None:
        rows = self._q("SELECT value FROM artifacts WHERE kind=? AND key=?", (kind, key))
        return json.loads(rows[0][0]) if rows else None

    def _prefixed(self, kind: str, prefix: str) -> list[tuple[str, dict[str, Any]]]:
        rows = self._q(
            "SELECT key, value FROM artifacts WHERE kind=? AND key >= ? AND key < ? ORDER BY key",
            (kind, prefix, prefix + "\U0010ffff"),
        )
        return [(k, json.loads(v)) for k, v in rows]

    # ------------------------------------------------------------------ overview
    def warm(self) -> None:
        """Compute what the first pages need (overview, filter values, meme index)."""
        self.overview()
        self.filter_values()
        self._meme_index()

    def _stamp(self) -> tuple[Any, ...]:
        """What a run's files look like now: equal stamps, equal contents (a live run moves
        its WAL; a finished one keeps its stamp, so its summaries are computed once)."""
        out: list[Any] = []
        for name in ("run.db", "run.db-wal", "leaderboard.json"):
            try:
                st = (self.dir / name).stat()
                out.append((st.st_size, st.st_mtime_ns))
            except OSError:
                out.append(None)
        return tuple(out)

    def _cached(self, name: str, compute: Any) -> Any:
        stamp = self._stamp()
        hit = self._summaries.get(name)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = compute()
        self._summaries[name] = (stamp, value)
        return value

    def overview(self) -> dict[str, Any]:
        """Run facts, status, spend, calls, tokens, errors by reason, simulated notes."""
        return dict(self._cached("overview", self._overview))

    def _overview(self) -> dict[str, Any]:
        board = self.board
        run: dict[str, Any] = board["run"] if isinstance(board.get("run"), dict) else {}
        status = board.get("status") if isinstance(board.get("status"), dict) else None
        usage = self._q(
            "SELECT model, COUNT(*), SUM(status='cached'), SUM(status='error'),"
            " SUM(status='refusal'), SUM(input_tokens), SUM(output_tokens), SUM(cost_usd),"
            " SUM(latency_s), SUM(status='sent'),"
            " SUM(CASE WHEN status='sent' THEN cost_bound_usd ELSE 0 END)"
            " FROM calls GROUP BY model ORDER BY model"
        )
        cols = (
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
        models = [dict(zip(cols, (v or 0 for v in r), strict=True)) for r in usage]
        for m in models:
            m["model"] = str(m["model"])
        totals = {c: sum(m[c] for m in models) for c in cols[1:]}
        errors = [
            {"kind": k, "reason": r, "count": n}
            for k, r, n in self._q(
                "SELECT kind, reason, COUNT(*) FROM errors GROUP BY kind, reason"
                " ORDER BY COUNT(*) DESC, kind, reason"
            )
        ]
        call_errors = [
            {"kind": k or "unknown", "count": n}
            for k, n in self._q(
                "SELECT error_kind, COUNT(*) FROM calls WHERE status='error'"
                " GROUP BY error_kind ORDER BY COUNT(*) DESC"
            )
        ]
        simulated = []
        if isinstance(board.get("simulated"), dict):
            simulated.append(str(board["simulated"].get("note") or "targets are simulated"))
        for method in method_names():
            sec = board.get(method)
            if isinstance(sec, dict) and isinstance(sec.get("simulated"), dict):
                simulated.append(str(sec["simulated"].get("note") or f"{method} is simulated"))
        if not status:
            state = "unknown"
        elif status.get("complete"):
            state = "complete"
        elif any("cap" in str(p) for p in status.get("problems") or []) or status.get("stopped"):
            state = "capped"
        else:
            state = "incomplete"
        return {
            "name": run.get("name") or self.dir.name,
            "date": run.get("date"),
            "seed": run.get("seed"),
            "config_sha256": run.get("config_sha256"),
            "version": run.get("version"),
            "status": status,
            "state": state,
            "problems": [str(p) for p in (status or {}).get("problems") or []],
            "models": models,
            "totals": totals,
            "errors": errors,
            "call_errors": call_errors,
            "simulated": simulated,
            "methods": [m for m in method_names() if m in board],
            "requests_kept": self._has_table("requests"),
        }

    # ------------------------------------------------------------------ memes
    def _meme_index(self) -> _MemeIndex:
        with self._lock:
            if self._memes is not None:
                return self._memes
            idx = _MemeIndex()
            rows = self._q("SELECT key FROM artifacts WHERE kind='context' ORDER BY key")
            keys: dict[str, str] = {}
            for (key,) in rows:
                uid = key.rsplit("|", 1)[0]
                keys[uid] = key  # the latest context of a meme (keys sort by hash: any one)
            for uid, key in keys.items():
                req = self.request(_last(key))
                text, image = _meme_text(req) if req else ("", None)
                idx.ids.append(uid)
                idx.info[uid] = (text, image, key)
            self._memes = idx
            return idx

    def memes(
        self,
        q: str = "",
        outcome: str = "",
        model: str = "",
        offset: int = 0,
        limit: int = 50,
    ) -> Page:
        """Memes of the Arena, searched by id or text (``q``, case-insensitive), filtered by
        an outcome some call for them had (refusal, parse failure, error), optionally of one
        model."""
        idx = self._meme_index()
        ids = idx.ids
        if q:
            ql = q.lower()
            ids = [u for u in ids if ql in u.lower() or ql in idx.info[u][0].lower()]
        if outcome:
            hit = self._memes_with(outcome, model)
            ids = [u for u in ids if u in hit]
        limit = max(1, min(limit, MAX_PER_PAGE))
        chunk = ids[offset : offset + limit]
        rows = [{"uid": u, "text": idx.info[u][0], "image": idx.info[u][1]} for u in chunk]
        return Page(rows, offset, limit, offset + limit < len(ids), len(ids))

    def _memes_with(self, outcome: str, model: str = "") -> set[str]:
        if outcome == "refusal":
            sql = (
                "SELECT m.meme, a.key FROM members m JOIN artifacts a ON a.kind='answer'"
                " AND a.key=m.ref1 WHERE m.view='arena.answers'"
                " AND json_extract(a.value, '$.refusal')=1"
            )
            rows = self._q(sql)
            return {u for u, k in rows if not model or k.split("|")[-2] == model}
        if outcome == "parse_failure":
            rows = self._q(
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
            rows = self._q("SELECT key FROM errors")
            known = set(self._meme_index().ids)
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

    def meme(self, uid: str) -> dict[str, Any] | None:
        """Everything the Arena did with one meme: text, image, contexts, answers per context,
        guideline rounds, battles with both orders' raw verdicts."""
        idx = self._meme_index()
        if uid not in idx.info:
            return None
        text, image, ctx_key = idx.info[uid]
        ctx = self.artifact("context", ctx_key) or {}
        contexts = ctx.get("contexts") or []
        answers: dict[str, list[dict[str, Any]]] = {}
        for key, value in self._q(
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
                    "outcome": _verdict_outcome(v),
                    "format_ok": v.get("format_ok"),
                    "call": self.call_for(_last(key)),
                }
            )
        rounds = []
        for key, v in self._prefixed("guideline_round", uid + "|"):
            parts = key[len(uid) + 1 :].split("|")
            rounds.append(
                {
                    "round": int(parts[0]) if parts[0].isdigit() else parts[0],
                    "judge": v.get("judge"),
                    "analysis": v.get("analysis"),
                    "guideline": v.get("guideline") or "",
                    "skipped": bool(v.get("skipped")),
                    "call": self.call_for(_last(key)) if len(_last(key)) == 64 else None,
                }
            )
        rounds.sort(key=lambda r: (str(r["round"]).zfill(4), str(r["judge"])))
        for i, r in enumerate(rounds):
            r["changed"] = i == 0 or r["guideline"] != rounds[i - 1]["guideline"]
            r["diff"] = (
                _word_diff(str(rounds[i - 1]["guideline"]), str(r["guideline"])) if i else []
            )
        battles = self.battles(meme=uid, limit=MAX_PER_PAGE).rows
        return {
            "uid": uid,
            "text": text,
            "image": image,
            "contexts": contexts,
            "answers": answers,
            "rounds": rounds,
            "battles": battles,
            "errors": [
                {"kind": k, "key": key, "reason": r}
                for k, key, r in self._q(
                    "SELECT kind, key, reason FROM errors WHERE key LIKE ? ESCAPE '\\'",
                    (_like(uid + "|"),),
                )
            ],
        }

    # ------------------------------------------------------------------ battles
    def _judged_views(self) -> list[str]:
        arena = self.board.get("arena")
        setting = arena.get("setting") if isinstance(arena, dict) else None
        views = [f"arena.judged:{setting}"] if setting else []
        if not views or not self._q("SELECT 1 FROM members WHERE view=? LIMIT 1", (views[0],)):
            views = [
                v
                for (v,) in self._q(
                    "SELECT DISTINCT view FROM members WHERE view >= 'arena.judged:'"
                    " AND view < 'arena.judged;'"
                )
            ]
        return views

    def _policy(self) -> str:
        cfg = (self.board.get("run") or {}).get("config") or {}
        arena = cfg.get("arena") if isinstance(cfg, dict) else None
        return str((arena or {}).get("resolution") or "tie")

    def battles(
        self,
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
        views = self._judged_views()
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
            params.append("%" + SEP + _like(judge)[1:-1])
        if model:
            where.append("m.coord LIKE ? ESCAPE '\\'")
            params.append(_like(SEP + model + SEP))
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
        rows = self._q(sql, (*params, limit + 1, offset))
        policy = self._policy()
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
            out.append(self._pair(uid, level, x, y, j, r1, r2, v1, v2, policy, criterion, coord))
        return Page(out, offset, limit, len(rows) > limit)

    def _pair(
        self,
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
            "forward_outcome": _verdict_outcome(fwd),
            "backward_outcome": _verdict_outcome(bwd),
            "forward_key": r1,
            "backward_key": r2,
            "forward": fwd,
            "backward": bwd,
            "criteria": per,
            "policy": policy,
        }

    def battle(self, coord: str) -> dict[str, Any] | None:
        """One judged pair with both orders' calls (request as sent and raw reply)."""
        for view in self._judged_views():
            rows = self._q(
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
                pair = self._pair(uid, level, x, y, j, r1, r2, v1, v2, self._policy(), "", c)
                pair["forward_call"] = self.call_for(_last(r1)) if r1 else None
                pair["backward_call"] = self.call_for(_last(r2)) if r2 else None
                pair["shown"] = self._judged_texts(_last(r1) if r1 else "")
                return pair
        return None

    def _judged_texts(self, request_hash: str) -> dict[str, str | None]:
        """What the judge was shown in the first order, as sent: the task, the guideline
        (None: judged without one) and the two answers (A, then B)."""
        req = self.request(request_hash) if request_hash else None
        text = "\n".join(
            str(part.get("text", ""))
            for m in (req or {}).get("messages", [])
            for part in m.get("content", [])
            if part.get("type") == "text"
        )
        return {
            tag: _tagged(text, tag) for tag in ("task", "guideline", "response_a", "response_b")
        }

    # ------------------------------------------------------------------ calls
    _CALL_COLS = (
        "id",
        "request_hash",
        "model",
        "role",
        "status",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "latency_s",
        "attempts",
        "error",
        "error_kind",
        "created_at",
    )

    def calls(
        self,
        *,
        model: str = "",
        role: str = "",
        status: str = "",
        offset: int = 0,
        limit: int = 50,
    ) -> Page:
        """Calls on record, oldest first, filtered by model, role and status (``ok``,
        ``cached``, ``refusal``, ``error``, ``sent``, ``budget``)."""
        limit = max(1, min(limit, MAX_PER_PAGE))
        where, params = [], []
        for col, val in (("model", model), ("role", role), ("status", status)):
            if val:
                where.append(f"{col}=?")
                params.append(val)
        sql = f"SELECT {', '.join(self._CALL_COLS)} FROM calls"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id LIMIT ? OFFSET ?"
        rows = self._q(sql, (*params, limit + 1, offset))
        out = [dict(zip(self._CALL_COLS, r, strict=True)) for r in rows[:limit]]
        return Page(out, offset, limit, len(rows) > limit)

    def call_for(self, request_hash: str) -> int | None:
        """The id of the first call that sent this request (None if none is on record)."""
        rows = self._q(
            "SELECT id FROM calls WHERE request_hash=? ORDER BY id LIMIT 1", (request_hash,)
        )
        return int(rows[0][0]) if rows else None

    def call(self, call_id: int) -> dict[str, Any] | None:
        """One call: its record, reply, the request as sent, and the other calls that sent the
        same request (retries of a step, cache hits)."""
        cols = (*self._CALL_COLS, "response", "cost_bound_usd")
        rows = self._q(f"SELECT {', '.join(cols)} FROM calls WHERE id=?", (call_id,))
        if not rows:
            return None
        out = dict(zip(cols, rows[0], strict=True))
        try:
            out["request"], out["request_damage"] = self.request(out["request_hash"]), None
        except DamagedRecord as e:
            out["request"], out["request_damage"] = None, str(e)
        out["same_request"] = [
            {"id": i, "status": s, "created_at": t}
            for i, s, t in self._q(
                "SELECT id, status, created_at FROM calls WHERE request_hash=? AND id<>?"
                " ORDER BY id LIMIT 50",
                (out["request_hash"], call_id),
            )
        ]
        return out

    def call_context(self, request_hash: str, role: str) -> list[dict[str, Any]]:
        """What a call served, where the run records it: its Arena meme (a context, an answer,
        a guideline round), its battle (a judge's verdict), its Adapt chain step or records
        (an answer or score of a rewrite or an original). Each is ``{"what", ...fields}``;
        ``[]`` when nothing on record names the request."""
        if len(request_hash) != 64:
            return []
        tail = "%|" + request_hash
        out: list[dict[str, Any]] = []
        kind = {
            "arena.answer": "answer",
            "arena.context": "context",
            "arena.guideline_draft": "guideline_round",
            "arena.guideline_refine": "guideline_round",
            "arena.judge": "verdict",
        }.get(role)
        if kind is not None:
            rows = self._q(
                "SELECT key FROM artifacts WHERE kind=? AND key LIKE ? LIMIT 1", (kind, tail)
            )
            known = set(self._meme_index().ids)
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
                if uid is not None:
                    out.append({"what": "meme", "meme": uid})
                if kind == "verdict" and uid is not None:
                    for (coord,) in self._q(
                        "SELECT coord FROM members WHERE meme=? AND (ref1=? OR ref2=?) LIMIT 1",
                        (uid, key, key),
                    ):
                        out.append({"what": "battle", "coord": coord})
        elif role in ("adapt.answer", "adapt.score"):
            for (value,) in self._q(
                "SELECT value FROM artifacts WHERE kind=? AND key=?", (role, request_hash)
            ):
                parts = str(json.loads(value).get("for") or "").split("|")
                if len(parts) < 5:
                    continue
                meme, tag, category, target = parts[0], parts[1], parts[2], parts[3]
                try:
                    repeat = int(parts[4])
                except ValueError:
                    continue
                step = (
                    self.chain_steps().get((meme, tag, category, target, repeat)) if tag else None
                )
                if step is not None:
                    out.append({"what": "chain", "line": step[0], "step": step[1], "meme": meme})
                out.append({"what": "records", "model": target, "category": category, "meme": meme})
        return out

    def chain_steps(self) -> dict[tuple[str, str, str, str, int], tuple[int, int]]:
        """The first chain step showing each rewrite, by (meme, rewrite tag, category, target,
        repeat) as an Adapt answer's ``for`` names it: (chain line, step)."""
        return dict(self._cached("chain_steps", self._chain_steps))

    def _chain_steps(self) -> dict[tuple[str, str, str, str, int], tuple[int, int]]:
        out: dict[tuple[str, str, str, str, int], tuple[int, int]] = {}
        for n, row in self._lines("adapt_chains"):
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

    def request(self, key: str) -> dict[str, Any] | None:
        """The request on record under ``key``, decoded (None when not kept); DamagedRecord
        when its row cannot be read (a dictionary not on record, a body past the bound)."""
        rows = self._q("SELECT dict, body FROM requests WHERE key=?", (key,))
        if not rows:
            return None
        d, body = rows[0]
        for fresh in (False, True):  # a dictionary written after we first read them: once
            if self._zdicts is None or fresh:
                self._zdicts = {
                    int(i): bytes(b) for i, b in self._q("SELECT id, body FROM request_dicts")
                }
            zdict = self._zdicts.get(int(d))
            if zdict is not None or not int(d):
                break
        else:
            raise DamagedRecord(
                f"request {key}: packed with dictionary {int(d)}, which is not on record"
            )
        try:
            return {"key": key, **decode_payload(unpack(body, zdict))}
        except Exception as e:  # untrusted bytes: zlib, zstd, UTF-8 and JSON all raise
            raise DamagedRecord(f"request {key}: unreadable ({type(e).__name__}: {e})") from None

    def filter_values(self) -> dict[str, list[str]]:
        """Values the filters offer: models, judges, criteria, roles, statuses."""
        return dict(self._cached("filters", self._filter_values))

    def _filter_values(self) -> dict[str, list[str]]:
        arena: dict[str, Any] = (
            self.board["arena"] if isinstance(self.board.get("arena"), dict) else {}
        )
        cfg = ((self.board.get("run") or {}).get("config") or {}).get("arena") or {}
        models = [str(r.get("model")) for r in arena.get("overall") or []]
        judges = [str(j.get("judge")) for j in arena.get("judges") or []]
        criteria = list(arena.get("by_criterion") or cfg.get("criteria") or [])
        call_models = [str(m) for (m,) in self._q("SELECT DISTINCT model FROM calls ORDER BY 1")]
        roles = [str(r) for (r,) in self._q("SELECT DISTINCT role FROM calls ORDER BY 1")]
        return {
            "models": models,
            "judges": judges,
            "criteria": [str(c) for c in criteria],
            "call_models": call_models,
            "roles": roles,
            "statuses": ["ok", "cached", "refusal", "error", "sent", "budget"],
            "adapt_models": [
                str(m.get("model"))
                for m in ((self.board.get("adapt") or {}).get("models") or [])
                if isinstance(m, dict)
            ],
            "categories": [
                str(c.get("name"))
                for c in ((self.board.get("adapt") or {}).get("taxonomy") or [])
                if isinstance(c, dict)
            ],
        }

    # ------------------------------------------------------------------ images
    def image_bytes(self, sha256: str) -> bytes | None:
        """The bytes of the image with this content hash as the run kept it (``store.images``;
        a Judge audit of an older run kept its own under ``judge_audit/images``): only a
        regular file inside the run directory once links are resolved, and only when its
        bytes still hash to ``sha256``."""
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            return None
        root = self.dir.resolve()
        found = find_image(self.dir, sha256)
        candidates = [found] if found is not None else []
        candidates += [
            self.dir / "judge_audit" / "images" / f"{sha256}.{ext}"
            for ext in ("png", "jpg", "jpeg", "webp", "gif")
        ]
        for p in candidates:
            try:
                real = p.resolve(strict=True)
                if not real.is_relative_to(root) or not real.is_file():
                    continue
                data = real.read_bytes()
            except OSError:
                continue
            if hashlib.sha256(data).hexdigest() == sha256:
                return data
        return None

    def dataset_image_path(self, sha256: str) -> Path | None:
        """The dataset file a run without its own copy prepared this image from
        (``image_hashes``, checked unchanged): the caller serves it only once preparing it
        again gives ``sha256``."""
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            return None
        for path, size, mtime_ns in self._q(
            "SELECT path, size, mtime_ns FROM image_hashes WHERE sha256=?", (sha256,)
        ):
            p = Path(path)
            try:
                st = p.stat()
            except OSError:
                continue
            if st.st_size == size and st.st_mtime_ns == mtime_ns:
                return p
        return None

    def meme_ids(self) -> frozenset[str]:
        """The memes with a page of their own (those the Arena recorded a context for)."""
        return frozenset(self._meme_index().ids)

    def meme_image(self, uid: str) -> str | None:
        """The image hash of an Arena meme (None when the run has no context for it)."""
        info = self._meme_index().info.get(uid)
        return info[1] if info else None

    def pairwise(self) -> dict[str, Any]:
        """Pairwise win rates (ties count half) and battle counts between models, as the Arena's
        analysis stored them with the leaderboard (``arena.pairwise``, computed from the battles
        the leaderboard was fitted on): a page never re-reads the battles. Only a run written
        before the analysis stored them is read from ``battles.jsonl``, once per version of the
        file."""
        arena = self.board.get("arena")
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
                    "count": {
                        x: {y: games[at[x]][at[y]] for y in ranked if met(x, y)} for x in ranked
                    },
                }
        path = self.inside("battles.jsonl")
        if path is None:
            return {}
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return {}
        if self._pairwise is not None and self._pairwise[0] == mtime:
            return self._pairwise[1]
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
                x: {y: wins[(x, y)] / count[(x, y)] for y in models if (x, y) in count}
                for x in models
            },
            "count": {x: {y: count[(x, y)] for y in models if (x, y) in count} for x in models},
        }
        self._pairwise = (mtime, out)
        return out

    def score_replies(
        self, shown: list[tuple[str, str, str]], judges: list[str], scan: int = 200_000
    ) -> list[dict[str, dict[str, Any]]]:
        """For each ``(image, query, response)`` a Judge-audit judge was shown, per judge the
        score call that showed it (its id and raw reply); stops once every judge is found for
        every one (at most ``scan`` score calls are read)."""
        key = (tuple(shown), tuple(judges))
        hit = self._replies.get(key)
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
        if self._zdicts is None:
            self._zdicts = {
                int(i): bytes(b) for i, b in self._q("SELECT id, body FROM request_dicts")
            }
        want = set(judges)
        rows = self._q(
            "SELECT c.id, c.model, c.response, r.dict, r.body FROM calls c"
            " JOIN requests r ON r.key = c.request_hash"
            " WHERE c.role='judge_audit.score' ORDER BY c.id LIMIT ?",
            (scan,),
        )
        for call_id, model, reply, d, body in rows:
            if all(want <= o.keys() for o in out):
                break
            text = unpack(body, self._zdicts.get(int(d)))
            for o, (image, q_tag, r_tag) in zip(out, tags, strict=True):
                if model not in o and image in text and q_tag in text and r_tag in text:
                    o[str(model)] = {"call": int(call_id), "reply": reply}
        self._replies[key] = out
        return out

    def adapt_answer(
        self, meme: str, text: str | None, category: str, target: str, repeat: int
    ) -> dict[str, Any] | None:
        """The target's answer to a meme (``text``: a rewrite of it; None: the original), with
        its call and the hash of the image it was shown."""
        tag = "rw:" + hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""
        for_key = f"{meme}|{tag}|{category}|{target}|{repeat}"
        # A run may add parts after these (the null world does): the key or any extension.
        rows = self._q(
            "SELECT key, value FROM artifacts WHERE kind='adapt.answer'"
            " AND (json_extract(value, '$.for')=? OR json_extract(value, '$.for') LIKE ?"
            " ESCAPE '\\') LIMIT 1",
            (for_key, _like(for_key + "|")[1:]),
        )
        if not rows:
            return None
        key, value = rows[0]
        v = json.loads(value)
        req = self.request(key)
        image = None
        for m in (req or {}).get("messages", []):
            for part in m.get("content", []):
                if part.get("type") == "image":
                    image = part.get("sha256")
        return {
            "answer": v.get("answer") or v.get("raw") or v.get("error") or "",
            "outcome": _verdict_outcome(v),
            "call": self.call_for(key),
            "image": image,
        }

    # ------------------------------------------------------------------ adapt / judge audit
    def jsonl(self, name: str, match: dict[str, str], offset: int = 0, limit: int = 50) -> Page:
        """Rows of a run's JSONL output (``adapt_chains``, ``adapt_scores``,
        ``judge_audit_scores``) whose fields equal ``match``, each with its line number."""
        if name not in ("adapt_chains", "adapt_scores", "judge_audit_scores"):
            raise ViewError(f"unknown output {name!r}")
        limit = max(1, min(limit, MAX_PER_PAGE))
        out: list[dict[str, Any]] = []
        seen = 0
        more = False
        for n, row in self._lines(name):
            if any(str(row.get(k)) != v for k, v in match.items() if v):
                continue
            if seen >= offset:
                if len(out) == limit:
                    more = True
                    break
                out.append({"line": n, **row})
            seen += 1
        return Page(out, offset, limit, more)

    def chain_lines(self) -> dict[tuple[str, str, int, str, str], int]:
        """Line numbers of the refinement chains in ``adapt_chains.jsonl`` by (target,
        category, repeat, seed, mode): what links a weakness row to its chain page."""
        return dict(self._cached("chain_lines", self._chain_lines))

    def _chain_lines(self) -> dict[tuple[str, str, int, str, str], int]:
        out: dict[tuple[str, str, int, str, str], int] = {}
        for n, row in self._lines("adapt_chains"):
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

    def jsonl_line(self, name: str, line: int) -> dict[str, Any] | None:
        for n, row in self._lines(name):
            if n == line:
                return row
        return None

    def _lines(self, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
        path = self.inside(f"{name}.jsonl")
        if path is None:
            return
        try:
            f = path.open(encoding="utf-8")
        except OSError:
            return
        with f:
            for n, line in enumerate(f, start=1):
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):  # a damaged line is skipped
                    continue
                if isinstance(row, dict):
                    yield n, row
