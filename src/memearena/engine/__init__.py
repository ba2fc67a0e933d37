"""The run lifecycle shared by every method: run directory, pool, plan, steps, status."""
