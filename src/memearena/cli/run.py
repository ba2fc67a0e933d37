"""Running a method from the command line, the same for every method: ``CONFIG [--out DIR]
[--dry-run] [--max-cost USD]`` over the run lifecycle (``memearena.engine.lifecycle``), and the
overrides every method command takes (``with_overrides``): ``--limit N``, ``-T section.key=value``
(repeatable), ``--seed``, ``--bootstrap``, ``--max-concurrency`` and the model lists
``--models a,b`` / ``--targets`` / ``--judges`` (each method's section maps them to its own keys:
``model_list_options``). They edit the config's raw mapping before it is validated, so the
config's own models check them (a misspelt key gets its "did you mean", an unknown model name
the config's error), and they are part of the validated config: the run's snapshot, its resume
and ``report`` know them, and ``--dry-run`` plans with them.

Exit codes: 0 complete, 1 incomplete or nothing usable, 2 bad input (nothing was run),
3 the spend cap was reached (``memearena.engine.status``)."""

from __future__ import annotations

import contextvars
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from memearena.errors import MemearenaError
from memearena.report.safe import console_safe

if TYPE_CHECKING:
    from memearena.config import RunConfig

__all__ = [
    "DryRunOpt",
    "MaxCostOpt",
    "NoProgressOpt",
    "OutOpt",
    "Overrides",
    "console",
    "err_console",
    "one_line_errors",
    "print_error",
    "run_or_plan",
    "with_overrides",
]

OutOpt = Annotated[Path | None, typer.Option("--out", help="Output root (default ./runs).")]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Print planned calls, tokens and cost; call nothing.")
]
MaxCostOpt = Annotated[
    float | None, typer.Option("--max-cost", help="Stop cleanly before spending more USD.")
]
NoProgressOpt = Annotated[
    bool, typer.Option("--no-progress", help="No progress bars (the summary is still printed).")
]


@dataclass(frozen=True)
class Overrides:
    """The command line's changes to a run config, applied to its raw mapping (``apply``)."""

    limit: int | None = None
    """Every data entry's ``limit`` (memes kept per dataset)."""
    sets: tuple[str, ...] = ()
    """``section.key=value`` assignments (``-T``), the value read as a YAML scalar or list."""
    seed: int | None = None
    """The run's ``seed``."""
    bootstrap: int | None = None
    """The method section's ``bootstrap`` (rounds of its intervals)."""
    max_concurrency: int | None = None
    """Every model's ``max_concurrency``."""
    model_lists: tuple[tuple[str, str], ...] = ()
    """``(option, "a,b")`` pairs (``--models``, ``--targets``, ``--judges``): each replaces the
    model list of the method's section that the section maps the option to
    (``model_list_options``)."""

    def __bool__(self) -> bool:
        return self != Overrides()

    def apply(self, raw: dict[str, Any], method: str) -> None:
        """Edit ``raw`` (a config mapping, not yet validated) for ``method``'s run."""
        from memearena.config import check_option_ranges

        check_option_ranges({"bootstrap": self.bootstrap})
        if self.limit is not None:
            for entry in _entries(raw.get("data"), "data"):
                entry["limit"] = self.limit
        if self.seed is not None:
            raw["seed"] = self.seed
        if self.max_concurrency is not None:
            models = raw.get("models")
            for entry in models.values() if isinstance(models, dict) else ():
                if isinstance(entry, dict):
                    entry["max_concurrency"] = self.max_concurrency
        if self.bootstrap is not None:
            section = raw.get(method)
            if not _has_field(method, "bootstrap"):
                raise MemearenaError(f"--bootstrap: the {method} section has no bootstrap setting")
            if isinstance(section, dict):  # a missing section is reported as such, later
                section["bootstrap"] = self.bootstrap
        for key, names in _model_lists(method, self.model_lists).items():
            section = raw.get(method)
            if isinstance(section, dict):  # a missing section is reported as such, later
                section[key] = names
        for item in self.sets:
            _assign(raw, item)


def _model_lists(method: str, given: tuple[tuple[str, str], ...]) -> dict[str, list[str]]:
    """The section keys the model-list options set, each with its names; an option the section
    does not map, an empty list or two options setting one key is a one-line error. Unknown
    model names are left to the config's own check."""
    from memearena.config.sections import section_models

    model = section_models().get(method)
    options: dict[str, str] = dict(getattr(model, "model_list_options", None) or {})
    out: dict[str, list[str]] = {}
    by: dict[str, str] = {}
    for option, text in given:
        key = options.get(option)
        if key is None:
            takes = ", ".join(f"--{o} ({k})" for o, k in options.items()) or "none"
            raise MemearenaError(
                f"--{option}: the {method} section has no such model list (it takes: {takes})"
            )
        names = [n.strip() for n in text.split(",") if n.strip()]
        if not names:
            raise MemearenaError(f"--{option}: expected model names separated by commas")
        if key in by:
            raise MemearenaError(f"--{option} and --{by[key]} both set {method}.{key}: give one")
        by[key] = option
        out[key] = names
    return out


def _entries(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise MemearenaError(f"--limit: the config's {where!r} is not a list of datasets")
    return [e for e in value if isinstance(e, dict)]


def _has_field(method: str, name: str) -> bool:
    from memearena.config.sections import section_models

    model = section_models().get(method)
    return model is not None and name in model.model_fields


def _assign(raw: dict[str, Any], item: str) -> None:
    """``-T a.b.c=value``: ``raw["a"]["b"]["c"] = value`` (a list is indexed by number; a
    missing mapping is created, so a misspelt section is the config's unknown-key error)."""
    import yaml

    path, eq, text = item.partition("=")
    keys = path.strip().split(".")
    if not eq or not all(k.strip() for k in keys):
        raise MemearenaError(f"-T {item!r}: expected section.key=value")
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as e:
        raise MemearenaError(f"-T {path}: the value is not a YAML scalar or list ({e})") from None
    if isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(v, dict | list) for v in value)
    ):
        raise MemearenaError(f"-T {path}: the value must be a YAML scalar or a list of scalars")
    node: Any = raw
    for depth, key in enumerate(keys):
        last = depth == len(keys) - 1
        at = ".".join(keys[: depth + 1])
        if isinstance(node, list):
            if not key.isdigit() or int(key) >= len(node):
                raise MemearenaError(f"-T {path}: {at}: no entry {key} (it has {len(node)})")
            index = int(key)
            if last:
                node[index] = value
            else:
                node = node[index]
            continue
        if not isinstance(node, dict):
            raise MemearenaError(f"-T {path}: {'.'.join(keys[:depth])} is not a mapping")
        if last:
            node[key] = value
        else:
            if node.get(key) is None:
                node[key] = {}
            node = node[key]


_MODEL_LIST_OPTIONS = ("models", "targets", "judges")

_OVERRIDES: contextvars.ContextVar[Overrides | None] = contextvars.ContextVar(
    "memearena_cli_overrides", default=None
)

_OVERRIDE_PARAMS = (
    inspect.Parameter(
        "limit",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            int | None,
            typer.Option("--limit", min=1, help="Keep at most N memes of each dataset."),
        ],
    ),
    inspect.Parameter(
        "set_",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            list[str] | None,
            typer.Option(
                "-T",
                "--set",
                metavar="SECTION.KEY=VALUE",
                help="Set a config value (YAML scalar or list), e.g. -T arena.fusion_rounds=6; "
                "repeatable.",
            ),
        ],
    ),
    inspect.Parameter(
        "seed",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[int | None, typer.Option("--seed", help="The run's seed.")],
    ),
    inspect.Parameter(
        "bootstrap",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            int | None,
            typer.Option("--bootstrap", help="Bootstrap rounds of the method's intervals."),
        ],
    ),
    *(
        inspect.Parameter(
            f"{option}_list",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                str | None,
                typer.Option(f"--{option}", metavar="A,B", help=text),
            ],
        )
        for option, text in (
            ("models", "The models evaluated (the method's main model list), comma-separated."),
            ("targets", "The target models, comma-separated."),
            ("judges", "The judge models, comma-separated."),
        )
    ),
    inspect.Parameter(
        "max_concurrency",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            int | None,
            typer.Option("--max-concurrency", min=1, help="Most requests in flight to each model."),
        ],
    ),
)


def with_overrides(fn: F) -> F:
    """``fn`` (a method's run command) with the override options added; ``run_or_plan`` applies
    them while the command runs."""
    base = inspect.signature(fn, eval_str=True)
    clash = {p.name for p in _OVERRIDE_PARAMS} & set(base.parameters)
    if clash:  # the command has its own: it keeps them (the options are added once)
        return fn
    params = list(base.parameters.values())

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        sets = kwargs.pop("set_", None)
        chosen = Overrides(
            limit=kwargs.pop("limit", None),
            sets=tuple(sets or ()),
            seed=kwargs.pop("seed", None),
            bootstrap=kwargs.pop("bootstrap", None),
            max_concurrency=kwargs.pop("max_concurrency", None),
            model_lists=tuple(
                (option, text)
                for option in _MODEL_LIST_OPTIONS
                if (text := kwargs.pop(f"{option}_list", None)) is not None
            ),
        )
        token = _OVERRIDES.set(chosen)
        try:
            return fn(*args, **kwargs)
        finally:
            _OVERRIDES.reset(token)

    sig = base.replace(parameters=[*params, *_OVERRIDE_PARAMS])
    wrapper.__signature__ = sig  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()}
    return wrapper  # type: ignore[return-value]


# Piped output (logs, CI) gets a fixed width: the summary tables fit 80 columns.
console = Console() if sys.stdout.isatty() else Console(width=80)
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def print_error(e: BaseException) -> None:
    """One line on stderr: the message may hold untrusted text (names, replies), shown inert."""
    err_console.print(f"[red]error:[/red] {console_safe(e)}", highlight=False, soft_wrap=True)


def one_line_errors(fn: F) -> F:
    """Print a MemearenaError as one line and exit 2 (tracebacks are for bugs only); numeric
    options are range-checked first."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            from memearena.config import check_option_ranges  # lazy: fast --help

            check_option_ranges(kwargs)
            return fn(*args, **kwargs)
        except MemearenaError as e:
            print_error(e)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err_console.print("interrupted: re-run the same command to resume")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def run_or_plan(
    method: str,
    config: Path,
    *,
    out: Path | None,
    dry_run: bool,
    max_cost: float | None,
    no_progress: bool,
    console: Console,
    err_console: Console,
    options: Callable[[RunConfig], dict[str, Any]] | None = None,
) -> None:
    """Load ``config``; print the plan (``--dry-run``) or run ``method`` and print its summary;
    exit with the run's code. ``options``: the method's options, read from the loaded config."""
    from memearena.config import check_wall_time, load_config
    from memearena.engine.lifecycle import plan_method, print_run_summary, run_method

    overrides = _OVERRIDES.get() or Overrides()
    cfg = load_config(config, (lambda raw: overrides.apply(raw, method)) if overrides else None)
    if getattr(cfg, method, None) is None:
        raise MemearenaError(f"{config}: {method}: section is missing")
    opts = options(cfg) if options is not None else {}
    if dry_run:
        from memearena.cli.models import warn_missing_keys
        from memearena.report.console import print_plan

        plan = plan_method(method, cfg, **opts)
        providers = {name: m.provider for name, m in cfg.models.items()}
        print_plan(console, cfg.run, plan.per_model, providers)
        if plan.calls_low is not None and plan.calls_high is not None:
            console.print(
                f"Planned calls: {plan.calls:,} is a point estimate ({method}'s path follows "
                f"the answers); the run makes {plan.calls_low:,} to {plan.calls_high:,} "
                f"({plan.range_note}).",
                highlight=False,
            )
        check_wall_time(cfg, {m: row["calls"] for m, row in plan.per_model.items()})
        warn_missing_keys(cfg, err_console)
        return
    root = out or Path("runs")
    result = run_method(
        method,
        cfg,
        root / cfg.run,
        max_cost=max_cost,
        console=console,
        show_progress=not no_progress,
        cache_path=root / "cache.sqlite",
        **opts,
    )
    print_run_summary(console, result)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
