"""Refusal detection is conservative: only an opening refusal counts."""

from __future__ import annotations

import pytest

from memearena.models import detect_refusal, estimate_tokens
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
