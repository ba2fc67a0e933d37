"""Re-analysis of AdamMeme's published refinement logs (``log_<category>.json``).

Each log is a JSON list of steps ``{meme_text, explanation, misbelief, meme_image_path, answer,
ref_ans, comparison, score, task, run_step}``; a refused step is ``{meme_image_path, task,
score: "拒答"}``. A score is taken only from the scorer's own ``Rating: [[n]]`` field in
``comparison`` (the format the published judge prompt asks for), never from the published
``score`` number: a comparison whose rating is written another way (``Rating: 5``) is counted as
unparsed, and the published number is reported beside ours so the difference is visible.

Intervals resample memes (``meme_image_path``), the unit that was sampled; the selection
analysis resamples refinement chains.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memearena.errors import DataError, ParseError
from memearena.methods.adapt.analysis import cluster_interval
from memearena.prompts.scores import parse_score

__all__ = ["PublishedStep", "analyse_published_logs", "read_published_logs"]

REFUSED_MARK = "拒答"
"""What the published logs write in ``score`` for a refused step ("refused to answer")."""

_LOG_NAME = re.compile(r"^log_(?P<cat>.+)\.json$")


@dataclass(frozen=True)
class PublishedStep:
    """One step of a published log, with our strict reading of its score."""

    category: str
    meme: str
    step: int | None
    score: int | None
    """Score from the scorer's own ``Rating: [[n]]`` field; None when refused or unparsed."""
    refused: bool
    published_score: float | None
    """The number the published code stored (for comparison only)."""
    unparsed: str | None = None
    """Why no score could be read (None when scored or refused)."""


@dataclass
class PublishedLogs:
    """Every step of every category log, plus the problems met while reading."""

    model: str
    steps: dict[str, list[PublishedStep]] = field(default_factory=dict)
    invalid: dict[str, list[str]] = field(default_factory=dict)


def category_of(path: Path) -> str:
    """The category a log file names (``log_child exploitation.json``: ``child_exploitation``)."""
    m = _LOG_NAME.match(path.name)
    if m is None:
        raise DataError(f"{path}: not a log_<category>.json file")
    return "_".join(m.group("cat").strip().lower().split())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None


def _step(category: str, row: Any, where: str) -> PublishedStep:
    """One row; raises DataError naming the row when it cannot be read."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    meme = row.get("meme_image_path")
    if not isinstance(meme, str) or not meme.strip():
        raise DataError(f"{where}: field 'meme_image_path': missing or empty")
    raw_score = row.get("score")
    step = row.get("run_step")
    if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
        raise DataError(f"{where}: field 'run_step': expected a non-negative integer")
    if raw_score == REFUSED_MARK:
        return PublishedStep(category, meme, step, None, True, None)
    published = (
        float(raw_score)
        if isinstance(raw_score, int | float) and not isinstance(raw_score, bool)
        else None
    )
    comparison = row.get("comparison")
    if not isinstance(comparison, str):
        raise DataError(f"{where}: field 'comparison': missing (and the step is not refused)")
    try:
        score = parse_score(comparison).value
    except ParseError as e:
        return PublishedStep(category, meme, step, None, False, published, str(e))
    return PublishedStep(category, meme, step, score, False, published)


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
        meta = _read_json(info)
        if isinstance(meta, dict) and isinstance(meta.get("model_name"), str):
            model = meta["model_name"]
    out = PublishedLogs(model)
    for path in files:
        cat = category_of(path)
        rows = _read_json(path)
        if not isinstance(rows, list):
            raise DataError(f"{path}: expected a JSON list of steps")
        steps = out.steps.setdefault(cat, [])
        for i, row in enumerate(rows):
            try:
                steps.append(_step(cat, row, f"{path}: item {i}"))
            except DataError as e:
                out.invalid.setdefault(cat, []).append(str(e))
    return out


# ---- analysis -----------------------------------------------------------------------------


def _chains(steps: Sequence[PublishedStep]) -> list[list[PublishedStep]]:
    """Refinement chains in file order: a chain starts at step 0 (refused rows carry no step
    and are left out of chains; they are counted as refusals)."""
    chains: list[list[PublishedStep]] = []
    for s in steps:
        if s.step is None:
            continue
        if s.step == 0 or not chains:
            chains.append([])
        chains[-1].append(s)
    return chains


def _null_any_failure(p: float, c_ok: float, length: int) -> float:
    """Probability that a chain holds at least one failing step when every step fails with
    probability ``p`` independently (refinement changes nothing) and the chain goes on after a
    passing step with probability ``c_ok``, for at most ``length`` steps."""
    any_fail, alive = p, 1.0 - p  # alive: reached this step with no failure so far
    for _ in range(length - 1):
        alive *= c_ok
        any_fail += alive * p
        alive *= 1.0 - p
    return any_fail


def _selection_stats(
    chains: Sequence[Sequence[PublishedStep]], threshold: float
) -> tuple[float, float, float] | None:
    """(observed increase, selection-only increase, share) for a set of chains, or None.

    The loop's outcome for a seed is its hardest version: the chain fails when any of its
    steps fails. The increase is that chain failure rate minus the originals' failure rate."""
    fails = [[s.score < threshold for s in c if s.score is not None] for c in chains]
    fails = [f for f in fails if f]
    orig = [c[0].score < threshold for c in chains if c and c[0].score is not None]
    if not fails or not orig:
        return None
    after_ok = [i + 1 < len(f) for f in fails for i, x in enumerate(f) if not x]
    p = float(np.mean(orig))
    c_ok = float(np.mean(after_ok)) if after_ok else 0.0
    length = max(len(f) for f in fails)
    observed = float(np.mean([any(f) for f in fails])) - p
    null = _null_any_failure(p, c_ok, length) - p
    share = null / observed if observed > 0 else float("nan")
    return observed, null, share


def _histogram(scores: Sequence[int]) -> dict[str, int]:
    return {str(v): sum(1 for s in scores if s == v) for v in range(1, 11)}


def _summary(
    steps: Sequence[PublishedStep], threshold: float, rounds: int, seed: int
) -> dict[str, Any]:
    scored = [s for s in steps if s.score is not None]
    units = [s.meme for s in scored]
    vals = np.array([float(s.score) for s in scored])  # type: ignore[arg-type]
    fails = (vals < threshold).astype(float)
    avg = cluster_interval(vals, units, rounds, seed)
    fr = cluster_interval(fails, units, rounds, seed)
    published = [s.published_score for s in steps if s.published_score is not None]
    return {
        "steps": len(steps),
        "scored": len(scored),
        "refused": sum(1 for s in steps if s.refused),
        "unparsed": sum(1 for s in steps if s.unparsed is not None),
        "memes": len(set(s.meme for s in steps)),
        "avg_score": avg.value,
        "avg_score_ci": [avg.low, avg.high],
        "failure_rate": fr.value,
        "failure_rate_ci": [fr.low, fr.high],
        "published_avg_score": float(np.mean(published)) if published else None,
    }


def _refined_vs_original(
    steps: Sequence[PublishedStep], threshold: float, rounds: int, seed: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, part in (
        ("original", [s for s in steps if s.step == 0]),
        ("refined", [s for s in steps if s.step is not None and s.step > 0]),
    ):
        scored = [s for s in part if s.score is not None]
        vals = np.array([float(s.score) for s in scored])  # type: ignore[arg-type]
        fr = cluster_interval(
            (vals < threshold).astype(float), [s.meme for s in scored], rounds, seed
        )
        avg = cluster_interval(vals, [s.meme for s in scored], rounds, seed)
        out[name] = {
            "scored": len(scored),
            "avg_score": avg.value,
            "avg_score_ci": [avg.low, avg.high],
            "failure_rate": fr.value,
            "failure_rate_ci": [fr.low, fr.high],
            "histogram": _histogram([s.score for s in scored if s.score is not None]),
        }
    return out


def _selection(
    steps: Sequence[PublishedStep], threshold: float, rounds: int, seed: int
) -> dict[str, Any]:
    """How much of the loop's failure-rate increase (a chain fails when any step fails, vs the
    original steps' rate) the observed continuation rule alone produces when refinement changes
    nothing (null: every step fails independently at the originals' rate, and a chain goes on
    after a passing step as often as observed). Intervals resample chains."""
    chains = _chains(steps)
    point = _selection_stats(chains, threshold)
    if point is None:
        return {"chains": len(chains), "observed_increase": None}
    rng = np.random.default_rng(seed)
    boots: list[tuple[float, float, float]] = []
    for _ in range(rounds):
        pick = rng.integers(0, len(chains), len(chains))
        got = _selection_stats([chains[i] for i in pick], threshold)
        if got is not None:
            boots.append(got)

    def ci(k: int) -> list[float | None]:
        vals = np.array([b[k] for b in boots if np.isfinite(b[k])])
        if not len(vals):
            return [None, None]
        return [float(np.quantile(vals, 0.025)), float(np.quantile(vals, 0.975))]

    return {
        "chains": len(chains),
        "observed_increase": point[0],
        "observed_increase_ci": ci(0),
        "selection_only_increase": point[1],
        "selection_only_increase_ci": ci(1),
        "explained_share": point[2] if np.isfinite(point[2]) else None,
        "explained_share_ci": ci(2),
    }


def analyse_published_logs(
    logs: PublishedLogs, *, threshold: float = 4.0, rounds: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """The ``adapt import --json`` document: per-category and overall scores and failure
    rates with intervals over memes, refined vs original steps, and the selection analysis."""
    everything = [s for cat in sorted(logs.steps) for s in logs.steps[cat]]
    cats = {
        cat: {
            **_summary(steps, threshold, rounds, seed),
            "invalid": len(logs.invalid.get(cat, [])),
        }
        for cat, steps in sorted(logs.steps.items())
    }
    return {
        "model": logs.model,
        "failure_threshold": threshold,
        "categories": cats,
        "overall": _summary(everything, threshold, rounds, seed),
        "refined_vs_original": _refined_vs_original(everything, threshold, rounds, seed),
        "selection": _selection(everything, threshold, rounds, seed),
        "invalid": {cat: errs for cat, errs in sorted(logs.invalid.items())},
    }
