"""The Method protocol: what the run lifecycle (``memearena.engine.lifecycle``) knows of a method.

A method is one package (``methods/<name>/``: config, stages, analysis, view) plus one module,
``methods/<name>/method.py``, whose class implements :class:`Method`. The lifecycle does the
rest for every method alike: the run directory (lock, store, dataset binding, config snapshot),
the pool (cache, spend cap, batch), the dry run, the accounting, the status and exit code, the
leaderboard merge, the report and the console summary. A method is registered by name in
``memearena.engine.registry`` (one line); no engine file changes. Beside ``method.py`` its
package may hold ``templates/`` (its prompts), ``sim.py`` (its part of the simulated world),
``view.py`` registering its report section (the partial in ``html/``) and ``pages.py`` with
its viewer pages (``PAGES``, templates in ``html/``): each is found by the registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from memearena.engine.status import RunStatus
from memearena.engine.steps import StageCount

if TYPE_CHECKING:
    from rich.console import Console

    from memearena.config import RunConfig
    from memearena.engine.progress import StageProgress
    from memearena.models import ModelPool
    from memearena.store import RunStore

__all__ = ["Finished", "Inputs", "Method", "MethodRun", "RunContext"]


@dataclass
class Inputs:
    """What a method runs on: memes (the simulated world is built over them) and, for a method
    that reads other items (MM-JudgeBias rows), those."""

    memes: list[Any]
    rows: list[Any] = field(default_factory=list)


@dataclass
class RunContext:
    """What a method's run sees: the config, its run directory and store, the pool, the
    progress display, the inputs its ``load`` returned and the simulated world's hooks."""

    cfg: RunConfig
    run_dir: Path
    """The run directory (a scratch directory in a dry run)."""
    store: RunStore
    pool: ModelPool
    progress: StageProgress
    inputs: Inputs
    world: Any
    """The simulated world (``memearena.sim.world.SimWorld``): a method may set its switches
    (``setup_world``) and hand its hooks to its stages; stages never import the simulator."""
    planning: bool = False
    """A dry run: the same code path against stand-ins, nothing written to the run directory."""
    started: float = 0.0
    """When this run started (``time.time()``): failed calls since then are this run's."""
    max_cost: float | None = None
    """The spend cap of this run (``--max-cost``), or None."""
    stand_ins: frozenset[str] = frozenset()
    """In a dry run, the models that stand in for endpoints: the simulated world must treat
    their requests as an endpoint would (it sees what was sent, nothing more)."""


@dataclass
class MethodRun:
    """What running a method produced (its outcome is the method's own type)."""

    outcome: Any
    stopped: str | None = None
    """Why the run stopped early (the spend cap), or None."""
    stages: dict[str, StageCount] = field(default_factory=dict)
    """Per stage: steps reused, new and failed (empty: the lifecycle counts them by step kind)."""


@dataclass
class Finished:
    """A method's analysis of its run: the leaderboard keys it writes, and the status."""

    parts: dict[str, Any]
    """Top-level keys of leaderboard.json this run writes (among ``Method.keys``)."""
    status: RunStatus
    analysis_reused: bool = False
    """The section was kept from an earlier run computed from exactly the same records."""
    written: Callable[[], None] | None = None
    """Called once leaderboard.json and the report are written (the Arena records the digest
    of what its leaderboard was computed from), or None."""


class Method(Protocol):
    """One evaluation method, as the lifecycle sees it. A class implementing it is built with
    ``(cfg, options)`` and raises ``ConfigError`` (one line) when the config lacks its section."""

    name: ClassVar[str]
    """Registry name, config section and leaderboard key (``arena``, ``adapt``, ``judge_audit``)."""
    title: ClassVar[str]
    """How the console and the report name it (``Arena``)."""
    keys: ClassVar[tuple[str, ...]]
    """The top-level keys of leaderboard.json this method owns (others' are kept)."""
    outputs: ClassVar[tuple[str, ...]]
    """Files it leaves in the run directory (named in the "outputs in" line)."""
    typical_output: ClassVar[Mapping[str, int]]
    """Output tokens a real model typically writes per role (the dry run's floor).

    Optional attributes the engine reads when present: ``result``, the notebook's result
    class of the method (a ``memearena.engine.results.MethodResult``; the generic one if
    absent); ``planned_range(run, calls) -> (low, high, note)``, for a method whose calls
    follow the answers: the range a dry run's count ``calls`` (its point estimate) can take
    against endpoints whose replies the plan cannot know, and what the range assumes."""

    def __init__(self, cfg: RunConfig, options: Mapping[str, Any]) -> None:
        """The method for ``cfg`` (ConfigError when the section is missing); ``options`` are
        its command-line options (the Arena's ``settings``)."""
        ...

    def models(self) -> list[str]:
        """Every model this run calls (their API keys are checked before any call)."""
        ...

    def prepare(self, console: Console | None) -> None:
        """Checks and warnings before anything is opened or called (bad input: ConfigError)."""
        ...

    def load(self, store: RunStore | None, run_dir: Path) -> Inputs:
        """The run's inputs (memes, rows); unusable items recorded in ``store``."""
        ...

    def setup_world(self, world: Any) -> bool:
        """Set this method's switches of the simulated world; False forbids the response cache
        (replies that must never be replayed as another world's)."""
        ...

    async def run(self, ctx: RunContext) -> MethodRun:
        """Run (or resume) the method's stages; a spend-cap stop returns with ``stopped``."""
        ...

    def finish(self, ctx: RunContext, run: MethodRun, *, bootstrap: int | None) -> Finished:
        """Analyse the run (store records -> its leaderboard section, pure), write its own
        files (battles, lineage, scores) and judge it (the status)."""
        ...

    @staticmethod
    def summary(console: Console, board: Mapping[str, Any]) -> None:
        """The console summary of its section of ``board`` (its view; reads only that)."""
        ...
