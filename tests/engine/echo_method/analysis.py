"""The echo method's analysis: the share of memes whose reply quotes them, with its interval."""

from __future__ import annotations

from typing import Any

from memearena.stats.proportion import wilson_interval


def echo_section(model: str, replies: dict[str, dict[str, Any]], n_memes: int) -> dict[str, Any]:
    quoted = sum(1 for r in replies.values() if r["meme"].lower() in str(r.get("text")).lower())
    lo, hi = wilson_interval(quoted, n_memes) if n_memes else (None, None)
    row = {
        "model": model,
        "rank": 1,
        "figure": "quoted",
        "value": quoted / n_memes if n_memes else None,
        "ci_low": lo,
        "ci_high": hi,
        "memes": n_memes,
    }
    return {"leaderboard": [row], "replies": len(replies)}
