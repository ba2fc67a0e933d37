"""The ``arena:`` section of a run config (the MemeArena method), validated by pydantic."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from memearena.config import MAX_BOOTSTRAP, ConfigSection, RunConfig
from memearena.errors import ConfigError
from memearena.prompts.schemas import CRITERIA

__all__ = ["CRITERIA", "MAX_FUSION_ROUNDS", "ArenaConfig", "arena_call_estimate"]

MAX_FUSION_ROUNDS = 1_000
"""Most guideline refinement rounds per meme."""


class ArenaConfig(ConfigSection):
    """The Arena method: contexts, answers, guideline fusion, pairwise battles."""

    model_list_options: ClassVar[dict[str, str]] = {
        "models": "targets",
        "targets": "targets",
        "judges": "judges",
    }
    """Command-line options that replace one of this section's model lists (``--models a,b``):
    option name → the key it sets."""

    targets: list[str] = Field(min_length=2)
    """Models being evaluated (keys of ``models``)."""
    judges: list[str] = Field(min_length=1)
    """Judge panel (keys of ``models``)."""
    context_model: str
    """Model that writes the interpretive contexts."""
    contexts: Literal[1, 2, 3] = 3
    """Contexts per meme: highly relevant, moderately relevant, unrelated (first n)."""
    fusion_rounds: int = Field(8, ge=0, le=MAX_FUSION_ROUNDS)
    """Guideline refinement rounds per meme (must be >= number of judges; at most 1,000)."""
    rate_fusion_rounds: bool = False
    """After fusion, every judge rates each round's guideline 1-3 on five axes (convergence)."""
    setting: Literal["memearena", "none", "self", "human"] = "memearena"
    """Guideline used when judging: fused, none, each judge's own, or from a file."""
    human_guidelines: Path | None = None
    """JSONL of {"meme": id, "guideline": text} for ``setting: human``."""
    pairs: Literal["all", "active"] = "all"
    """Which target pairs are compared per task: all (round-robin) or active sampling."""
    battle_budget: int | None = Field(None, gt=0, le=1_000_000_000)
    """With ``pairs: active``: number of (task, pair) comparisons to run."""
    resolution: Literal["tie", "both"] = "tie"
    """Both orders are always judged: ``tie`` resolves disagreement to a tie, ``both`` keeps
    each order as its own battle."""
    criteria: list[str] = Field(default_factory=lambda: list(CRITERIA))
    """Criteria to judge on (subset of the five)."""
    max_reasks: int = Field(2, ge=0, le=10)
    """Re-asks of an output that does not parse before it is recorded as a failure."""
    elo_k: float = Field(4.0, gt=0, le=1000)
    """Online Elo K factor."""
    bootstrap: int = Field(1000, ge=0, le=MAX_BOOTSTRAP)
    """Bootstrap rounds for the Bradley–Terry confidence intervals (at most 100,000)."""
    answer_max_tokens: int = Field(4000, gt=0, le=1_000_000)
    """Answers are cut to about this many tokens (4 characters each) before any judge reads
    them, so an endless answer is not paid for at every judge; verdicts record the cut."""
    bootstrap_unit: Literal["meme", "task", "battle"] = "meme"
    """What every bootstrap interval resamples: memes (all battles of a meme are correlated),
    tasks (meme × context), or single battles (too narrow when battles are correlated)."""
    self_judging: Literal["exclude", "include"] = "exclude"
    """Battles in which a judge compares a model of its own family: left out of the
    leaderboards (kept for the self-preference measure), or included."""
    judge_audit: Path | None = None
    """A Judge audit run's ``leaderboard.json``: the Arena warns when a panel judge is flagged."""

    @field_validator("criteria")
    @classmethod
    def _known_criteria(cls, v: list[str]) -> list[str]:
        bad = [c for c in v if c not in CRITERIA]
        if bad:
            raise ValueError(
                f"unknown criteria {', '.join(map(repr, bad))}; choose from {', '.join(CRITERIA)}"
            )
        if not v:
            raise ValueError("must name at least one criterion")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ArenaConfig:
        if self.setting == "memearena" and self.fusion_rounds < len(self.judges):
            raise ValueError(
                f"fusion_rounds ({self.fusion_rounds}) must be >= number of judges "
                f"({len(self.judges)}) so every judge refines at least once"
            )
        if self.setting == "human" and self.human_guidelines is None:
            raise ValueError("setting 'human' needs 'human_guidelines'")
        if self.pairs == "active" and self.battle_budget is None:
            raise ValueError("pairs 'active' needs 'battle_budget'")
        if len(set(self.targets)) != len(self.targets):
            raise ValueError("targets must be distinct")
        return self

    def model_refs(self) -> Iterable[tuple[str, str]]:
        """Every (field, model name) this section refers to."""
        yield from (("arena.targets", m) for m in self.targets)
        yield from (("arena.judges", m) for m in self.judges)
        yield ("arena.context_model", self.context_model)

    def resolve_paths(self, fix: Callable[[Path], Path]) -> ArenaConfig:
        """A copy whose files (human guidelines, the Judge audit's leaderboard) are resolved."""
        update = {
            k: fix(p)
            for k, p in (
                ("human_guidelines", self.human_guidelines),
                ("judge_audit", self.judge_audit),
            )
            if p is not None
        }
        return self.model_copy(update=update) if update else self

    def check_files(self, source: str) -> None:
        """Found now, not after the first paid calls of a run."""
        hg = self.human_guidelines
        if hg is not None and not hg.is_file():
            what = "is not a file" if hg.exists() else "does not exist"
            raise ConfigError(f"{source}: arena.human_guidelines: {hg} {what}")


def arena_call_estimate(
    cfg: RunConfig, n_memes: int, settings: Sequence[str] | None = None
) -> dict[str, float]:
    """Expected calls per model of an Arena run over ``n_memes`` memes (no re-asks or refusals;
    fusion rounds spread evenly over the panel): the input of the wall-time check."""
    a: ArenaConfig | None = cfg.arena
    if a is None:
        return {}
    out: dict[str, float] = dict.fromkeys(cfg.models, 0.0)
    tasks = n_memes * a.contexts
    out[a.context_model] += n_memes
    for t in a.targets:
        out[t] += tasks
    n_targets, n_judges = len(a.targets), len(a.judges)
    comparisons = (
        min(a.battle_budget, tasks * n_targets * (n_targets - 1) // 2)
        if a.pairs == "active" and a.battle_budget is not None
        else tasks * n_targets * (n_targets - 1) // 2
    )
    for setting in settings or [a.setting]:
        for j in a.judges:
            if setting == "memearena":
                out[j] += n_memes * (1 + a.fusion_rounds) / n_judges
                if a.rate_fusion_rounds:  # at most one rating per judge and round
                    out[j] += n_memes * (1 + a.fusion_rounds)
            elif setting == "self":
                out[j] += n_memes
            out[j] += 2 * comparisons
    return out
