"""Re-analysis of AdamMeme's published refinement logs (``log_<category>.json``), as published.

Each log is a JSON list of steps ``{meme_text, explanation, misbelief, meme_image_path, answer,
ref_ans, comparison, score, task, run_step}``; a refused step is ``{meme_image_path, task,
score: "拒答"}``; a rewrite the refiner refused or the checker rejected is logged with
``score: "Refusal"`` / ``"invalid"`` and no judgment.

What the logs are, and so what this reports:

- **Every judged step is kept, with the authors' recorded ``score``** (what their code read with
  ``get_gpt4o_score``: the last ``[[n]]``, else ``Rating: n``). The comparison text is re-read
  with ``prompts.parse_score`` and the steps where that reading differs (or finds nothing) are
  counted, never silently substituted.
- **Every logged step is a rewrite**, run_step 0 included (each carries the refiner's
  ``explanation``): the originals' scores are in AdamMeme's ``scoring_res.json``, which is not
  among the logs. Without ``originals`` there are no "original" figures at all.
- **Chains are rebuilt per category file**, never across files. With AdamMeme's seed flags
  (``data/data5k/cls_res_full.json``: ``{category: [{image, seed, ...}]}``, the ``seed`` flag of
  every meme its refinement started a chain from; found in the log folder or given with
  ``--seeds``) a new chain starts at each row of a seed meme that does not follow a row of the
  same meme (the released code never hops to a seed, and asks again for the same meme after a
  refused or rejected rewrite). Without them a new chain starts where run_step does not
  increase (refused or rejected rewrites carry no run_step, so a chain that began with one can
  merge into the one before it). The document says which rule was used. Refused rows keep their
  place but carry no step.
- **The selection analysis compares like with like**: a chain's first rewrite against the later
  rewrites of the same chains, and the increase of "the chain fails at any step" over "the first
  rewrite fails" next to what the continuation rule alone gives when later rewrites are no
  harder than first ones (every step failing independently at the first rewrites' rate, chains
  going on after a passing step as often as observed).

Intervals: 95% percentile bootstrap; scores resample memes (``meme_image_path``, the unit that
was sampled), the selection analysis resamples chains. A failure rate's interval is, as in a
run's own analysis, the Wilson interval over its independent units (memes, or chains) widened
to the bootstrap's where that is wider, so that 0% or 100% never reads as certain (a percentile
bootstrap of 0 failures is [0, 0]). Cost is linear in steps: the logs are
decoded element by element with the project's bounds (a too-deep or oversized element is a
per-row error, not a traceback), and every bootstrap round is one weighted sum over units.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memearena.data._json import raw_decode as bounded_raw_decode
from memearena.errors import DataError, ParseError
from memearena.jsonsafe import loads_bounded
from memearena.prompts.scores import parse_score
from memearena.stats.proportion import widened_interval

__all__ = [
    "ORIGINALS_NOTE",
    "SEEDS_FILE",
    "PublishedLogs",
    "PublishedStep",
    "analyse_published_logs",
    "category_of",
    "read_originals",
    "read_published_logs",
    "read_seed_flags",
    "strict_json",
]

REFUSED_MARK = "拒答"
"""What the published logs write in ``score`` for a refused step ("refused to answer")."""

RELEASED_CAP = 10
"""Steps per chain in the released refinement code (``run_step = 10``)."""

ORIGINALS_NOTE = (
    "every logged step is a rewrite (run_step 0 included); the originals' scores are in "
    "AdamMeme's scoring_res.json, not among the logs: no original figures without --originals"
)

_LOG_NAME = re.compile(r"^log_(?P<cat>.+)\.json$")
_MAX_FILE_BYTES = 1 << 31
_WS = re.compile(r"[ \t\n\r]*")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_SCALAR_END = re.compile(r"[^,\]]*")


@dataclass(frozen=True)
class PublishedStep:
    """One logged step."""

    category: str
    meme: str
    step: int | None
    """run_step; None for a refused or unplaced row."""
    kind: str
    """``judged`` (a recorded number), ``refused`` (拒答), ``unjudged`` (no number: a refused
    or rejected rewrite, or a failed judgment)."""
    score: float | None
    """The authors' recorded score (judged steps only)."""
    reparsed: float | None = None
    """Our reading of ``comparison`` (None: nothing readable)."""
    task: str | None = None


@dataclass
class PublishedLogs:
    """Every step of every category log (file order), and the rows that could not be read."""

    model: str
    steps: dict[str, list[PublishedStep]] = field(default_factory=dict)
    invalid: dict[str, list[str]] = field(default_factory=dict)
    originals: dict[tuple[str, str], float] | None = None
    """(category, meme) -> the original's recorded score, from ``scoring_res.json``."""
    originals_invalid: list[str] = field(default_factory=list)
    """The rows of ``scoring_res.json`` that gave no score (each named, never dropped
    silently)."""
    seeds: dict[str, set[str]] | None = None
    """category -> the memes (``meme_image_path``) AdamMeme flagged as seeds, from
    ``cls_res_full.json`` (None: not given; chains by run_step)."""
    seeds_source: str | None = None
    """Where the seed flags were read from."""
    seeds_invalid: list[str] = field(default_factory=list)
    """The rows of the seed-flag file that could not be read (each named)."""


def category_of(path: Path) -> str:
    """The category a log file names (``log_child exploitation.json``: ``child_exploitation``)."""
    m = _LOG_NAME.match(path.name)
    if m is None:
        raise DataError(f"{path}: not a log_<category>.json file")
    return _norm(m.group("cat"))


def _norm(name: str) -> str:
    return "_".join(name.strip().lower().split())


def _read_text(path: Path) -> str:
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            raise DataError(f"{path}: larger than {_MAX_FILE_BYTES:,} bytes")
        data = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    try:
        return data.decode("utf-8-sig")  # a UTF-8 byte-order mark is accepted
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None


def _skip_value(text: str, pos: int) -> int | None:
    """End of the JSON value starting at ``pos`` found without decoding it (brackets counted
    outside strings, no recursion); None when it never closes."""
    if text[pos] not in "[{":
        return _SCALAR_END.match(text, pos).end()  # type: ignore[union-attr]
    depth = 0
    for m in _TOKEN.finditer(text, pos):
        t = m.group()
        if t in "[{":
            depth += 1
        elif t in "]}":
            depth -= 1
            if depth == 0:
                return m.end()
    return None


def _elements(text: str, where: Path) -> Iterator[tuple[int, Any, str | None]]:
    """``(index, value, error)`` for every element of the JSON list in ``text``: an element
    that cannot be decoded within the bounds is an error for that row (and reading goes on
    after it); a list that cannot be delimited is a DataError naming the line."""

    def fail(pos: int, msg: str) -> DataError:
        return DataError(f"{where}:{text.count(chr(10), 0, pos) + 1}: invalid JSON ({msg})")

    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    if pos >= len(text) or text[pos] != "[":
        if pos < len(text) and text[pos] == "{":
            raise DataError(f"{where}: expected a JSON list of steps")
        raise fail(pos, "expected a JSON list of steps")
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", pos):
        return
    i = 0
    while True:
        if pos >= len(text):
            raise fail(pos, "unterminated list")
        error: str | None = None
        value: Any = None
        try:
            value, end = bounded_raw_decode(text, pos)
        except (ValueError, RecursionError) as e:
            # JSONLimitError (a 5,000-digit number, NaN), bad syntax, or nesting past the
            # recursion limit: this row is an error, the next one is read.
            skipped = _skip_value(text, pos)
            if skipped is None or skipped <= pos:
                raise fail(pos, _short(e)) from None
            end = skipped
            error = _short(e) if isinstance(e, ValueError) else "JSON nested too deeply"
        yield i, value, error
        pos = _WS.match(text, end).end()  # type: ignore[union-attr]
        if pos >= len(text):
            raise fail(pos, "unterminated list")
        if text[pos] == "]":
            if text[pos + 1 :].strip():
                raise fail(pos + 1, "extra data after the list")
            return
        if text[pos] != ",":
            raise fail(pos, "expected ',' or ']'")
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        i += 1


def _short(e: BaseException) -> str:
    msg = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
    return msg if len(msg) <= 120 else msg[:119] + "…"


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _step(category: str, row: Any, where: str) -> PublishedStep:
    """One row; raises DataError naming the row when it cannot be read."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    meme = row.get("meme_image_path")
    if not isinstance(meme, str) or not meme.strip():
        raise DataError(f"{where}: field 'meme_image_path': missing or empty")
    step = row.get("run_step")
    if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
        raise DataError(f"{where}: field 'run_step': expected a non-negative integer")
    task = row.get("task") if isinstance(row.get("task"), str) else None
    raw = row.get("score")
    if raw == REFUSED_MARK:
        return PublishedStep(category, meme, None, "refused", None, task=task)
    score = _number(raw)
    if score is None:
        if raw is None or isinstance(raw, str):
            return PublishedStep(category, meme, step, "unjudged", None, task=task)
        raise DataError(f"{where}: field 'score': expected a number, 拒答 or a status string")
    if not 1.0 <= score <= 10.0:
        # The scale is 1-10: a score outside it is a broken row, never averaged in.
        raise DataError(f"{where}: field 'score': {score:g} is outside the 1-10 scale")
    comparison = row.get("comparison")
    reparsed: float | None = None
    if isinstance(comparison, str):
        try:
            reparsed = parse_score(comparison).value
        except ParseError:
            reparsed = None
    return PublishedStep(category, meme, step, "judged", score, reparsed, task)


def read_published_logs(log_dir: str | Path) -> PublishedLogs:
    """Read every ``log_*.json`` under ``log_dir``; a malformed row is recorded, not dropped
    silently; a missing folder, no logs, or a file that is not a JSON list is a DataError."""
    root = Path(log_dir)
    if not root.is_dir():
        raise DataError(f"{root}: not a folder")
    files = sorted(p for p in root.iterdir() if p.is_file() and _LOG_NAME.match(p.name))
    if not files:
        raise DataError(f"{root}: no log_<category>.json files")
    model = root.name
    info = root / "info.json"
    if info.is_file():
        try:
            meta = loads_bounded(_read_text(info))
        except ValueError as e:
            raise DataError(f"{info}: invalid JSON ({_short(e)})") from None
        if isinstance(meta, dict) and isinstance(meta.get("model_name"), str):
            model = meta["model_name"]
    out = PublishedLogs(model)
    for path in files:
        cat = category_of(path)
        if cat in out.steps:
            raise DataError(f"{path}: a second log for category {cat!r}")
        steps = out.steps.setdefault(cat, [])
        for i, row, error in _elements(_read_text(path), path):
            try:
                if error is not None:
                    raise DataError(f"{path}: item {i}: invalid JSON ({error})")
                steps.append(_step(cat, row, f"{path}: item {i}"))
            except DataError as e:
                out.invalid.setdefault(cat, []).append(str(e))
    return out


def _category_rows(p: Path, name: str) -> tuple[list[tuple[Any, Any, str]], list[str]]:
    """The rows of one of AdamMeme's per-category files (``{category: [rows]}``, or a list of
    rows naming their ``task``) as (category, row, where it stands), and the parts that are not
    lists of rows (named, never dropped silently)."""
    try:
        doc = loads_bounded(_read_text(p), max_bytes=_MAX_FILE_BYTES)
    except ValueError as e:
        raise DataError(f"{p}: invalid JSON ({_short(e)})") from None
    rows: list[tuple[Any, Any, str]] = []
    skipped: list[str] = []
    if isinstance(doc, dict):
        for cat, rs in doc.items():
            if isinstance(rs, list):
                rows.extend((cat, r, f"{p}: {cat!r} item {i}") for i, r in enumerate(rs))
            else:
                skipped.append(f"{p}: {cat!r}: expected a list of rows")
    elif isinstance(doc, list):
        rows = [
            (r.get("task") if isinstance(r, dict) else None, r, f"{p}: item {i}")
            for i, r in enumerate(doc)
        ]
    else:
        raise DataError(f"{p}: expected {name} ({{category: [rows]}})")
    return rows, skipped


def read_originals(
    path: str | Path, problems: list[str] | None = None
) -> dict[tuple[str, str], float]:
    """AdamMeme's ``scoring_res.json`` (``{category: [{meme_image_path, score, ...}]}``, or a
    list of such rows with ``task``): (category, meme) -> the original's recorded score. A row
    that gives no score (not an object, no meme or category, a score that is not a number in
    1-10, e.g. the ``None`` of a judgment the authors could not read) is appended to
    ``problems``, naming it; a second score for the same meme too (the last one stands)."""
    p = Path(path)
    rows, skipped = _category_rows(p, "scoring_res.json")
    out: dict[tuple[str, str], float] = {}
    for cat, r, where in rows:
        if not isinstance(r, dict):
            skipped.append(f"{where}: expected a JSON object, got {type(r).__name__}")
            continue
        if not isinstance(cat, str) or not cat.strip():
            skipped.append(f"{where}: field 'task': missing (a list's rows name their category)")
            continue
        meme, score = r.get("meme_image_path"), _number(r.get("score"))
        if not isinstance(meme, str) or not meme.strip():
            skipped.append(f"{where}: field 'meme_image_path': missing or empty")
        elif score is None or not 1.0 <= score <= 10.0:
            skipped.append(
                f"{where}: field 'score': no score in 1-10 ({_short_value(r.get('score'))})"
            )
        else:
            if (_norm(cat), meme) in out:
                skipped.append(f"{where}: a second score for {meme!r} in {_norm(cat)!r}")
            out[(_norm(cat), meme)] = score
    if problems is not None:
        problems.extend(skipped)
    if not out:
        first = f"; first: {skipped[0]}" if skipped else ""
        raise DataError(f"{p}: no scored originals (meme_image_path + a numeric score){first}")
    return out


SEEDS_FILE = "cls_res_full.json"
"""AdamMeme's mined items with their seed flags (``data/data5k/``): read from the log folder
when it is there."""


def read_seed_flags(path: str | Path, problems: list[str] | None = None) -> dict[str, set[str]]:
    """AdamMeme's ``cls_res_full.json`` (``{category: [{image, seed, ...}]}``, or a list of rows
    with ``task``): category -> the memes flagged ``seed`` (by their image path, as the logs'
    ``meme_image_path`` names them). A row that cannot be read is appended to ``problems``,
    naming it; a file with no seed flag at all is a DataError."""
    p = Path(path)
    rows, skipped = _category_rows(p, SEEDS_FILE)
    out: dict[str, set[str]] = {}
    for cat, r, where in rows:
        if not isinstance(r, dict):
            skipped.append(f"{where}: expected a JSON object, got {type(r).__name__}")
            continue
        if not isinstance(cat, str) or not cat.strip():
            skipped.append(f"{where}: field 'task': missing (a list's rows name their category)")
            continue
        meme = r.get("image", r.get("meme_image_path"))
        if not isinstance(meme, str) or not meme.strip():
            skipped.append(f"{where}: field 'image': missing or empty")
            continue
        flag = r.get("seed")
        if flag not in (None, 0, 1, True, False):
            skipped.append(f"{where}: field 'seed': expected 0, 1 or null")
            continue
        if flag:
            out.setdefault(_norm(cat), set()).add(meme)
    if problems is not None:
        problems.extend(skipped)
    if not out:
        first = f"; first: {skipped[0]}" if skipped else ""
        raise DataError(f'{p}: no meme flagged as a seed (rows with "seed": 1){first}')
    return out


def _short_value(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False) if not isinstance(v, float) else repr(v)
    return text if len(text) <= 40 else text[:39] + "…"


# ---- chains -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Chain:
    category: str
    steps: tuple[PublishedStep, ...]
    """The chain's placed steps in order (judged or not)."""

    @property
    def judged(self) -> list[PublishedStep]:
        return [s for s in self.steps if s.kind == "judged"]


def _chains(
    category: str, steps: Sequence[PublishedStep], seeds: set[str] | None = None
) -> list[_Chain]:
    """Chains of one category file: with ``seeds`` (the category's seed memes), a new chain at
    each placed step of a seed meme that does not follow one of the same meme; without, a new
    chain where run_step does not increase."""
    chains: list[list[PublishedStep]] = []
    prev: PublishedStep | None = None
    for s in steps:
        if s.step is None:
            continue
        if seeds is not None:
            new = prev is None or (s.meme in seeds and s.meme != prev.meme)
        else:
            new = prev is None or prev.step is None or s.step <= prev.step
        if new:
            chains.append([])
        chains[-1].append(s)
        prev = s
    return [_Chain(category, tuple(c)) for c in chains]


def _chain_rule(logs: PublishedLogs, cats: dict[str, list[PublishedStep]]) -> dict[str, Any]:
    """Which rule rebuilt the chains, and (with seed flags) how the run_step rule compares."""
    if logs.seeds is None:
        return {
            "rule": "run_step",
            "note": "a new chain where run_step does not increase (no seed flags given: "
            f"{SEEDS_FILE} in the log folder or --seeds)",
            "source": None,
        }
    by_step = [c for cat, steps in cats.items() for c in _chains(cat, steps)]
    mid = sum(
        1
        for c in by_step
        for i, s in enumerate(c.steps)
        if i > 0 and s.meme in logs.seeds.get(c.category, set()) and s.meme != c.steps[i - 1].meme
    )
    starts = {
        (c.category, c.steps[0].meme)
        for cat, steps in cats.items()
        for c in _chains(cat, steps, logs.seeds.get(cat, set()))
    }
    flagged = {(cat, m) for cat, ms in logs.seeds.items() if cat in cats for m in ms}
    return {
        "rule": "seed_flags",
        "note": "a new chain at each seed meme's row (AdamMeme's seed flags)",
        "source": logs.seeds_source,
        "seeds_flagged": len(flagged),
        "seeds_without_a_logged_step": len(flagged - starts),
        "chains_not_starting_at_a_seed": sum(1 for k in starts if k not in flagged),
        "chains_by_run_step": len(by_step),
        "seed_memes_mid_chain_by_run_step": mid,
        "invalid": list(logs.seeds_invalid),
    }


# ---- bootstrap ----------------------------------------------------------------------------


def _weights(k: int, rounds: int, seed: int) -> Iterator[np.ndarray]:
    """Resampling multiplicities of ``k`` units, ``rounds`` rows in chunks (memory bounded)."""
    rng = np.random.default_rng(seed)
    chunk = max(1, min(rounds, 2_000_000 // max(k, 1)))
    done = 0
    while done < rounds:
        n = min(chunk, rounds - done)
        # Uniform unit draws (floor of u * k: cheaper than integers() at this volume).
        draws = np.minimum((rng.random((n, k)) * k).astype(np.intp), k - 1)
        draws += (np.arange(n, dtype=np.intp) * k)[:, None]
        yield np.bincount(draws.ravel(), minlength=n * k).reshape(n, k).astype(np.float64)
        done += n


def _boot(sums: np.ndarray, rounds: int, seed: int) -> np.ndarray:
    """(rounds x columns) resampled totals of the per-unit ``sums`` (units x columns)."""
    if rounds <= 0 or sums.shape[0] == 0:
        return np.zeros((0, sums.shape[1]))
    return np.vstack([w @ sums for w in _weights(sums.shape[0], rounds, seed)])


def _ci(samples: np.ndarray) -> list[float | None]:
    finite = samples[np.isfinite(samples)]
    if not finite.size:
        return [None, None]
    lo, hi = np.quantile(finite, [0.025, 0.975])
    return [float(lo), float(hi)]


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _point(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def _rate_ci(rate: float | None, ci: list[float | None], units: int) -> list[float | None]:
    """A failure rate's bootstrap interval widened to the Wilson interval over its ``units``
    independent units (``stats.proportion.widened_interval``)."""
    return list(widened_interval(rate, units, *ci))


# ---- analysis -----------------------------------------------------------------------------


def _score_table(
    groups: dict[str, list[PublishedStep]], threshold: float, rounds: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Average recorded score and failure rate per group (plus counts), intervals over memes:
    one resampling of memes serves every group (a meme's steps are drawn together)."""
    names = list(groups)
    memes: dict[str, int] = {}
    rows: list[tuple[int, int, float, float]] = []  # (meme, group, score, fail)
    for g, name in enumerate(names):
        for s in groups[name]:
            if s.kind == "judged" and s.score is not None:
                u = memes.setdefault(s.meme, len(memes))
                rows.append((u, g, s.score, float(s.score < threshold)))
    sums = np.zeros((len(memes), 3 * len(names)))
    for u, g, score, fail in rows:
        sums[u, 3 * g] += 1.0
        sums[u, 3 * g + 1] += score
        sums[u, 3 * g + 2] += fail
    tot = sums.sum(axis=0)
    boot = _boot(sums, rounds, seed)
    out: dict[str, dict[str, Any]] = {}
    for g, name in enumerate(names):
        steps = groups[name]
        n, sc, fl = tot[3 * g], tot[3 * g + 1], tot[3 * g + 2]
        avg_ci = _ci(_ratio(boot[:, 3 * g + 1], boot[:, 3 * g])) if len(boot) else [None, None]
        fr_boot: list[float | None] = (
            _ci(_ratio(boot[:, 3 * g + 2], boot[:, 3 * g])) if len(boot) else [None, None]
        )
        fr_ci = _rate_ci(_point(fl, n), fr_boot, int(np.count_nonzero(sums[:, 3 * g])))
        judged = [s for s in steps if s.kind == "judged"]
        out[name] = {
            "steps": len(steps),
            "scored": len(judged),
            "refused": sum(1 for s in steps if s.kind == "refused"),
            "unjudged": sum(1 for s in steps if s.kind == "unjudged"),
            "memes": len({s.meme for s in steps}),
            "avg_score": _point(sc, n),
            "avg_score_ci": avg_ci,
            "failure_rate": _point(fl, n),
            "failure_rate_ci": fr_ci,
            "reparse_disagrees": sum(1 for s in judged if s.reparsed != s.score),
        }
    return out


def _null_any_failure(p: Any, c_ok: Any, length: int) -> Any:
    """Probability that a chain holds at least one failing step when every step fails with
    probability ``p`` independently and the chain goes on after a passing step with
    probability ``c_ok``, for at most ``length`` steps (arrays broadcast)."""
    any_fail, alive = p, 1.0 - p  # alive: reached this step with no failure so far
    for _ in range(length - 1):
        alive = alive * c_ok
        any_fail = any_fail + alive * p
        alive = alive * (1.0 - p)
    return any_fail


_CHAIN_COLS = (
    "chains",  # chains with a judged first step
    "first_fail",
    "any_fail",
    "pass_steps",  # passing judged steps
    "pass_went_on",  # ... followed by another judged step of the chain
    "fail_steps",
    "fail_went_on",
    "with_later",  # chains with a judged later step
    "first_fail_with_later",
    "later_steps",
    "later_fail",
)


def _chain_sums(chains: Sequence[_Chain], threshold: float) -> np.ndarray:
    sums = np.zeros((len(chains), len(_CHAIN_COLS)))
    for i, c in enumerate(chains):
        judged = c.judged
        if not judged or judged[0] is not c.steps[0]:
            continue  # the first rewrite was not judged: nothing to compare with
        fails = [s.score is not None and s.score < threshold for s in judged]
        later = fails[1:]
        row = sums[i]
        row[0] = 1.0
        row[1] = float(fails[0])
        row[2] = float(any(fails))
        for j, f in enumerate(fails):
            went_on = float(j + 1 < len(fails))
            if f:
                row[5] += 1.0
                row[6] += went_on
            else:
                row[3] += 1.0
                row[4] += went_on
        if later:
            row[7] = 1.0
            row[8] = float(fails[0])
            row[9] = float(len(later))
            row[10] = float(sum(later))
    return sums


def _chain_stats(tot: np.ndarray, length: int) -> dict[str, np.ndarray]:
    """Every chain statistic from (resampled) column totals (rows x columns)."""
    col = {name: tot[:, i] for i, name in enumerate(_CHAIN_COLS)}
    first = _ratio(col["first_fail"], col["chains"])
    any_ = _ratio(col["any_fail"], col["chains"])
    c_ok = _ratio(col["pass_went_on"], col["pass_steps"])
    null = _null_any_failure(first, np.nan_to_num(c_ok), length) - first
    observed = any_ - first
    first_l = _ratio(col["first_fail_with_later"], col["with_later"])
    later = _ratio(col["later_fail"], col["later_steps"])
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(observed > 0, null / np.where(observed > 0, observed, 1.0), np.nan)
    return {
        "first_rewrite_failure_rate": first,
        "chain_failure_rate": any_,
        "observed_increase": observed,
        "selection_only_increase": null,
        "mechanical_share": share,
        "continue_after_pass": c_ok,
        "continue_after_failure": _ratio(col["fail_went_on"], col["fail_steps"]),
        "first_rewrite_failure_rate_in_chains_with_later": first_l,
        "later_rewrite_failure_rate": later,
        "later_minus_first": later - first_l,
    }


_RATE_UNITS = {
    "first_rewrite_failure_rate": 0,  # the chains compared
    "chain_failure_rate": 0,
    "first_rewrite_failure_rate_in_chains_with_later": 7,  # the chains with later rewrites
    "later_rewrite_failure_rate": 7,
}
"""The chain statistics that are failure rates, with the ``_CHAIN_COLS`` column counting the
chains (their independent units) each is over."""


def _selection(
    chains: Sequence[_Chain], threshold: float, rounds: int, seed: int
) -> dict[str, Any]:
    """First vs later rewrites within the same chains, and the continuation rule's
    mechanical share of the chains' failure-rate increase; intervals resample chains."""
    lengths = [len(c.steps) for c in chains]
    longest = max(lengths, default=0)
    crossing = sum(1 for c in chains if len({s.task for s in c.steps if s.task}) > 1)
    sums = _chain_sums(chains, threshold)
    tot = sums.sum(axis=0)[None, :]
    point = _chain_stats(tot, max(longest, 1))
    boot = _chain_stats(_boot(sums, rounds, seed), max(longest, 1))
    out: dict[str, Any] = {
        "chains": len(chains),
        "chains_compared": int(tot[0, 0]),
        "chains_with_later_rewrites": int(tot[0, 7]),
        "chains_crossing_categories": crossing,
        "longest_chain": longest,
        "chains_longer_than_released_cap": sum(1 for n in lengths if n > RELEASED_CAP),
        "chain_lengths": {str(n): lengths.count(n) for n in sorted(set(lengths))},
    }
    for name, values in point.items():
        v = float(values[0])
        out[name] = v if math.isfinite(v) else None
        out[name + "_ci"] = _ci(boot[name]) if len(boot[name]) else [None, None]
    for name, units in _RATE_UNITS.items():  # proportions of chains: Wilson over chains too
        out[name + "_ci"] = _rate_ci(out[name], out[name + "_ci"], int(tot[0, units]))
    return out


def _originals(
    logs: PublishedLogs,
    chains: Sequence[_Chain],
    threshold: float,
    rounds: int,
    seed: int,
) -> dict[str, Any]:
    """With scoring_res.json: the originals' failure rate per category, and the loop's
    paper-style increase (a chain fails at any step vs its seed's original)."""
    assert logs.originals is not None
    by_cat: dict[str, list[PublishedStep]] = {}
    for (cat, meme), score in logs.originals.items():
        by_cat.setdefault(cat, []).append(PublishedStep(cat, meme, None, "judged", score))
    table = _score_table(dict(sorted(by_cat.items())), threshold, rounds, seed)
    for row in table.values():
        del row["reparse_disagrees"]  # an original's judgment text is not read: nothing re-read
    pairs: list[tuple[float, float]] = []
    unmatched = 0
    for c in chains:
        judged = c.judged
        if not judged:
            continue
        orig = logs.originals.get((c.category, c.steps[0].meme))
        if orig is None:
            unmatched += 1
            continue
        fails = [s.score is not None and s.score < threshold for s in judged]
        pairs.append((float(orig < threshold), float(any(fails))))
    arr = np.array(pairs, dtype=float).reshape(-1, 2)
    boot = _boot(np.hstack([np.ones((len(arr), 1)), arr]), rounds, seed)
    diff = _ratio(boot[:, 2] - boot[:, 1], boot[:, 0]) if len(boot) else np.zeros(0)
    point = float(arr[:, 1].mean() - arr[:, 0].mean()) if len(arr) else None
    rates: dict[str, Any] = {}
    for name, col in (("seed_original_failure_rate", 1), ("chain_failure_rate", 2)):
        rate = float(arr[:, col - 1].mean()) if len(arr) else None
        ci: list[float | None] = (
            _ci(_ratio(boot[:, col], boot[:, 0])) if len(boot) else [None, None]
        )
        rates[name] = rate
        rates[name + "_ci"] = _rate_ci(rate, ci, len(arr))  # chains: the resampled units
    return {
        "categories": table,
        "chains_matched": len(arr),
        "chains_unmatched": unmatched,
        **rates,
        "increase_over_seed_original": point,
        "increase_over_seed_original_ci": _ci(diff) if len(diff) else [None, None],
        "invalid": list(logs.originals_invalid),
    }


def analyse_published_logs(
    logs: PublishedLogs, *, threshold: float = 4.0, rounds: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """The ``adapt import --json`` document (see module doc)."""
    cats = dict(sorted(logs.steps.items()))
    everything = [s for steps in cats.values() for s in steps]
    table = _score_table({**cats, "\x00overall": everything}, threshold, rounds, seed)
    overall = table.pop("\x00overall")
    for cat in table:
        table[cat]["invalid"] = len(logs.invalid.get(cat, []))
    overall["invalid"] = sum(len(v) for v in logs.invalid.values())
    judged = [s for s in everything if s.kind == "judged"]
    chains = [
        c
        for cat, steps in cats.items()
        for c in _chains(cat, steps, None if logs.seeds is None else logs.seeds.get(cat, set()))
    ]
    doc: dict[str, Any] = {
        "model": logs.model,
        "failure_threshold": threshold,
        "scores": "the authors' recorded score of every judged step",
        "reparse": {
            "agree": sum(1 for s in judged if s.reparsed == s.score),
            "disagree": sum(1 for s in judged if s.reparsed is not None and s.reparsed != s.score),
            "unreadable": sum(1 for s in judged if s.reparsed is None),
        },
        "categories": table,
        "overall": overall,
        "selection": _selection(chains, threshold, rounds, seed),
        "chain_rule": _chain_rule(logs, cats),
        "originals": None,
        "originals_note": ORIGINALS_NOTE,
        "invalid": {cat: errs for cat, errs in sorted(logs.invalid.items())},
    }
    if logs.originals is not None:
        doc["originals"] = _originals(logs, chains, threshold, rounds, seed)
        doc["originals_note"] = "originals' scores from scoring_res.json (--originals)"
    return strict_json(doc)


def strict_json(doc: Any) -> Any:
    """``doc`` with every non-finite float replaced by None, and (for a dict at the top) the
    paths replaced listed under ``non_finite``: what ``json.dumps(allow_nan=False)`` accepts."""
    found: list[str] = []

    def walk(v: Any, path: str) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            found.append(path)
            return None
        if isinstance(v, dict):
            return {k: walk(x, f"{path}.{k}" if path else str(k)) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [walk(x, f"{path}[{i}]") for i, x in enumerate(v)]
        return v

    out = walk(doc, "")
    if isinstance(out, dict):
        out["non_finite"] = found
    return out
