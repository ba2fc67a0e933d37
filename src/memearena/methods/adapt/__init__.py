"""Adapt (AdamMeme): mining, misbelief, reference, scoring, refinement; one module per stage.

from memearena.methods.adapt.driver import run_adapt, plan_adapt
"""
