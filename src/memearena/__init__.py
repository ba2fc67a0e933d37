"""memearena: evaluate how well multimodal LLMs understand harmful memes, and audit their judges.

The notebook surface (imported lazily, so ``import memearena`` stays fast; ``dir(memearena)``
lists it). Every ``run_*``/``plan_*`` works in a plain script and inside a running event loop
(Jupyter); each has an ``a``-prefixed async twin::

    import memearena
    cfg = memearena.load_config("examples/demo-arena.yaml")
    memearena.plan_arena(cfg).calls                 # what a run would call, nothing called
    result = memearena.run_arena(cfg, "runs/demo-arena", show_progress=False)
    result.to_pandas()                              # the leaderboard: rank, value, ci_low, ci_high
    result.intervals(); result.calls(); result.requests(); result.replies(); result.errors()
    result.battles(); result.judges(); result.agreement(); result.answers()
    memearena.open_run("runs/demo-arena")           # the same object for an existing run
    memearena.open_run("runs")                      # a folder of runs: each one's results

DataFrames need ``pip install 'memearena[notebook]'`` (pandas). Statistics live in
``memearena.stats``; datasets in ``memearena.data``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# The composition root: the method registry (built-in methods, one line each) is loaded with
# the package, so every config validated anywhere knows each registered method's section.
from memearena.engine import registry as registry
from memearena.version import __version__ as __version__

_LAZY = {
    # configs
    "load_config": "memearena.config",
    "parse_config": "memearena.config",
    "RunConfig": "memearena.config",
    "demo_config": "memearena.demo",
    # running any registered method by name, and opening what a run left
    "run": "memearena.api",
    "plan": "memearena.api",
    "open_run": "memearena.api",
    "label_agreement": "memearena.api",
    "MethodResult": "memearena.api",
    "RunResults": "memearena.api",
    "RunFolder": "memearena.api",
    "RunResult": "memearena.engine.lifecycle",
    # errors
    "MemearenaError": "memearena.errors",
    "MissingExtraError": "memearena.api",
}
"""Every registered method ``x`` adds ``run_x`` / ``arun_x`` / ``plan_x`` / ``aplan_x`` (sync
works inside a running loop; a-prefixed twins are coroutines) and its result class
(``ArenaResult``), both from ``memearena.api`` (which reads the method registry)."""


def _method_names() -> list[str]:
    """Each registered method's twins and result class (imports the methods)."""
    api = import_module("memearena.api")
    return [
        n
        for n in api.__dir__()
        if n.startswith(("run_", "arun_", "plan_", "aplan_")) or n.endswith("Result")
    ]


_ALL = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name == "__all__":  # the registered methods' names too: computed when asked for
        return [*_ALL, *(n for n in _method_names() if n not in _ALL)]
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
    elif name.startswith(("run_", "arun_", "plan_", "aplan_")) or name.endswith("Result"):
        try:
            value = getattr(import_module("memearena.api"), name)
        except AttributeError:
            raise AttributeError(f"module 'memearena' has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module 'memearena' has no attribute {name!r}")
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_method_names()})
