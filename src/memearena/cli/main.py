"""The ``memearena`` command line. Errors are one line on stderr and exit code 2."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from memearena.cli.compare import compare_command
from memearena.cli.data import check_command
from memearena.cli.labels import labels_app
from memearena.cli.profile import profile_command
from memearena.cli.rank import rank_command
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

app = typer.Typer(
    name="memearena",
    help="Evaluate how well multimodal LLMs understand harmful memes, and audit their judges.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
data_app = typer.Typer(help="Dataset commands.", no_args_is_help=True)
models_app = typer.Typer(help="Model endpoint commands.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(models_app, name="models")
app.add_typer(labels_app, name="labels")

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


app.command("rank", help="Rank any pairwise battles (Chatbot Arena JSONL format).")(
    one_line_errors(rank_command)
)
app.command("compare")(one_line_errors(compare_command))
app.command("profile")(one_line_errors(profile_command))
data_app.command("check", help="Validate every item of a config's datasets.")(
    one_line_errors(check_command)
)


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


def _add_method_commands() -> None:
    """One command per registered method, read from the registry: ``memearena.cli.<name>``'s
    ``<name>_app`` (a group, whose ``run`` command runs the method) or ``<name>_command`` when
    the CLI has one for it, else the generic ``<name> CONFIG``. Each running command gets the
    overrides every method takes (``with_overrides``)."""
    import importlib
    import importlib.util

    from memearena.engine.registry import method_names

    for name in method_names():
        dashed = name.replace("_", "-")
        module = f"memearena.cli.{name}"
        own = importlib.import_module(module) if importlib.util.find_spec(module) else None
        group = getattr(own, f"{name}_app", None)
        if isinstance(group, typer.Typer):
            for info in group.registered_commands:
                if info.name == "run" and info.callback is not None:
                    info.callback = with_overrides(info.callback)
            app.add_typer(group, name=dashed)
            continue
        command = getattr(own, f"{name}_command", None)
        app.command(dashed)(with_overrides(command) if callable(command) else _method_command(name))


_add_method_commands()


def main() -> None:
    """Entry point of the ``memearena`` script."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
