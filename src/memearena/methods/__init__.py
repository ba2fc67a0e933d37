"""The methods, one package each of the same shape: config, stages, analysis, view."""
