"""Template rendering: every prompt is a Jinja2 file under ``templates/``, rendered strictly."""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache, lru_cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from jinja2 import (
    BaseLoader,
    ChoiceLoader,
    Environment,
    FileSystemLoader,
    PackageLoader,
    PrefixLoader,
    StrictUndefined,
    Template,
)

from memearena.models.types import ImagePart, Message, TextPart
from memearena.prompts.compiled import CompiledTemplate, compile_template
from memearena.prompts.scores import defang_score_fields

__all__ = [
    "DELIMITER_TAGS",
    "RESERVED_KEYS",
    "ROLE_TEMPLATES",
    "OwnWording",
    "build_messages",
    "clear_template_cache",
    "compiled_templates",
    "defang",
    "reask_message",
    "register_templates",
    "render",
    "render_jinja",
    "rendered_template_hashes",
    "template_hashes",
    "template_path",
]

ROLE_TEMPLATES: dict[str, str] = {
    "arena.context": "arena/context.j2",
    "arena.answer": "arena/answer.j2",
    "arena.guideline_draft": "arena/guideline_draft.j2",
    "arena.guideline_self": "arena/guideline_draft.j2",
    "arena.guideline_refine": "arena/guideline_refine.j2",
    "arena.judge": "arena/judge_pairwise.j2",
    "judge_audit.respond": "judge_audit/respond.j2",
    "judge_audit.describe": "judge_audit/describe.j2",
    "judge_audit.score": "judge_audit/score_guarded.j2",
    "judge_audit.pairwise": "judge_audit/pairwise.j2",
    "adapt.miner": "adapt/miner.j2",
    "adapt.category_judge": "adapt/category_judge.j2",
    "adapt.image_examiner": "adapt/image_examiner.j2",
    "adapt.instruction": "adapt/instruction.j2",
    "adapt.narrator": "adapt/narrator.j2",
    "adapt.answer": "adapt/answer.j2",
    "adapt.reference": "adapt/reference.j2",
    "adapt.reference_judge": "adapt/reference_judge.j2",
    "adapt.score": "adapt/scorer.j2",
    "adapt.refine": "adapt/refiner.j2",
    "adapt.check": "adapt/checker.j2",
    "ping": "common/ping.j2",
    "reask": "common/reask.j2",
}
"""Agent role -> the template that prompts it (``render`` accepts either)."""

_SYSTEM_TEMPLATES: dict[str, str] = {
    "arena/context.j2": "common/system_context.j2",
    "arena/answer.j2": "common/system_target.j2",
    "arena/guideline_draft.j2": "common/system_judge.j2",
    "arena/guideline_refine.j2": "common/system_judge.j2",
    "arena/judge_pairwise.j2": "common/system_judge.j2",
    "judge_audit/respond.j2": "common/system_target.j2",
    "judge_audit/respond_text.j2": "common/system_target.j2",
    "judge_audit/score_guarded.j2": "judge_audit/system_judge.j2",
    "judge_audit/score_score_guided.j2": "judge_audit/system_judge.j2",
    "judge_audit/score_modality_constraints.j2": "judge_audit/system_judge.j2",
    "judge_audit/score_modality_reasoning.j2": "judge_audit/system_judge.j2",
    "judge_audit/score_abstention.j2": "judge_audit/system_judge.j2",
    "judge_audit/pairwise.j2": "judge_audit/system_judge.j2",
    "adapt/miner.j2": "common/system_context.j2",
    "adapt/category_judge.j2": "common/system_context.j2",
    "adapt/image_examiner.j2": "common/system_context.j2",
    "adapt/instruction.j2": "common/system_context.j2",
    "adapt/narrator.j2": "common/system_context.j2",
    "adapt/answer.j2": "common/system_target.j2",
    "adapt/reference.j2": "common/system_target.j2",
    "adapt/reference_judge.j2": "common/system_judge.j2",
    "adapt/scorer.j2": "common/system_judge.j2",
    "adapt/refiner.j2": "common/system_context.j2",
    "adapt/checker.j2": "common/system_judge.j2",
}
_DEFAULT_SYSTEM = "common/system_default.j2"

DELIMITER_TAGS: tuple[str, ...] = (
    "meme_text",
    "context_background",
    "task",
    "guideline",
    "analysis",
    "response_a",
    "response_b",
    "criteria",
    "query",
    "response",
    "taxonomy",
    "proposal",
    "category",
    "instruction",
    "misbelief",
    "reference",
    "answer",
    "candidate",
    "examples",
    "rewrite",
    "original_text",
)
"""Tags that delimit the inputs inside a prompt (the simulator reads them back)."""

RESERVED_KEYS: tuple[str, ...] = (
    "verdicts",
    "guideline",
    "contexts",
    "categories",
    "accept",
    "fits",
    "instruction",
    "misbelief",
    "choice",
    "better",
    "rewrite",
    "carries_misbelief",
)
"""JSON fields an agent's own answer is read from (``prompts.parsers``): inserted text cannot
write them as object keys."""

# A meme's text or a quoted response must not be able to close its block and open a forged one,
# nor carry an answer a judge could echo: inside an inserted value, delimiter tags, code fences
# and reserved JSON keys are defanged before they reach the prompt (the parsers take an answer
# only from one final fenced block, so an echo of defanged text can never be read as one).
_TAG_IN_VALUE = re.compile(r"<(\s*/?\s*(?:" + "|".join(DELIMITER_TAGS) + r")\s*>)", re.IGNORECASE)
_FENCE_IN_VALUE = re.compile(r"`{3,}")
# A JSON string literal short enough to decode to a reserved key (\uXXXX escapes included).
_SHORT_LITERAL = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})){1,60}"')
_AFTER_KEY = re.compile(r"\s*:")

DEFANG_CACHE_SIZE = 2048
"""Inserted texts whose defanged form is kept (least recently used dropped)."""


def _defang_keys(text: str) -> str:
    """Reserved keys written as JSON object keys get typographic quotes (no longer JSON)."""
    chars: list[str] | None = None
    i = text.find('"')
    while i != -1:
        # Every quote is tried as an opening one: a decoder starting elsewhere may pair quotes
        # differently from a left-to-right reading. Short literals keep this linear in the text.
        m = _SHORT_LITERAL.match(text, i)
        if m and json.loads(m.group()) in RESERVED_KEYS and _AFTER_KEY.match(text, m.end()):
            chars = chars if chars is not None else list(text)
            chars[i], chars[m.end() - 1] = "\u201c", "\u201d"
        i = text.find('"', i + 1)
    return text if chars is None else "".join(chars)


class OwnWording(str):
    """Text memearena itself wrote (a re-ask's reason): inserted without the score-field
    defence, so a re-ask can show the rating format it wants; structure is still defanged."""


def defang(text: str) -> str:
    """Untrusted text made safe to insert in a prompt: it cannot close or open a delimiter block,
    hold a code fence, write a reserved JSON key (what an agent's answer is read from), or hold
    a rating (``[[``/``]]`` and rating/score labels made inert: every rating in a grader's reply
    was written by the grader, see ``prompts.scores``)."""
    if not isinstance(text, OwnWording):
        text = defang_score_fields(text)
    if "<" in text:
        text = _TAG_IN_VALUE.sub(r"‹\1", text)
    if "```" in text:
        text = _FENCE_IN_VALUE.sub(lambda m: "\u2035" * len(m.group(0)), text)
    if '"' in text:
        text = _defang_keys(text)
    return text


@lru_cache(maxsize=DEFANG_CACHE_SIZE, typed=True)  # typed: OwnWording is defanged otherwise
def _defang_text(text: str) -> str:
    return defang(text)


def _defang(value: object) -> object:
    # The same texts are inserted again and again (a meme's text in each of its prompts, a
    # category's instruction in every answer and grade, a reference in each target's grade).
    return _defang_text(value) if isinstance(value, str) else value


_EXTRA_TEMPLATES: dict[str, Path] = {}
"""Template folders of method packages, by prefix (``<prefix>/<file>.j2``)."""


def register_templates(prefix: str, folder: Path | None) -> None:
    """Load templates named ``<prefix>/...`` from ``folder`` too (a method package's own
    ``templates/``; None: no more); a name the package's ``templates/`` holds is found there
    first."""
    if folder is None:
        _EXTRA_TEMPLATES.pop(prefix, None)
    else:
        _EXTRA_TEMPLATES[prefix] = Path(folder)
    clear_template_cache()


@cache
def _env() -> Environment:
    # Templates ship with the package: loaded once, never re-checked on disk per render.
    loader: BaseLoader = PackageLoader("memearena.prompts", "templates")
    if _EXTRA_TEMPLATES:
        extra = {p: FileSystemLoader(str(f)) for p, f in _EXTRA_TEMPLATES.items()}
        loader = ChoiceLoader([loader, PrefixLoader(extra)])
    return Environment(
        loader=loader,
        undefined=StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_defang,
        auto_reload=False,
    )


@cache
def _system_message(path: str) -> Message:
    """The system message of a template: it takes no variables, so it is rendered once."""
    return Message.text("system", render(_SYSTEM_TEMPLATES.get(path, _DEFAULT_SYSTEM)))


def rendered_template_hashes() -> dict[str, str]:
    """sha256 of every template as the renderer loads it (what a prompt is made from)."""
    env = _env()
    assert env.loader is not None
    out: dict[str, str] = {}
    for name in sorted(env.list_templates()):
        source = env.loader.get_source(env, name)[0]
        out[name] = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return out


@cache
def _template(path: str) -> Template:
    # Compiled once per process: a render is then only the template's own code (no loader or
    # environment cache look-up per prompt).
    return _env().get_template(path)


@cache
def _compiled(path: str) -> CompiledTemplate | None:
    # Static text and slots, joined once; None: Jinja renders this template.
    return compile_template(_env(), path)


def clear_template_cache() -> None:
    """Forget loaded templates and rendered system prompts (after templates change on disk)."""
    _system_message.cache_clear()
    _compiled.cache_clear()
    _template.cache_clear()
    _env.cache_clear()


def template_path(template: str) -> str:
    """The template file for a role name (``arena.judge``) or a path with or without ``.j2``."""
    if template in ROLE_TEMPLATES:
        return ROLE_TEMPLATES[template]
    return template if template.endswith(".j2") else template + ".j2"


def render(template: str, **vars: object) -> str:
    """Render a template (role name or path) strictly: a missing variable raises."""
    path = template_path(template)
    compiled = _compiled(path)
    if compiled is not None:
        try:
            return compiled.render(vars).strip()
        except Exception:  # Jinja renders it, or raises its own error
            pass
    return _template(path).render(**vars).strip()


def render_jinja(template: str, **vars: object) -> str:
    """``render`` by Jinja itself, never the compiled form (the reference it is tested
    against)."""
    return _template(template_path(template)).render(**vars).strip()


def compiled_templates() -> list[str]:
    """The templates ``render`` renders from their compiled form (the others: Jinja)."""
    env = _env()
    return [name for name in sorted(env.list_templates()) if _compiled(name) is not None]


def build_messages(
    template: str, *, image: ImagePart | None = None, **vars: object
) -> list[Message]:
    """A role-appropriate system message and one user message: the image first (if any), then
    the rendered prompt."""
    path = template_path(template)
    text = TextPart(render(path, **vars))
    parts: tuple[ImagePart | TextPart, ...] = (image, text) if image is not None else (text,)
    return [_system_message(path), Message("user", parts)]


def reask_message(reason: str) -> Message:
    """The user message asking again after an output that could not be parsed."""
    return Message.text("user", render("common/reask.j2", reason=OwnWording(reason)))


def _walk(node: Traversable, prefix: str) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for child in node.iterdir():
        name = f"{prefix}{child.name}"
        if child.is_dir():
            out.extend(_walk(child, name + "/"))
        elif child.is_file() and not child.name.startswith("."):
            out.append((name, child.read_bytes()))
    return out


def template_hashes() -> dict[str, str]:
    """sha256 of every template file, keyed by its path under ``templates/`` (sorted), a
    method package's own under its prefix."""
    found = _walk(files("memearena.prompts") / "templates", "")
    for prefix, folder in sorted(_EXTRA_TEMPLATES.items()):
        if folder.is_dir():
            found += _walk(folder, prefix + "/")
    return {name: hashlib.sha256(data).hexdigest() for name, data in sorted(dict(found).items())}
