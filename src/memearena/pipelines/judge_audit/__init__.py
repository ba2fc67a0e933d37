"""The Judge audit (MM-JudgeBias): perturbed triplets scored pointwise (BD/BC), plus position,
verbosity and self-enhancement bias.

    from memearena.pipelines.judge_audit import JudgeAuditPipeline, perturb, Triplet
"""

from memearena.pipelines.judge_audit.driver import (
    JudgeAuditOutcome,
    JudgeAuditPipeline,
    ScoreRecord,
    VerdictRecord,
)
from memearena.pipelines.judge_audit.items import AuditPair
from memearena.pipelines.judge_audit.perturb import (
    GENERATORS,
    AuditImage,
    ImageStore,
    PerturbContext,
    Triplet,
    perturb,
)

__all__ = [
    "GENERATORS",
    "AuditImage",
    "AuditPair",
    "ImageStore",
    "JudgeAuditOutcome",
    "JudgeAuditPipeline",
    "PerturbContext",
    "ScoreRecord",
    "Triplet",
    "VerdictRecord",
    "perturb",
]
