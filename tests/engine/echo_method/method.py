"""The echo method as the run lifecycle sees it (``memearena.engine.protocol.Method``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Console

from echo_method import sim as sim  # its part of the simulated world registers
from echo_method import view
from echo_method.analysis import echo_section
from echo_method.stages import restate_all
from memearena.config import RunConfig
from memearena.engine.protocol import Finished, Inputs, MethodRun, RunContext
from memearena.engine.rundir import load_memes
from memearena.engine.status import RunStatus
from memearena.errors import ConfigError
from memearena.store import RunStore


class Echo:
    name: ClassVar[str] = "echo"
    title: ClassVar[str] = "Echo"
    keys: ClassVar[tuple[str, ...]] = ("echo",)
    outputs: ClassVar[tuple[str, ...]] = ()
    typical_output: ClassVar[Mapping[str, int]] = {"echo.restate": 40}

    def __init__(self, cfg: RunConfig, options: Mapping[str, Any]) -> None:
        if cfg.echo is None:
            raise ConfigError("config: echo: section is missing")
        self.cfg = cfg

    def models(self) -> list[str]:
        return [self.cfg.echo.model]

    def prepare(self, console: Console | None) -> None:
        return None

    def load(self, store: RunStore | None, run_dir: Path) -> Inputs:
        return Inputs(load_memes(self.cfg, store).memes)

    def setup_world(self, world: Any) -> bool:
        return True

    async def run(self, ctx: RunContext) -> MethodRun:
        return MethodRun(await restate_all(ctx))

    def finish(self, ctx: RunContext, run: MethodRun, *, bootstrap: int | None) -> Finished:
        n = len(ctx.inputs.memes)
        section = echo_section(self.cfg.echo.model, run.outcome, n)
        missing = n - len(run.outcome)
        status = RunStatus(
            complete=missing == 0,
            problems=[f"{missing} memes not restated"] if missing else [],
            spent_usd=ctx.store.total_cost(),
            spent_upper_bound_usd=ctx.store.total_cost(),
            max_cost=ctx.max_cost,
            produced=f"{len(run.outcome)} restatements",
        )
        return Finished({"echo": section}, status)

    @staticmethod
    def summary(console: Console, board: Mapping[str, Any]) -> None:
        section = board.get("echo")
        if isinstance(section, dict):
            view.print_summary(console, section)
