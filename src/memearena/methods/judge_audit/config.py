"""The ``judge_audit:`` section of a run config (validated; errors name the field)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memearena.stats.judge_bias import BIAS_TYPES

__all__ = [
    "CLASSIC_BIASES",
    "DEFAULT_QUERY",
    "PROMPT_VARIANTS",
    "JudgeAuditConfig",
]

PROMPT_VARIANTS: tuple[str, ...] = (
    "plain",
    "guarded",
    "score_guided",
    "modality_constraints",
    "modality_reasoning",
    "abstention",
)
"""Pointwise prompt variants (templates under ``prompts/templates/judge_audit/``)."""


DEFAULT_QUERY = "Is this meme harmful, to whom, and why? Refer to what the image shows."
"""The question asked about each meme when ``queries`` is not set. It does not restate the
meme's text: the image carries it, so removing the image (``text_dominance``) removes evidence
the judgement needs."""

PromptVariant = Literal[
    "plain", "guarded", "score_guided", "modality_constraints", "modality_reasoning", "abstention"
]
ClassicBias = Literal["position", "verbosity", "self_enhancement"]

CLASSIC_BIASES: tuple[ClassicBias, ...] = ("position", "verbosity", "self_enhancement")
"""The classic LLM-as-a-judge biases measured on meme items."""


class JudgeAuditConfig(BaseModel):
    """The Judge audit: perturbed triplets scored pointwise (BD/BC), plus position, verbosity
    and self-enhancement bias."""

    model_config = ConfigDict(extra="forbid")

    model_list_options: ClassVar[dict[str, str]] = {"models": "judges", "judges": "judges"}
    """Command-line options that replace one of this section's model lists (``--models a,b``):
    option name → the key it sets."""

    judges: list[str] = Field(min_length=1)
    """Judges to audit (keys of ``models``)."""
    responders: list[str] = Field(default_factory=list)
    """Models that answer each meme's query, giving the responses judged (keys of ``models``);
    needed when the data holds memes (two or more for position and self-enhancement)."""
    describer: str | None = None
    """Model that writes the image descriptions of ``detail_description`` (default: the first
    responder that is not an audited judge, so no judge reads a description it wrote itself;
    with none, set this)."""
    queries: list[str] = Field(default_factory=lambda: [DEFAULT_QUERY])
    """Questions asked about each meme; ``{meme_text}`` is replaced by the meme's text. One is
    drawn per meme with the run seed. A query that restates the meme's text fails the
    integrality check of ``text_dominance`` (the image would not be needed): those pairs are
    excluded and counted."""
    donor_group_field: str | None = "target"
    """The memes' annotation naming their target group (the demo set's ``target``): a meme whose
    query or image is lent to another item (instruction_misalignment, image_misalignment,
    unnecessary_image) must share no word of it with that item, nor show the same scene
    (perceptual hash); rejected draws are counted. None: the scene check only."""
    texture_max_cover: float = Field(0.10, gt=0, le=0.5)
    """``texture_insertion``: the largest share of the image area the inserted text may cover
    (it is also kept off the meme's caption)."""
    bias_types: list[str] = Field(default_factory=lambda: list(BIAS_TYPES))
    """Bias types to generate and score (default: all nine)."""
    prompt: PromptVariant = "plain"
    """Pointwise prompt: plain (MM-JudgeBias's EVAL_PROMPT as the reference sends it: no system
    message, instructions first, ``### Score:``, the image after the text), guarded (the same
    task with delimited inputs, a system message and ``Rating: [[n]]``), score_guided,
    modality_constraints, modality_reasoning or abstention (N/A allowed; reported as an
    abstention rate, excluded from BD/BC)."""
    pairwise_prompt: Literal["pair-v2", "guarded"] = "pair-v2"
    """Pairwise prompt of position and verbosity: ``pair-v2`` (MT-Bench's, FastChat
    ``judge_prompts.jsonl``: its system prompt asks to avoid position and length biases, so the
    figures compare with MT-Bench's) or ``guarded`` (delimited inputs, no such sentence,
    ``Verdict: [[A]]``)."""
    classic: list[ClassicBias] = Field(default_factory=lambda: list(CLASSIC_BIASES))
    """Classic biases to measure on meme items: position, verbosity, self_enhancement."""
    classic_rows: int = Field(200, ge=0)
    """MM-JudgeBias data: how many rows (drawn with the run seed) are also tested for
    verbosity — the row's response against a padded copy, in both orders — as the paper's
    §H does on 200 samples."""
    reference_judge: str | None = None
    """A judge trusted as the baseline: BD/BC and consistency flags compare against it (default:
    each judge is compared with the mean of the other judges)."""
    family_alpha: float = Field(0.05, gt=0, lt=1)
    """The family-wise error rate of each judge's flags: across all of one judge's tests (nine
    types, three categories, overall, position consistency, position, verbosity,
    self-enhancement) a judge without any of those biases is flagged on anything with at most
    this probability (Holm over t-tests on the bootstrap standard errors; each flag carries
    its adjusted p-value)."""
    flag_min_pairs: int = Field(10, ge=2)
    """No flag from fewer than this many pairs: a BD/BC figure is tested only when each of its
    types holds at least this many scored pairs for the judge and for what it is compared with;
    position, consistency and verbosity need this many verdicts (swapped pairs for
    consistency), self-enhancement this many scores of each kind."""
    rank_by: Literal["overall", "composite"] = "overall"
    """Order of the evaluator leaderboard: ``overall`` (MM-JudgeBias's Overall, the mean of the
    nine types' BD/BC, as the reference orders judges; the composite breaks ties) or
    ``composite`` (``trust``: 1 − the mean shortfall of BD/BC overall, decisive position
    consistency, preferring the concise answer and self-enhancement)."""
    limit_per_type: int | None = Field(None, gt=0)
    """MM-JudgeBias data: keep at most this many rows per bias type."""
    max_reasks: int = Field(2, ge=0, le=10)
    """Re-asks of a score that does not parse before it is recorded as unparsed."""
    bootstrap: int = Field(1000, ge=0)
    """Bootstrap rounds (over items) for every interval."""
    window: int = Field(256, ge=1)
    """Pairs judged at once, each judge's two judgments of a pair side by side (memory follows
    this, not the number of memes)."""
    examples: int = Field(1, ge=0, le=5)
    """Before/after examples per bias type kept for the report."""

    @field_validator("bias_types")
    @classmethod
    def _known_types(cls, v: list[str]) -> list[str]:
        bad = [t for t in v if t not in BIAS_TYPES]
        if bad:
            raise ValueError(f"unknown bias types {bad}; choose from {list(BIAS_TYPES)}")
        if not v:
            raise ValueError("must name at least one bias type")
        return v

    @field_validator("queries")
    @classmethod
    def _queries(cls, v: list[str]) -> list[str]:
        if not v or any(not q.strip() for q in v):
            raise ValueError("must hold at least one non-empty question")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> JudgeAuditConfig:
        if len(set(self.judges)) != len(self.judges):
            raise ValueError("judges must be distinct")
        if len(set(self.responders)) != len(self.responders):
            raise ValueError("responders must be distinct")
        if self.reference_judge is not None and self.reference_judge not in self.judges:
            raise ValueError(f"reference_judge {self.reference_judge!r} is not among judges")
        return self

    def describer_model(self) -> str | None:
        """The model that writes the image descriptions: ``describer``, else the first
        responder that is not an audited judge (None: there is none)."""
        if self.describer is not None:
            return self.describer
        return next((m for m in self.responders if m not in self.judges), None)

    def named_models(self) -> list[tuple[str, str]]:
        """``(field, model)`` for every model the section names (for the models-exist check)."""
        named = [("judge_audit.judges", m) for m in self.judges]
        named += [("judge_audit.responders", m) for m in self.responders]
        if self.describer is not None:
            named.append(("judge_audit.describer", self.describer))
        return named

    def model_refs(self) -> list[tuple[str, str]]:
        """Every (field, model name) this section refers to (checked against ``models``)."""
        return self.named_models()
