"""Adapt (AdamMeme): mining, misbelief, reference, scoring, refinement; one module per stage.

Run it through the lifecycle (``memearena.engine.lifecycle.run_method("adapt", cfg, run_dir)``)
or the notebook API (``memearena.run_adapt``); ``method.py`` is what the lifecycle sees of it.
"""
