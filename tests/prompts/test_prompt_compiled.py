"""The compiled form of a template renders exactly Jinja's bytes, or leaves it to Jinja."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2 import UndefinedError, meta

from memearena.prompts.render import (
    OwnWording,
    clear_template_cache,
    compiled_templates,
    render,
    render_jinja,
)

# Text an attacker or a model might insert: delimiter tags, fences, reserved keys, ratings,
# whitespace the templates' trimming must not touch, and non-ASCII.
PIECES = [
    *"ab Z\n\t\"'{}[]:`<>/-|é\u2028",
    "</meme_text>",
    "<answer>",
    "```",
    '"verdicts": ',
    '"score":',
    "[[7]]",
    "Rating: 3",
]
HOSTILE = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)
SCALAR = st.one_of(HOSTILE, st.none(), st.integers(-3, 12), st.booleans(), st.floats(0, 10))
SHAPES: dict[str, st.SearchStrategy[Any]] = {
    "taxonomy": st.lists(st.tuples(HOSTILE, HOSTILE), max_size=4),
    "examples": st.lists(
        st.fixed_dictionaries(
            {
                "text": HOSTILE,
                "misbelief": HOSTILE,
                "score": SCALAR,
                "kind": HOSTILE,
                "image": st.one_of(st.none(), st.integers(1, 4)),
            }
        ),
        max_size=3,
    ),
    "candidates": st.lists(HOSTILE, max_size=4),
    "rejected": st.lists(HOSTILE, max_size=3),
}
"""The variables the templates loop over, in the shapes the stages pass them."""


def _names(template: str) -> set[str]:
    """Every variable a template (and what it includes) reads."""
    from memearena.prompts.render import _env

    env = _env()
    assert env.loader is not None
    ast = env.parse(env.loader.get_source(env, template)[0])
    names = set(meta.find_undeclared_variables(ast))
    for inc in meta.find_referenced_templates(ast):
        assert inc is not None
        names |= _names(inc)
    return names


COMPILED = compiled_templates()


def test_every_template_without_jinja_only_constructs_is_compiled() -> None:
    adapt = [t for t in COMPILED if t.startswith("adapt/")]
    assert len(adapt) == 13  # every Adapt prompt
    assert "judge_audit/score_plain.j2" in COMPILED
    # Set, slices, item look-ups and conditional expressions stay Jinja's.
    assert "arena/context.j2" not in COMPILED
    assert "arena/judge_pairwise.j2" not in COMPILED


@pytest.mark.parametrize("template", COMPILED)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compiled_template_renders_jinjas_bytes(template: str, data: st.DataObject) -> None:
    values = {n: data.draw(SHAPES.get(n, SCALAR), label=n) for n in sorted(_names(template))}
    assert render(template, **values) == render_jinja(template, **values)


@pytest.mark.parametrize("template", ["adapt/refiner.j2", "adapt/reference_judge.j2"])
def test_a_missing_variable_raises_jinjas_error(template: str) -> None:
    with pytest.raises(UndefinedError):
        render(template, meme_text="x")


def test_a_value_of_another_shape_is_jinjas_to_render() -> None:
    # A dict item with an attribute of that name (Jinja's getattr: the attribute first).
    odd = {"meme_text": "m", "name": "n", "description": "d", "taxonomy": [("a", "b"), "cd"]}
    assert render("adapt/miner.j2", **odd) == render_jinja("adapt/miner.j2", **odd)
    bad = {**odd, "taxonomy": [("a", "b", "c")]}
    with pytest.raises(ValueError):
        render_jinja("adapt/miner.j2", **bad)
    with pytest.raises(ValueError):
        render("adapt/miner.j2", **bad)


def test_own_wording_keeps_its_rating_format() -> None:
    text = render("common/reask.j2", reason=OwnWording("end with Rating: [[n]]"))
    assert "Rating: [[n]]" in text
    assert text == render_jinja("common/reask.j2", reason=OwnWording("end with Rating: [[n]]"))
    # The same words from untrusted text are made inert.
    assert "[[n]]" not in render("common/reask.j2", reason="end with Rating: [[n]]")


def test_cleared_cache_compiles_again() -> None:
    before = render("adapt/answer.j2", meme_text="m", instruction="i")
    clear_template_cache()
    assert render("adapt/answer.j2", meme_text="m", instruction="i") == before
