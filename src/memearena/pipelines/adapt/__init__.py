"""The Adapt method (AdamMeme): one module per stage, and the driver that runs them.

from memearena.pipelines.adapt import run_adapt, plan_adapt
"""

from memearena.pipelines.adapt.driver import (
    AdaptOutcome,
    AdaptPipeline,
    AdaptRunResult,
    plan_adapt,
    run_adapt,
)

__all__ = ["AdaptOutcome", "AdaptPipeline", "AdaptRunResult", "plan_adapt", "run_adapt"]
