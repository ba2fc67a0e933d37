"""Refusal detection is conservative: only an opening refusal counts."""

from __future__ import annotations

import pytest

from memearena.models import detect_refusal, estimate_tokens
from memearena.models.refusal import _REFUSAL_START
from memearena.models.types import ImagePart, Message, TextPart


@pytest.mark.parametrize(
    "text",
    [
        "I'm sorry, but I can't help with that.",
        "I’m sorry, but I cannot assist with this request.",
        "I can't help with that.",
        "I cannot assist with requests like this.",
        "Sorry, I can't do that.",
        "I apologize, but I can't analyze this image.",
        "I'm unable to help with this meme.",
        "I must decline to interpret this content.",
        "As an AI language model, I cannot discuss this.",
    ],
)
def test_common_refusal_openings_are_refusals(text):
    assert detect_refusal(text, "stop", None)


@pytest.mark.parametrize(
    "text",
    [
        "[Background Knowledge] The caption says \"I'm sorry, but I can't\" ironically.",
        "The meme targets a fictional group; it is harmful because...",
        "I can help with that. The meme implies...",
        "",
    ],
)
def test_answers_are_not_refusals(text):
    assert not detect_refusal(text, "stop", None)


def test_content_filter_and_refusal_field_are_refusals():
    assert detect_refusal("partial", "content_filter", None)
    assert detect_refusal("", "stop", "I can't assist with that.")


def test_token_estimate_counts_chars_and_images():
    msgs = [
        Message("system", (TextPart("abcde"),)),
        Message("user", (TextPart("xyz"), ImagePart("data:,", "h"))),
    ]
    assert estimate_tokens(msgs) == 2 + 85


def _unfiltered(text: str) -> bool:
    # detect_refusal without its cheap first-letter pre-check.
    return _REFUSAL_START.match(" ".join(text[:200].replace("\u2019", "'").split())) is not None


def test_the_first_letter_precheck_never_changes_the_verdict():
    openings = [
        "I'm sorry, but I can't help.",
        "i cannot assist with that",
        "Sorry, I won't do that.",
        "We must decline.",
        "As an AI, I can't answer.",
        "\u0130 cannot assist with that",  # dotted capital I folds to i
        "\u017forry, i can't help",  # long s folds to s
        "The meme says I'm sorry, but I can't.",
        "Answer: I can't help with that.",
        "Analysis follows.",
        "42 is the answer",
        "_I can't help with that",
    ]
    prefixes = ["", " ", "\n\n", '"', "** ", "-- ", "\u2019", "...", " \t ( ", "\u00a0"]
    for o in openings:
        for pre in prefixes:
            text = pre + o
            assert detect_refusal(text, "stop", None) == _unfiltered(text), repr(text)
    assert not detect_refusal("?!", "stop", None) and not _unfiltered("?!")
