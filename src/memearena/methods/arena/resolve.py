"""Turning the two orders of one pairwise judgment into battles.

Swap semantics: a judge sees the pair twice, once as (A=x, B=y) and once as (A=y, B=x).
A verdict "A" in the second order is a vote for y. Both raw verdicts are kept in the store;
only the resolution below turns them into battle rows."""

from __future__ import annotations

from typing import Literal

Winner = Literal["model_a", "model_b", "tie"]
Resolution = Literal["tie", "both"]


def _vote(winner: str, shown_first_is_x: bool) -> str:
    """Map an A/B/tie verdict to 'x', 'y' or 'tie'."""
    if winner == "tie":
        return "tie"
    picked_first = winner == "A"
    return "x" if picked_first == shown_first_is_x else "y"


def resolve_pair(
    forward: str | None, backward: str | None, policy: Resolution = "tie"
) -> list[Winner]:
    """Resolve one criterion judged in both orders into battle outcomes for (model_a=x, model_b=y).

    ``forward`` is the verdict when x was shown first, ``backward`` when y was shown first
    (each "A", "B" or "tie"; None when that order's output did not parse). A missing order
    yields no battle: an unparseable verdict is never counted as a tie. Policy ``tie``:
    agreement gives that winner, disagreement a tie. Policy ``both``: each order is its own
    battle."""
    if forward is None or backward is None:
        return []
    votes = [_vote(forward, True), _vote(backward, False)]
    as_winner: dict[str, Winner] = {"x": "model_a", "y": "model_b", "tie": "tie"}
    if policy == "both":
        return [as_winner[v] for v in votes]
    return [as_winner[votes[0]] if votes[0] == votes[1] else "tie"]
