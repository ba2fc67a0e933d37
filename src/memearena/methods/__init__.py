"""The methods, one package each of the same shape (config, stages, analysis, view, and
``method.py``: the plug-in the run lifecycle sees through ``memearena.engine.protocol``),
each registered by one line in ``memearena.engine.registry``."""
