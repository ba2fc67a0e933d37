"""The ``memearena`` command line. Errors are one line on stderr and exit code 2."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

from memearena.cli.run import (
    DryRunOpt,
    MaxCostOpt,
    NoProgressOpt,
    OutOpt,
    console,
    err_console,
    one_line_errors,
    with_overrides,
)
from memearena.errors import MemearenaError
from memearena.report.safe import console_safe

if TYPE_CHECKING:
    from typer._click import Command, Context


class _Commands(TyperGroup):
    """The top-level commands. Those whose code lives in another module (``_LAZY``, and one
    per registered method) are built when named, so a command imports only what it runs (a
    resumed run loads no statistics, viewer or other method's command); listing them (help,
    "did you mean") builds them all, in the order the app has always shown them."""

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands:
            build = _lazy_commands().get(cmd_name)
            if build is not None:
                self.add_command(build(), cmd_name)
            else:  # unknown: every command is listed for the suggestions of the error
                self._build_all()
        return self.commands.get(cmd_name)

    def list_commands(self, ctx: Context) -> list[str]:
        self._build_all()
        order = [*_ORDER, *(n.replace("_", "-") for n in _method_names())]
        named = [n for n in order if n in self.commands]
        named += [n for n in self.commands if n not in named]
        # Commands first, then groups (as Typer lists them).
        return sorted(named, key=lambda n: hasattr(self.commands[n], "commands"))

    def _build_all(self) -> None:
        for name, build in _lazy_commands().items():
            if name not in self.commands:
                self.add_command(build(), name)


_ORDER = (
    "demo",
    "sim-serve",
    "report",
    "export",
    "view",
    "rank",
    "compare",
    "profile",
    "run",
    "data",
    "models",
    "labels",
)
"""The order of the commands in help (each registered method's after them)."""

app = typer.Typer(
    name="memearena",
    help="Evaluate how well multimodal LLMs understand harmful memes, and audit their judges.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=_Commands,
)
models_app = typer.Typer(help="Model endpoint commands.", no_args_is_help=True)
app.add_typer(models_app, name="models")

F = TypeVar("F", bound=Callable[..., Any])


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("memearena")
        except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
            v = "unknown (not installed)"
        typer.echo(f"memearena {v}")
        raise typer.Exit()


@app.callback()
def _main(
    _: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Evaluate how well multimodal LLMs understand harmful memes, and audit their judges."""


@app.command()
@one_line_errors
def demo(
    out: Annotated[
        Path | None, typer.Option("--out", help="Run directory (default runs/demo[-seedS]).")
    ] = None,
    no_progress: NoProgressOpt = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulated world.")] = 0,
    null_world: Annotated[
        bool,
        typer.Option(
            "--null-world", help="Null control: no world parameter lets guidelines matter."
        ),
    ] = False,
    compare_settings: Annotated[
        bool,
        typer.Option(
            "--compare-settings",
            help="Judge the same answers under every guideline setting; compare vs the truth.",
        ),
    ] = False,
    annotators: Annotated[
        int,
        typer.Option(
            "--annotators",
            min=0,
            max=9,
            help="Simulated annotators of known noise label every queue (labels.sqlite); "
            "the agreement figures are shown beside the values they plant.",
        ),
    ] = 0,
) -> None:
    """Run the Judge audit, the Arena and Adapt offline on the bundled demo memes with
    simulated models."""
    from memearena.demo import demo_run_dir, run_demo

    run_demo(
        out or demo_run_dir(seed, null_world),
        console=console,
        show_progress=not no_progress,
        seed=seed,
        null_world=null_world,
        compare_settings=compare_settings,
        annotators=annotators,
    )


@app.command("sim-serve")
@one_line_errors
def sim_serve(
    port: Annotated[int, typer.Option("--port")] = 8000,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    latency_ms: Annotated[float, typer.Option("--latency-ms")] = 0.0,
    fail_rate: Annotated[float, typer.Option("--fail-rate")] = 0.0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Also serve this run config's provider: sim models."),
    ] = None,
    idempotency: Annotated[
        bool,
        typer.Option(
            "--idempotency",
            help="Answer a repeated Idempotency-Key with the reply already billed (unbilled).",
        ),
    ] = False,
) -> None:
    """Serve the simulated world as an OpenAI-compatible endpoint (with injected faults)."""
    from memearena.config import load_config
    from memearena.engine.registry import get_method, method_names
    from memearena.sim.serve import serve_world

    for name in method_names():
        get_method(name)  # every registered method's part of the simulated world
    cfg = load_config(config) if config is not None else None
    # Announced once listening: a bad option or a port in use is one error line, no banner.
    banner = (
        f"simulated OpenAI-compatible server on http://{host}:{port}/v1 "
        f"(latency {latency_ms} ms, fail-rate {fail_rate}, seed {seed}"
        f"{', idempotency keys honoured' if idempotency else ''}) — simulated models only"
    )
    serve_world(
        host=host,
        port=port,
        latency_ms=latency_ms,
        fail_rate=fail_rate,
        seed=seed,
        config=cfg,
        banner=banner,
        idempotency=idempotency,
    )


@app.command()
@one_line_errors
def report(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (holding leaderboard.json).")],
) -> None:
    """Re-render a run's report.html from its leaderboard.json."""
    import json

    from memearena.engine.lifecycle import write_run_report
    from memearena.jsonsafe import loads_bounded

    src = run_dir / "leaderboard.json"
    try:
        board = loads_bounded(src.read_bytes().decode("utf-8-sig"), max_bytes=1 << 30)
    except OSError as e:
        raise MemearenaError(f"{src}: cannot read ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise MemearenaError(f"{src}:{e.lineno}: invalid JSON ({e.msg})") from None
    except ValueError as e:  # not UTF-8, too deep, a huge number
        raise MemearenaError(f"{src}: invalid JSON ({e})") from None
    console.print(f"wrote {console_safe(write_run_report(run_dir, board))}", highlight=False)


@app.command()
@one_line_errors
def export(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (holding run.db).")],
    table: Annotated[
        str,
        typer.Option(
            "--table",
            help="calls | requests | battles | answers | scores | chains | audit_scores | labels"
            " (docs/exports.md); artifacts | errors: run.db's raw tables",
        ),
    ] = "calls",
    fmt: Annotated[str, typer.Option("--format", help="jsonl | csv | parquet")] = "jsonl",
    to: Annotated[Path | None, typer.Option("--to", help="Output file ('-': stdout).")] = None,
) -> None:
    """Export a table of a run to JSONL, CSV or Parquet, one documented schema per table,
    joinable by request hash and meme id (CSV cells never start a formula)."""
    if table in ("artifacts", "errors"):
        _export_raw(run_dir, table, fmt, to)
        return
    from memearena.export import export_table

    n, target = export_table(run_dir, table, fmt, to)
    if target is None:
        err_console.print(f"wrote {n:,} rows to stdout", highlight=False)
    else:
        console.print(f"wrote {n:,} rows to {console_safe(target)}", highlight=False)


def _export_raw(run_dir: Path, table: str, fmt: str, to: Path | None) -> None:
    """run.db's artifacts or errors table as the store writes it (JSONL or CSV)."""
    from memearena.store import RunStore

    if fmt not in ("jsonl", "csv"):
        raise MemearenaError(f"--format: {table} is exported as jsonl or csv, got {fmt!r}")
    db = run_dir / "run.db"
    if not db.exists():
        raise MemearenaError(f"{db}: no run database here")
    with RunStore(db) as store:
        if to is not None and str(to) == "-":
            n = store.write_export(table, sys.stdout, fmt)  # type: ignore[arg-type]
            sys.stdout.flush()
            err_console.print(f"wrote {n:,} rows to stdout", highlight=False)
            return
        target = to or run_dir / f"{table}.{fmt}"
        n = store.export(table, target, fmt)  # type: ignore[arg-type]
    console.print(f"wrote {n:,} rows to {console_safe(target)}", highlight=False)


@app.command()
@one_line_errors
def view(
    run_dir: Annotated[Path, typer.Argument(help="A run directory or a folder of runs.")] = Path(
        "runs"
    ),
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8765,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Allow a --host other than loopback.")
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", help="Another host name requests may name (repeatable)."),
    ] = None,
    label: Annotated[
        bool,
        typer.Option(
            "--label", help="Add the labelling pages (/label): labels go to labels.sqlite."
        ),
    ] = False,
    bundle: Annotated[
        Path | None,
        typer.Option("--bundle", help="Write the pages as a static site in this folder instead."),
    ] = None,
    max_pages: Annotated[
        int, typer.Option("--max-pages", help="With --bundle: the most pages written.")
    ] = 50_000,
) -> None:
    """Browse runs locally, read-only: every number opens the memes, requests and replies."""
    from memearena.view import serve

    if bundle is not None:
        from memearena.view.bundle import print_bundle, write_bundle

        print_bundle(console, write_bundle(run_dir, bundle, max_pages=max_pages))
        return

    serve(
        run_dir,
        host=host,
        port=port,
        allow_remote=allow_remote,
        allowed_hosts=allow_host or (),
        label=label,
    )


@models_app.command("check")
@one_line_errors
def models_check(config: Annotated[Path, typer.Argument(help="Run config (YAML).")]) -> None:
    """Ping every configured model with a tiny multimodal request."""
    from memearena.cli.models import check_models
    from memearena.config import load_config

    ok = check_models(load_config(config), console)
    if not ok:
        raise typer.Exit(1)


@app.command("run")
@with_overrides
@one_line_errors
def run_command(
    method: Annotated[str, typer.Argument(help="A registered method (arena, adapt, judge_audit).")],
    config: Annotated[Path, typer.Argument(help="Run config (YAML).")],
    out: OutOpt = None,
    dry_run: DryRunOpt = False,
    max_cost: MaxCostOpt = None,
    no_progress: NoProgressOpt = False,
) -> None:
    """Run (or resume) any registered method by name, with the options every method has."""
    from memearena.cli.run import run_or_plan
    from memearena.engine.registry import method_spec

    method_spec(method.replace("-", "_"))  # an unknown method: one line naming the known ones
    run_or_plan(
        method.replace("-", "_"),
        config,
        out=out,
        dry_run=dry_run,
        max_cost=max_cost,
        no_progress=no_progress,
        console=console,
        err_console=err_console,
    )


def _method_command(name: str) -> Callable[..., None]:
    """``memearena <name> CONFIG``: a method without a command module of its own."""

    def command(
        config: Annotated[Path, typer.Argument(help="Run config (YAML).")],
        out: OutOpt = None,
        dry_run: DryRunOpt = False,
        max_cost: MaxCostOpt = None,
        no_progress: NoProgressOpt = False,
    ) -> None:
        from memearena.cli.run import run_or_plan

        run_or_plan(
            name,
            config,
            out=out,
            dry_run=dry_run,
            max_cost=max_cost,
            no_progress=no_progress,
            console=console,
            err_console=err_console,
        )

    command.__doc__ = f"Run (or resume) the {name} method."
    return with_overrides(one_line_errors(command))


def _one(name: str, fn: Callable[..., Any], help: str | None = None) -> Command:
    """The click command of ``fn``, named ``name`` (as ``app.command(name)`` would make it)."""
    holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    holder.command(name, help=help)(fn)
    return typer.main.get_command(holder)


def _group(name: str, group: typer.Typer) -> Command:
    """The click group of ``group``, named ``name`` (as ``app.add_typer(group, name=name)``)."""
    cmd = typer.main.get_group(group)
    cmd.name = name
    return cmd


def _rank() -> Command:
    # rank's fits are many small batched solves: OpenBLAS's own threads only spin beside them
    # (1M battles x 50 models on two cores: ~10% more CPU and up to 0.4 s more wall, the same
    # output). numpy reads this once, at its first import (the one below); a value set is kept.
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from memearena.cli.rank import rank_command

    help = "Rank any pairwise battles (Chatbot Arena JSONL format)."
    return _one("rank", one_line_errors(rank_command), help)


def _compare() -> Command:
    from memearena.cli.compare import compare_command

    return _one("compare", one_line_errors(compare_command))


def _profile() -> Command:
    from memearena.cli.profile import profile_command

    return _one("profile", one_line_errors(profile_command))


def _data() -> Command:
    from memearena.cli.data import check_command

    data_app = typer.Typer(help="Dataset commands.", no_args_is_help=True)
    data_app.command("check", help="Validate every item of a config's datasets.")(
        one_line_errors(check_command)
    )
    return _group("data", data_app)


def _labels() -> Command:
    from memearena.cli.labels import labels_app

    return _group("labels", labels_app)


def _method(name: str) -> Callable[[], Command]:
    """The command of a registered method: ``memearena.cli.<name>``'s ``<name>_app`` (a group,
    whose ``run`` command runs the method) or ``<name>_command`` when the CLI has one for it,
    else the generic ``<name> CONFIG``. Each running command gets the overrides every method
    takes (``with_overrides``)."""

    def build() -> Command:
        import importlib
        import importlib.util

        dashed = name.replace("_", "-")
        module = f"memearena.cli.{name}"
        own = importlib.import_module(module) if importlib.util.find_spec(module) else None
        group = getattr(own, f"{name}_app", None)
        if isinstance(group, typer.Typer):
            for info in group.registered_commands:
                if info.name == "run" and info.callback is not None:
                    info.callback = with_overrides(info.callback)
            return _group(dashed, group)
        command = getattr(own, f"{name}_command", None)
        return _one(dashed, with_overrides(command) if callable(command) else _method_command(name))

    return build


def _method_names() -> list[str]:
    from memearena.engine.registry import method_names

    return method_names()


def _lazy_commands() -> dict[str, Callable[[], Command]]:
    """The commands built when named: name -> builder (the registered methods read now, so a
    method registered after this module was imported has its command too)."""
    built: dict[str, Callable[[], Command]] = {
        "rank": _rank,
        "compare": _compare,
        "profile": _profile,
        "data": _data,
        "labels": _labels,
    }
    for name in _method_names():
        built.setdefault(name.replace("_", "-"), _method(name))
    return built


def main() -> None:
    """Entry point of the ``memearena`` script."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
