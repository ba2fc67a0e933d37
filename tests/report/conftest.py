"""The report's method sections register when their method is imported (as every run does,
``engine.lifecycle.write_run_report``): import them all, so these tests pass run on their own."""

from __future__ import annotations

from memearena.engine.registry import get_method, method_names

for _name in method_names():
    get_method(_name)
