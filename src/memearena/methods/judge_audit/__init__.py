"""The Judge audit (MM-JudgeBias): perturbed triplets scored pointwise (BD/BC), plus position,
verbosity and self-enhancement bias; one module per stage.

    from memearena.methods.judge_audit.perturb import perturb, Triplet
"""
