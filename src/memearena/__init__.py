"""memearena: evaluate how well multimodal LLMs understand harmful memes, and audit their judges.

The notebook surface (imported lazily, so ``import memearena`` stays fast)::

    import memearena
    cfg = memearena.load_config("examples/demo-arena.yaml")
    memearena.plan_arena(cfg).calls                 # what a run would call, nothing called
    result = memearena.run_arena(cfg, Path("runs/demo-arena"), show_progress=False)
    result.leaderboard["arena"]["overall"]          # rows as in `memearena rank --json`

Statistics live in ``memearena.stats``; datasets in ``memearena.data``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "load_config": "memearena.config",
    "parse_config": "memearena.config",
    "RunConfig": "memearena.config",
    "run_arena": "memearena.runner",
    "plan_arena": "memearena.runner",
    "ArenaRunResult": "memearena.runner",
    "demo_config": "memearena.demo",
    "MemearenaError": "memearena.errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memearena' has no attribute {name!r}")
