"""Run configs: the YAML users write, validated by pydantic. Errors name the field."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, get_args
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails

from memearena.config.sections import section_model, section_models, section_names
from memearena.config.urls import check_base_url
from memearena.errors import ConfigError

MAX_BOOTSTRAP = 100_000
"""Most bootstrap rounds any option accepts (every ``bootstrap`` in a config, ``--bootstrap``):
rounds x models x models counts must fit in memory."""
MAX_ABS_NUMBER = 1e15
"""Largest magnitude of any number in a config (a sanity bound: no option needs more)."""

# Key shapes of the major providers: a pasted key must never be stored as an env-var name.
_KEY_PREFIXES = (
    "sk-",  # OpenAI (sk-proj-, sk-svcacct-), Anthropic (sk-ant-), DeepSeek, OpenRouter (sk-or-)
    "sk_",
    "aiza",  # Google (Gemini / AI Studio)
    "gsk_",  # Groq
    "xai-",  # xAI
    "hf_",  # Hugging Face
    "r8_",  # Replicate
    "pplx-",  # Perplexity
    "nvapi-",  # NVIDIA
    "fw_",  # Fireworks
    "akia",  # AWS access key id
    "asia",  # AWS temporary key id
    "ghp_",  # GitHub
    "github_pat_",
    "glpat-",  # GitLab
    "ya29.",  # Google OAuth access token
    "eyj",  # a JWT
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Keys without a prefix (Mistral, Cohere, Together, Azure): long random-looking tokens.
_RANDOM_TOKEN = re.compile(r"(?=.*\d)(?=.*[a-z])[A-Za-z0-9]{24,}|[0-9a-fA-F]{32,}")


def looks_like_key(value: str) -> bool:
    """Whether ``value`` has the shape of an API key rather than an environment-variable name."""
    v = value.strip()
    return (
        v.lower().startswith(_KEY_PREFIXES)
        or not _ENV_NAME.fullmatch(v)
        or bool(_RANDOM_TOKEN.fullmatch(v))
    )


def _check_url(u: object) -> str:
    if not isinstance(u, str):
        raise ValueError(f"must be a URL string, got {type(u).__name__}")
    if not u.startswith(("http://", "https://")):
        raise ValueError(f"must start with http:// or https://, got {_clip(u)!r}")
    try:
        parts = urlsplit(u)
        _ = parts.port  # raises on a malformed port
    except ValueError as e:
        raise ValueError(f"invalid URL {_clip(u)!r} ({e})") from None
    if not parts.hostname:
        raise ValueError(f"URL {_clip(u)!r} has no host")
    if any(c.isspace() or ord(c) < 32 for c in u):
        raise ValueError(f"URL {_clip(u)!r} contains whitespace or control characters")
    return u


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class StrictModel(BaseModel):
    """A config model: unknown keys are errors, and infinity or NaN is never an option."""

    # Infinity and NaN are never a meaningful option (timeout .inf hangs, price .inf is not JSON).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ConfigSection(StrictModel):
    """A method's section of the run config. Its hooks, called by :class:`RunConfig`:
    ``model_refs`` (checked against ``models``), ``resolve_paths`` and ``check_files``."""

    def model_refs(self) -> Iterable[tuple[str, str]]:
        """Every ``(field, model name)`` this section refers to."""
        return ()

    def resolve_paths(self, fix: Callable[[Path], Path]) -> Self:
        """A copy with every relative path resolved by ``fix`` (against the config's folder)."""
        return self

    def check_files(self, source: str) -> None:
        """ConfigError when a file the section names is missing (before any call)."""


class Price(StrictModel):
    """USD per one million tokens."""

    input: float = Field(0.0, ge=0, le=10_000)
    """USD per 1M input (prompt) tokens."""
    output: float = Field(0.0, ge=0, le=10_000)
    """USD per 1M output (completion) tokens."""


class _ModelCommon(StrictModel):
    max_concurrency: int = Field(16, gt=0, le=4096)
    """Most requests in flight to this model at once."""
    rpm: float | None = Field(None, gt=0, le=1_000_000)
    """Most requests per minute (None: unlimited); a run it would slow past ``max_wall_hours``
    is refused when it is planned."""
    timeout: float = Field(120.0, gt=0, le=3600)
    """Seconds before one request is abandoned (and retried); at most an hour."""
    max_retries: int = Field(6, ge=0, le=50)
    """Retries of a transient failure (429, 5xx, timeout) before the call is recorded as failed."""
    temperature: float | None = Field(None, ge=0, le=10)
    """Sampling temperature (None: the endpoint's default)."""
    top_p: float | None = Field(None, gt=0, le=1)
    """Nucleus sampling mass (None: the endpoint's default)."""
    max_tokens: int | None = Field(None, gt=0, le=10_000_000)
    """Most output tokens per call (None: the endpoint's default)."""
    seed: int | None = None
    """Sampling seed passed to endpoints that honour it."""
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    """Reasoning effort for reasoning models (sent only when set)."""
    price: Price = Field(default_factory=Price)
    """Cost per 1M tokens, used for accounting, --dry-run estimates and --max-cost."""
    structured_outputs: bool = False
    """Ask for schema-constrained JSON (``response_format`` json_schema) where a role has a
    schema (Arena judges); set it only for endpoints that support structured outputs."""
    max_response_bytes: int = Field(2_000_000, gt=0, le=1_000_000_000)
    """Largest reply accepted, in bytes: reading stops there and the call fails (never cached)."""


class OpenAIModelConfig(_ModelCommon):
    """Any OpenAI-compatible chat-completions endpoint (OpenAI, Gemini/Anthropic compatibility
    endpoints, vLLM, SGLang, Ollama, LM Studio)."""

    provider: Literal["openai"]
    """Always ``openai`` for OpenAI-compatible endpoints."""
    model: str
    """Model name the endpoint expects (e.g. ``gpt-4o-2024-08-06``)."""
    base_url: str | list[str] | None = None
    """Endpoint URL, or several replicas to balance over (None: api.openai.com)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (never the key itself)."""
    family: str | None = None
    """Model family (e.g. ``gpt``), used to measure self-preference of judges."""
    client: Literal["lean", "sdk"] = "lean"
    """How requests are sent: ``lean`` (default) speaks the chat-completions and embeddings
    protocol directly (aiohttp + msgspec, several times less CPU per call); ``sdk`` goes through
    the official ``openai`` package. Both validate replies alike; the Batch API always uses the
    SDK."""
    batch: bool = False
    """Send this model's calls through the OpenAI-compatible Batch API (``/v1/files`` +
    ``/v1/batches``): cheaper, slower (up to the provider's 24 h window), resumable."""
    batch_discount: float = Field(0.5, gt=0, le=1)
    """Share of ``price`` a batched call costs (0.5 at most providers); used for spend and
    ``--dry-run``."""
    batch_poll_s: float = Field(30.0, gt=0, le=3600)
    """Seconds between two polls of a pending batch."""
    batch_max_bytes: int = Field(200_000_000, ge=4096, le=10_000_000_000)
    """Largest batch input file the provider accepts, in bytes (200 MB at OpenAI): the calls
    that gather are split into files of at most this size (and an upload refused as too
    large is split again)."""
    batch_max_requests: int = Field(50_000, ge=1, le=10_000_000)
    """Most requests in one batch input file (50,000 at OpenAI)."""

    @field_validator("base_url")
    @classmethod
    def _urls(cls, v: str | list[str] | None) -> str | list[str] | None:
        urls = [v] if isinstance(v, str) else (v or [])
        for u in urls:
            if isinstance(u, str):
                check_base_url(u)  # first: a message that echoes the URL must hold no secret
            _check_url(u)
        if isinstance(v, list) and not v:
            raise ValueError("must list at least one URL")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        # The value is never echoed: it may be a real key pasted by mistake.
        if v is not None and looks_like_key(v):
            raise ValueError(
                "must be the NAME of an environment variable (e.g. OPENAI_API_KEY), "
                "not a key or anything shaped like one"
            )
        return v

    def urls(self) -> list[str]:
        """The replica URLs (empty: the SDK default)."""
        if self.base_url is None:
            return []
        return [self.base_url] if isinstance(self.base_url, str) else list(self.base_url)


class SimModelConfig(_ModelCommon):
    """A simulated model (offline; labelled simulated everywhere it appears)."""

    provider: Literal["sim"]
    """Always ``sim`` for the built-in simulated world."""
    skill: float = Field(0.5, ge=0, le=1)
    """Latent skill of a simulated target: probability each background fact it states is right."""
    family: str | None = None
    """Family name; a self-preferring judge favours answers of its own family."""
    position_bias: float = Field(0.0, ge=-1, le=1)
    """Judge: extra preference for the response shown first (A); negative favours B."""
    verbosity_bias: float = Field(0.0, ge=0, le=1)
    """Judge: extra preference for the longer response."""
    self_bias: float = Field(0.0, ge=0, le=1)
    """Judge: extra preference for responses of its own family."""
    noise: float = Field(0.15, ge=0, le=2)
    """Judge: standard deviation of the noise added to every quality comparison."""
    guideline_damping: float = Field(0.0, ge=0, le=1)
    """Judge: how far settled beliefs damp its biases: each bias is scaled by
    1 − guideline_damping × coverage, coverage being the share of the meme's facts and target
    its beliefs settle after reading the guideline (0: biases no guideline can change)."""
    family_misbeliefs: float = Field(0.0, ge=0, le=1)
    """Share of a model's misbelief draws made once per family instead of per model, so models
    of one family hold the same false beliefs about a meme (0: independent)."""
    ignores_image: float = Field(0.0, ge=0, le=1)
    """Judge audit: how far a pointwise judge overlooks the image (a missing or mismatched
    image barely lowers its score)."""
    query_trust: float = Field(0.0, ge=0, le=1)
    """Judge audit: how far it over-trusts the query (a mismatched query goes unnoticed; an
    appended description raises its score)."""
    text_sway: float = Field(0.0, ge=0, le=1)
    """Judge audit: how far text drawn into the image moves its score."""
    refusal_rate: float = Field(0.0, ge=0, le=1)
    """Target: probability of refusing to answer."""
    format_error_rate: float = Field(0.0, ge=0, le=1)
    """Probability an answer omits the requested sections / JSON (a malformed output)."""
    latency_ms: float = Field(0.0, ge=0, le=600_000)
    """Simulated response latency."""
    model: str | None = None
    """Display name (defaults to the config key)."""
    category_skill: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)
    """Target (Adapt): understanding per harm category, overriding ``skill`` in that category."""


ModelConfig = Annotated[OpenAIModelConfig | SimModelConfig, Field(discriminator="provider")]

DatasetFormat = Literal["fhm", "harm", "mami", "mm-judgebias", "folder", "jsonl", "csv", "demo"]


class DatasetConfig(StrictModel):
    """One dataset to load; paths are relative to the config file."""

    format: DatasetFormat
    """File format: fhm, harm, mami, mm-judgebias, folder, jsonl, csv or demo (bundled)."""
    path: Path | None = None
    """Annotation file (or folder for ``folder``); not needed for ``demo``."""
    image_root: Path | None = None
    """Folder image paths are relative to (default: the annotation file's folder)."""
    erased_dir: Path | None = None
    """Folder of the memes' text-erased images, named as the images are (``<name>`` or
    ``<stem>.png``); Adapt's refinement shows them with the rewritten text."""
    split: str | None = None
    """Split name recorded on every item (default: the file's stem)."""
    harmful_only: bool = False
    """Keep only items labelled harmful."""
    limit: int | None = Field(None, gt=0, le=100_000_000)
    """Keep at most this many items (after sampling)."""
    sample: int | None = Field(None, gt=0, le=100_000_000)
    """Draw this many items at random, stratified by the harmful label, with ``sample_seed``."""
    sample_seed: int = 0
    """Seed of the stratified sample."""
    skip_bad: bool = False
    """Deprecated, kept for old configs: malformed rows are always recorded and skipped unless
    ``strict`` is set."""
    strict: bool = False
    """Stop at the first malformed row or conflicting duplicate instead of recording it."""
    ids: list[str | int] | None = None
    """Keep only these item ids (canonical form, e.g. FHM ``8291`` = ``"08291"``)."""
    exclude: list[str | int] = Field(default_factory=list)
    """Leave out these item ids (applied before ``harmful_only``, ``sample`` and ``limit``)."""
    fields: dict[Literal["id", "image", "text", "label", "labels"], str] | None = None
    """``jsonl``/``csv`` only: the file's name for each field, e.g. ``{image: img}``."""

    @model_validator(mode="after")
    def _needs_path(self) -> DatasetConfig:
        if self.format != "demo" and self.path is None:
            raise ValueError(f"format {self.format!r} needs a 'path'")
        if self.fields is not None:
            if self.format not in ("jsonl", "csv"):
                raise ValueError(
                    f"'fields' applies to formats jsonl and csv, not {self.format!r} "
                    "(published formats have fixed field names)"
                )
            names = list(self.fields.values())
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"'fields' maps several fields to the same column {dup}")
            if any(not n.strip() for n in names):
                raise ValueError("'fields' names must not be empty")
        return self


class ImageConfig(StrictModel):
    """How images are prepared before they are sent."""

    max_side: int = Field(1024, ge=64, le=16_384)
    """Longest side in pixels after resizing."""
    max_pixels: int = Field(40_000_000, gt=0, le=1_000_000_000)
    """Images with more pixels are rejected (decompression-bomb guard)."""
    max_dimension: int = Field(16_384, ge=64, le=1_000_000)
    """Images wider or taller than this many pixels are rejected, from the header alone."""
    max_aspect: float = Field(20.0, ge=1.0, le=10_000.0)
    """Images whose long side is more than this many times the short side are rejected (a thin
    strip is tiny on disk, but resizing and OCR scale it into arrays of gigabytes)."""


class RunConfig(StrictModel):
    """A whole run: models, datasets and one section per registered method, named as the
    method; each section's model is the method's own."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    run: str = "run"
    """Run directory name under --out: one path component (no ``/``, ``..`` or absolute path)."""
    seed: int = 0
    """Seed of every random choice in the run."""
    models: dict[str, ModelConfig]
    """Every model any role uses, by the name the sections refer to."""
    data: list[DatasetConfig] = Field(min_length=1)
    """Datasets to load, concatenated."""
    image: ImageConfig = Field(default_factory=ImageConfig)
    """Image preparation."""
    cache: bool = True
    """Reuse identical earlier calls from the content-addressed cache."""
    max_wall_hours: float = Field(72.0, gt=0, le=24 * 366)
    """Ceiling on a run's wall time implied by the models' ``rpm`` limits: a plan that needs
    longer is refused, with the estimate, before any call."""

    @field_validator("run")
    @classmethod
    def _run_name(cls, v: str) -> str:
        # A run name is a directory under --out: it must not reach outside it.
        if (
            not v.strip()
            or v in (".", "..")
            or any(c in v for c in "/\\:")
            or any(ord(c) < 32 or ord(c) == 127 for c in v)
            or len(v) > 128
        ):
            raise ValueError(
                f"{_clip(v)!r} is not a plain directory name (one path component, no '/', "
                "'\\', ':' or '..', at most 128 characters)"
            )
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _sections(cls, data: Any, handler: ModelWrapValidatorHandler[RunConfig]) -> RunConfig:
        """The method sections, validated by the models the registry gave (each error located
        under its section, as a field's would be); an unknown top-level key is an error."""
        if not isinstance(data, Mapping):
            return handler(data)
        core: dict[str, Any] = {}
        sections: dict[str, BaseModel | None] = dict.fromkeys(section_names())
        errors: list[InitErrorDetails] = []
        for key, value in data.items():
            # Only the sections the config holds have their models imported.
            model = section_model(key) if isinstance(key, str) else None
            if model is None and key not in cls.model_fields:
                errors.append({"type": "extra_forbidden", "loc": (key,), "input": value})
            elif model is None:
                core[key] = value
            elif value is None or isinstance(value, model):
                sections[key] = value
            else:
                try:
                    sections[key] = model.model_validate(value)
                except ValidationError as e:
                    errors += [_located(key, err) for err in e.errors()]
        try:
            cfg = handler(core)
        except ValidationError as e:
            raise ValidationError.from_exception_data(
                cls.__name__, [*(_located(None, err) for err in e.errors()), *errors]
            ) from None
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        assert cfg.__pydantic_extra__ is not None  # extra="allow"
        cfg.__pydantic_extra__.update(sections)
        for where, name in cfg.model_refs():
            if name not in cfg.models:
                raise ValueError(f"{where}: model {name!r} is not defined under 'models'")
        return cfg

    def sections(self) -> dict[str, BaseModel]:
        """The method sections this config holds, by name (absent ones left out)."""
        extra = self.__pydantic_extra__ or {}
        return {k: v for k, v in extra.items() if isinstance(v, BaseModel)}

    def section(self, name: str) -> BaseModel | None:
        """The section of method ``name``, or None when the config has none."""
        return self.sections().get(name)

    def model_refs(self) -> Iterator[tuple[str, str]]:
        """Every ``(field, model name)`` the sections refer to (each section's ``model_refs``)."""
        for sec in self.sections().values():
            refs = getattr(sec, "model_refs", None)
            if callable(refs):
                yield from refs()

    if TYPE_CHECKING:
        # A method's section is an attribute named as the method (``cfg.arena``), None when the
        # config has none; the method reads it typed through its own section model.
        def __getattr__(self, name: str) -> Any: ...


def _located(section: str | None, err: ErrorDetails) -> InitErrorDetails:
    """A validation error of a section, located under it (``arena.targets``)."""
    loc = (section, *err["loc"]) if section is not None else tuple(err["loc"])
    out: InitErrorDetails = {"type": err["type"], "loc": loc, "input": err["input"]}
    if "ctx" in err:
        out["ctx"] = err["ctx"]
    return out


def _loc_text(loc: tuple[Any, ...]) -> str:
    text = ".".join(str(p) for p in loc if not str(p).startswith("function-after"))
    # Discriminated unions add the tag to the location; drop it for readability.
    return text.replace(".openai.", ".").replace(".sim.", ".")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The config models an annotation holds (through Optional, unions, lists, dict values)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The field names valid beside ``loc``'s last part (the section it sits in): a hint for
    a misspelt key. Parts that name no field (a model's name, a list index, a union's tag) are
    stepped over."""
    sections = section_models()
    if not loc[:-1]:
        return sorted({*RunConfig.model_fields, *sections})
    first = sections.get(loc[0]) if isinstance(loc[0], str) else None
    current: list[type[BaseModel]] = [first] if first is not None else [RunConfig]
    for part in loc[1:-1] if first is not None else loc[:-1]:
        inner = [
            m
            for model in current
            if isinstance(part, str) and part in model.model_fields
            for m in _models_in(model.model_fields[part].annotation)
        ]
        current = inner or current
    return sorted({name for model in current for name in model.model_fields})


def _unknown_key(e: Any) -> str:
    loc = tuple(e["loc"])
    key = str(loc[-1])
    near = difflib.get_close_matches(key, _fields_at(loc), n=1)
    return _loc_text(loc) + (f" (did you mean {near[0]!r}?)" if near else "")


def _format_validation_error(err: ValidationError, source: str) -> str:
    """One line: every misspelt or unknown key named first (each with the closest valid name;
    a misspelt required key also shows as missing, which says less), else the first error."""
    errors = err.errors()
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        others = len(errors) - len(unknown)
        more = f" (+{others} more)" if others else ""
        keys = ", ".join(_unknown_key(e) for e in unknown[:5])
        if len(unknown) > 5:
            keys += f", and {len(unknown) - 5} more"
        what = "unknown key" if len(unknown) == 1 else "unknown keys"
        return f"{source}: {what}: {keys}{more}"
    first = errors[0]
    loc = _loc_text(tuple(first["loc"]))
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {loc}: {msg}{more}" if loc else f"{source}: {msg}{more}"


_MAX_INT = 2**63 - 1


_MAX_NODES = 1_000_000


def _numbers(raw: Any) -> Iterator[tuple[str, str, int | float]]:
    """Every number in a raw config mapping, with its dotted path and its key. YAML aliases can
    make a small file expand to billions of values: the walk stops at ``_MAX_NODES``."""
    stack: list[tuple[Any, str]] = [(raw, "")]
    visited = 0
    while stack:
        node, path = stack.pop()
        visited += 1
        if visited > _MAX_NODES:
            raise ValueError(f"the config expands to more than {_MAX_NODES:,} values")
        if isinstance(node, Mapping):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}.{i}") for i, v in enumerate(node))
        elif isinstance(node, int | float) and not isinstance(node, bool):
            yield path, path.rsplit(".", 1)[-1], node


def check_numbers(raw: Any, source: str) -> None:
    """Range-check every number in a raw config, whatever section holds it: finite, of sane
    magnitude, and every ``bootstrap`` within 0..MAX_BOOTSTRAP (sections add their own bounds)."""
    try:
        numbers = list(_numbers(raw))
    except ValueError as e:
        raise ConfigError(f"{source}: {e}") from None
    for path, key, v in numbers:
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"{source}: {path}: must be a finite number, got {v}")
        if abs(v) > (_MAX_INT if isinstance(v, int) else MAX_ABS_NUMBER):
            raise ConfigError(f"{source}: {path}: {v:.3g} is out of any sane range")
        if key == "bootstrap" and not 0 <= v <= MAX_BOOTSTRAP:
            raise ConfigError(
                f"{source}: {path}: must be between 0 and {MAX_BOOTSTRAP:,} rounds, got {v:,}"
            )


def parse_config(raw: Any, source: str = "<config>", base_dir: Path | None = None) -> RunConfig:
    """Validate a config mapping; relative dataset paths are resolved against ``base_dir``, and
    referenced files (``human_guidelines``) must exist then."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the config must be a mapping at the top level")
    check_numbers(raw, source)
    try:
        cfg = RunConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, source)) from None
    if base_dir is not None:
        cfg = _resolve_paths(cfg, base_dir)
        _check_files(cfg, source)
    return cfg


def _check_files(cfg: RunConfig, source: str) -> None:
    # Found now, not after the first paid calls of a run.
    for sec in cfg.sections().values():
        check = getattr(sec, "check_files", None)
        if callable(check):
            check(source)


def _resolve_paths(cfg: RunConfig, base: Path) -> RunConfig:
    def fix(p: Path) -> Path:
        return p if p.is_absolute() else (base / p).resolve()

    data = [
        d.model_copy(
            update={
                k: fix(p)
                for k, p in (
                    ("path", d.path),
                    ("image_root", d.image_root),
                    ("erased_dir", d.erased_dir),
                )
                if p is not None
            }
        )
        for d in cfg.data
    ]
    update: dict[str, Any] = {"data": data}
    for name, sec in cfg.sections().items():
        resolve = getattr(sec, "resolve_paths", None)
        if callable(resolve):
            update[name] = resolve(fix)
    return cfg.model_copy(update=update)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses duplicate keys (plain YAML silently keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                duplicate = key in seen
            except TypeError:
                continue  # an unhashable key: construct_mapping reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {_clip(str(key))!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _alias_bomb_line(root: yaml.Node, limit: int) -> int | None:
    """The line of the innermost node whose expansion passes ``limit`` values (aliases make a
    few lines expand to billions), or None. Sizes are counted once per node, so a bomb is
    measured without being expanded."""
    sizes: dict[int, int] = {}

    def children(n: yaml.Node) -> list[yaml.Node]:
        if isinstance(n, yaml.MappingNode):
            return [x for pair in n.value for x in pair]
        if isinstance(n, yaml.SequenceNode):
            return list(n.value)
        return []

    def size(n: yaml.Node) -> int:
        # Iterative post-order: a deep document must not exhaust the stack here.
        stack = [(n, False)]
        while stack:
            cur, done = stack.pop()
            if id(cur) in sizes:
                continue
            if done:
                total = 1 + sum(sizes[id(c)] for c in children(cur))
                sizes[id(cur)] = min(total, limit + 1)
            else:
                stack.append((cur, True))
                stack.extend((c, False) for c in children(cur) if id(c) not in sizes)
        return sizes[id(n)]

    if size(root) <= limit:
        return None
    node = root
    while True:
        big = next((c for c in children(node) if size(c) > limit), None)
        if big is None:
            return int(node.start_mark.line) + 1
        node = big


MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""Largest config file read (a run config is a few kilobytes)."""


def load_config(path: str | Path, edit: Callable[[Any], None] | None = None) -> RunConfig:
    """Read and validate a YAML run config; any problem is one ConfigError line naming the field.
    ``edit`` changes the raw mapping before it is validated (the command line's overrides), so
    an override is checked as the file's own keys are."""
    path = Path(path)
    try:
        if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: config is larger than {MAX_CONFIG_BYTES:,} bytes")
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: config is not UTF-8 text (bad byte at {e.start})") from None
    text = text.removeprefix("\ufeff")
    try:
        loader = _UniqueKeyLoader(text)  # a SafeLoader: no arbitrary objects
        try:
            node = loader.get_single_node()  # type: ignore[no-untyped-call]
            if node is not None:
                line = _alias_bomb_line(node, _MAX_NODES)
                if line is not None:
                    raise ConfigError(
                        f"{path}:{line}: the config expands to more than {_MAX_NODES:,} values "
                        "(YAML aliases)"
                    )
            raw = loader.construct_document(node) if node is not None else None  # type: ignore[no-untyped-call]
        finally:
            loader.dispose()  # type: ignore[no-untyped-call]
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML (nested too deeply)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML ({getattr(e, 'problem', e)})") from None
    if edit is not None and isinstance(raw, dict):
        edit(raw)
    return parse_config(raw, str(path), path.parent.resolve())


def check_option_ranges(options: Mapping[str, Any]) -> None:
    """Range-check the numeric command-line options every command shares, by name:
    ``max_cost`` finite and >= 0, ``bootstrap`` within 0..MAX_BOOTSTRAP, ``scale`` finite > 0."""
    cost = options.get("max_cost")
    if isinstance(cost, float | int) and not (math.isfinite(cost) and cost >= 0):
        raise ConfigError(f"--max-cost: must be a finite number of USD >= 0, got {cost}")
    boot = options.get("bootstrap")
    if isinstance(boot, int) and not 0 <= boot <= MAX_BOOTSTRAP:
        raise ConfigError(f"--bootstrap: must be between 0 and {MAX_BOOTSTRAP:,}, got {boot:,}")
    scale = options.get("scale")
    if isinstance(scale, float | int) and not (math.isfinite(scale) and 0 < scale <= 1e6):
        raise ConfigError(f"--scale: must be a finite number > 0, got {scale}")


def check_wall_time(cfg: RunConfig, calls: Mapping[str, float]) -> None:
    """ConfigError, with the estimate, when a model's ``rpm`` implies the planned calls take
    longer than ``max_wall_hours`` (a run that would silently crawl for weeks)."""
    worst: tuple[float, str, float] | None = None
    for name, n in calls.items():
        m = cfg.models.get(name)
        if m is None or m.rpm is None or n <= 0:
            continue
        hours = n / m.rpm / 60
        if worst is None or hours > worst[0]:
            worst = (hours, name, n)
    if worst is not None and worst[0] > cfg.max_wall_hours:
        hours, name, n = worst
        rpm = cfg.models[name].rpm
        raise ConfigError(
            f"models.{name}.rpm: {rpm:g} requests/min needs about {_duration(hours)} for the "
            f"{n:,.0f} planned calls to {name!r}, over max_wall_hours ({cfg.max_wall_hours:g} h); "
            "raise rpm or max_wall_hours, or plan fewer items"
        )


def _duration(hours: float) -> str:
    if hours < 48:
        return f"{hours:,.1f} h"
    days = hours / 24
    return f"{days:,.0f} days" if days < 3650 else f"{days / 365:,.0f} years"
