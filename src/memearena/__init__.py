"""memearena: evaluate how well multimodal LLMs understand harmful memes, and audit their judges.

The notebook surface (imported lazily, so ``import memearena`` stays fast; ``dir(memearena)``
lists it). Every ``run_*``/``plan_*`` works in a plain script and inside a running event loop
(Jupyter); each has an ``a``-prefixed async twin::

    import memearena
    cfg = memearena.load_config("examples/demo-arena.yaml")
    memearena.plan_arena(cfg).calls                 # what a run would call, nothing called
    result = memearena.run_arena(cfg, "runs/demo-arena", show_progress=False)
    result.to_pandas()                              # overall leaderboard as a DataFrame
    result.battles(); result.judges(); result.agreement(); result.answers()
    memearena.open_run("runs/demo-arena")           # the same object for an existing run

DataFrames need ``pip install 'memearena[notebook]'`` (pandas). Statistics live in
``memearena.stats``; datasets in ``memearena.data``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# The composition root: the method registry (built-in methods, one line each) is loaded with
# the package, so every config validated anywhere knows each registered method's section.
from memearena.engine import registry as registry

__version__ = "0.1.0"

_LAZY = {
    # configs
    "load_config": "memearena.config",
    "parse_config": "memearena.config",
    "RunConfig": "memearena.config",
    "demo_config": "memearena.demo",
    # running (sync works inside a running loop; a-prefixed twins are coroutines)
    "run_arena": "memearena.api",
    "arun_arena": "memearena.api",
    "plan_arena": "memearena.api",
    "aplan_arena": "memearena.api",
    "run_adapt": "memearena.api",
    "arun_adapt": "memearena.api",
    "plan_adapt": "memearena.api",
    "aplan_adapt": "memearena.api",
    "run_judge_audit": "memearena.api",
    "arun_judge_audit": "memearena.api",
    "plan_judge_audit": "memearena.api",
    "aplan_judge_audit": "memearena.api",
    # results
    "open_run": "memearena.api",
    "ArenaResult": "memearena.api",
    "AdaptResult": "memearena.api",
    "JudgeAuditResult": "memearena.api",
    "RunResults": "memearena.api",
    "RunResult": "memearena.engine.lifecycle",
    # errors
    "MemearenaError": "memearena.errors",
    "MissingExtraError": "memearena.api",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value  # resolved once
        return value
    raise AttributeError(f"module 'memearena' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
