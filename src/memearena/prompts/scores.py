"""A grader's score as real graders write it, and the input-side defence that keeps it theirs.

What real graders write: a ``[[n]]`` anywhere in their own text ("I would rate it a [[9]]",
``Rating: [[5]]``), or a rating line (``Rating: 5``, ``**Rating:** 5/10``, ``Score = 7``,
``Final score: 6.5``); one decimal at most. A strict ``Rating: [[n]]``-only reading refused 37%
of AdamMeme's published GPT-4o scores (they write ``Rating: 5``): a refusal is lost data or a
paid re-ask.

Threat: text the grader was shown (a meme, an answer, a reference, a misbelief) that carries a
rating, echoed or quoted by the grader, must never become the score. The defence is on the
input side: every untrusted text is rendered through ``defang_score_fields`` (``prompts.render``
does it for every inserted value), which makes ``[[``/``]]`` and rating/score labels inert, so a
rating left in a reply was written by the grader itself. Inert under normalisation too: a
grader that echoes text NFKC-normalised or without its invisible format characters must not
bring a rating back, so those characters are dropped, a text that would spell a rating once
normalised is inserted normalised, and the label itself is broken by a middle dot (``Rat·ing``:
no normalisation joins it again), not only its punctuation (a fullwidth colon folds back to
``:``). Then every rating in the reply is
collected: none, several distinct ones, one with more than one decimal or one out of range is a
ParseError (the caller re-asks, then records the output as unparsed) — never a guess from a
stray digit.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from memearena.errors import ParseError

__all__ = [
    "ABSTAIN",
    "Score",
    "defang_score_fields",
    "first_rating_at",
    "parse_score",
    "parse_score_at",
    "quoted_in",
    "ratings_in",
]

ABSTAIN = "N/A"
"""What an abstaining grader writes (``Rating: [[N/A]]``)."""

_DECOR = r"[ \t*_]*"
# Markdown around a label or a value (bold, italics); one set shared by the parser and the
# defence, so the defence covers every label the parser reads.
_LINE_START = r"^[ \t>#*_-]*"
_LABEL = r"(?:(?:final|overall|total|my)[ \t]+)?(?:rating|score)"
_NUMBER = r"[0-9]{1,3}(?:\.[0-9]+)?"
_VALUE = (
    rf"(?P<num>{_NUMBER}|n/a)"
    r"(?:[ \t]*(?:/|out[ \t]+of)[ \t]*(?P<den>[0-9]{1,3}(?:\.0)?))?"
)
# ASCII only: Unicode case folding would let "ſcore" (long s) or a fullwidth digit be read.
_BRACKET_FIELD = re.compile(r"\[\[[ \t]*(?P<inner>[^\[\]\n]{0,24}?)[ \t]*\]\]", re.ASCII)
_LINE_FIELD = re.compile(
    rf"{_LINE_START}{_LABEL}{_DECOR}[:=]{_DECOR}(?P<rest>[^\n]*?)[ \t]*$",
    re.IGNORECASE | re.MULTILINE | re.ASCII,
)
_LOOK_BACK = 48
_LABEL_BEFORE = re.compile(rf"{_LABEL}{_DECOR}[:=]?{_DECOR}\Z", re.IGNORECASE | re.ASCII)
_VALUE_ONLY = re.compile(rf"{_DECOR}{_VALUE}{_DECOR}\.?{_DECOR}", re.IGNORECASE | re.ASCII)

# The defence matches more than the parser reads: any case (Unicode folding included), any
# word before the label, a label anywhere in a line.
_LABEL_SEP = re.compile(rf"(rating|score)({_DECOR})([:=])", re.IGNORECASE)
_INERT_SEP = {":": "\uff1a", "=": "\uff1d"}  # fullwidth colon / equals: read, never parsed
_BREAK = "\u00b7"
"""Put inside a label (``Rat·ing``, ``Sco·re``): visible, not a format character, unchanged by
NFKC, so no normalisation of an echoed text makes the label whole again."""
_ADJACENT = re.compile(r"(?<=\[)(?=\[)|(?<=\])(?=\])")
# Invisible characters a grader may drop when it echoes a text: every format character (Cf:
# zero-width, joiners, bidi controls, soft hyphen, BOM, tags) and the other default-ignorable
# ones (combining grapheme joiner, Hangul fillers, variation selectors). Dropped from untrusted
# text first, so what the defence sees is what such a grader writes.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


@dataclass(frozen=True)
class Score:
    """A parsed score: ``value`` is None when the grader abstained."""

    value: float | None
    """An int when the grader wrote a whole number, a float with one decimal otherwise."""

    @property
    def abstained(self) -> bool:
        """The grader wrote N/A instead of a number."""
        return self.value is None


class _Rating(NamedTuple):
    at: int
    raw: str
    num: str
    den: str | None
    end: int


def ratings_in(text: str) -> list[tuple[int, str]]:
    """Every rating written in ``text``, in order: ``(offset, what was written)`` (a
    ``[[...]]`` holding a number or N/A, or a rating line's value)."""
    return [(r.at, r.raw) for r in _ratings(text)]


def _ratings(text: str) -> list[_Rating]:
    found: list[_Rating] = []
    # One byte per character (non-ASCII ones become "?"), so offsets are the text's; the
    # labels are ASCII, and str.find is far cheaper than a case-insensitive regex scan.
    low = text.encode("ascii", "replace").lower()
    if "[[" in text:
        for m in _BRACKET_FIELD.finditer(text):
            v = _VALUE_ONLY.fullmatch(m.group("inner"))
            if v is not None:  # "[[rating]]" (a copied placeholder) is no rating
                # A label stands just before the brackets ("Rating: [[5]]"): a bounded look-back
                # keeps a long line of brackets linear.
                start = m.start()
                line = text.rfind("\n", max(0, start - _LOOK_BACK), start) + 1
                line = max(line, start - _LOOK_BACK)
                at = start
                # The label regex can match only where its word stands (a cheap find first).
                if low.find(b"rating", line, start) != -1 or low.find(b"score", line, start) != -1:
                    label = _LABEL_BEFORE.search(text, line, start)
                    if label is not None:
                        at = label.start()
                found.append(_Rating(at, m.group(0), v.group("num"), v.group("den"), m.end()))
    for line in _label_lines(text, low):  # only a line holding a label can be a rating line
        lm = _LINE_FIELD.match(text, line)
        if lm is None:
            continue
        rest = lm.group("rest")
        if "[[" in rest:
            continue  # "Rating: [[5]]": read above, once
        v = _VALUE_ONLY.fullmatch(rest)
        if v is not None:  # "Score: the answer misses ..." is prose, not a rating
            found.append(
                _Rating(lm.start(), rest.strip(), v.group("num"), v.group("den"), lm.end())
            )
    if len(found) > 1:
        found.sort(key=_at)
    return found


def _at(r: _Rating) -> int:
    return r.at


def _label_lines(text: str, low: bytes) -> list[int]:
    """Start offsets of the lines holding "rating" or "score" (any ASCII case), in order, in
    one pass over ``low`` (``text`` ASCII-encoded with replacements, lowered)."""
    hits: list[int] = []
    for word in (b"rating", b"score"):
        i = low.find(word)
        while i != -1:
            hits.append(i)
            i = low.find(word, i + len(word))
    if not hits:
        return hits
    if len(hits) > 1:
        hits.sort()
    starts: list[int] = []
    prev = 0
    for i in hits:
        nl = text.rfind("\n", prev, i)  # only the text since the previous hit: linear
        start = nl + 1 if nl != -1 else (starts[-1] if starts else 0)
        if not starts or start != starts[-1]:
            starts.append(start)
        prev = i
    return starts


def first_rating_at(text: str) -> int | None:
    """Offset of the first rating in ``text`` (where a grader's feedback ends), or None."""
    found = _ratings(text)
    return found[0].at if found else None


def _number(r: _Rating, lo: int, hi: int) -> float:
    if r.den is not None and float(r.den) != hi:
        raise ParseError(f"rating {r.raw[:20]!r} is not on the {lo}-{hi} scale")
    whole, _, frac = r.num.partition(".")
    if len(frac) > 1:
        raise ParseError(f"rating {r.raw[:20]!r} has more than one decimal")
    value = float(r.num)
    if not lo <= value <= hi:
        raise ParseError(f"score {r.num} is out of range {lo}-{hi}")
    return value if frac else int(whole)


def parse_score(
    text: str,
    *,
    lo: int = 1,
    hi: int = 10,
    allow_na: bool = False,
    shown: Sequence[str] = (),
) -> Score:
    """The grader's score: every rating in ``text`` (see module doc) must give the same number
    in ``[lo, hi]`` (or N/A when ``allow_na``); otherwise ParseError with a short reason.

    ``shown``: the untrusted texts the grader was shown (as given to the template). A rating
    that, normalised, is a quote of one of them (a grader that re-typed a defanged rating) is
    not the grader's: it is left out, and a reply whose only ratings are such quotes is a
    ParseError."""
    return _score(_own(text, _ratings(text), shown), lo, hi, allow_na)


def parse_score_at(
    text: str,
    *,
    lo: int = 1,
    hi: int = 10,
    allow_na: bool = False,
    shown: Sequence[str] = (),
) -> tuple[Score, int]:
    """``parse_score`` and ``first_rating_at`` from one scan of ``text``: the grader's score and
    the offset of its first rating (where its feedback ends)."""
    found = _own(text, _ratings(text), shown)
    return _score(found, lo, hi, allow_na), found[0].at


_CANON_DROP = str.maketrans({_BREAK: None, "\u201c": '"', "\u201d": '"'})
_CANON_SPACE = re.compile(r"\s+")


def _canon(text: str) -> str:
    """``text`` as any normalising echo of it compares: format characters dropped, NFKC,
    the defence's marks undone (label breaks, spaced brackets), case and spacing folded."""
    text = unicodedata.normalize("NFKC", _IGNORABLE.sub("", text)).translate(_CANON_DROP)
    text = text.replace("[ [", "[[").replace("] ]", "]]")
    return _CANON_SPACE.sub(" ", text).casefold().strip(" \t*_>#-")


CANON_MEMO_SIZE = 1024
"""Shown texts whose normalised form is kept (least recently used dropped): the same texts are
shown to every grader of an item (a response to each judge, a reference to each scorer)."""
_CANON_MEMO_MAX_CHARS = 16_384
# A longer text is normalised afresh each time: the memo holds at most ~16 MB of text.


@lru_cache(maxsize=CANON_MEMO_SIZE)
def _canon_kept(text: str) -> str:
    return _canon(text)


def _canon_source(text: str) -> str:
    """``_canon`` of a shown text (a pure function of it: memoised for texts up to a bound)."""
    return _canon_kept(text) if len(text) <= _CANON_MEMO_MAX_CHARS else _canon(text)


def quoted_in(fragment: str, shown: Sequence[str]) -> bool:
    """Whether ``fragment`` of a reply is, once normalised as an echo would be (format
    characters dropped, NFKC, case and spacing folded), a quote of one of the ``shown`` texts:
    a score field re-typed from the material is not the grader's."""
    quote = _canon(fragment)
    return bool(quote) and any(quote in _canon_source(src) for src in shown if src)


def _own(text: str, found: list[_Rating], shown: Sequence[str]) -> list[_Rating]:
    """The ratings of ``found`` that are not a (normalised) quote of a text in ``shown``."""
    if not found or not shown:
        return found
    sources = [_canon_source(s) for s in shown if s]
    own = []
    for r in found:
        quote = _canon(text[r.at : r.end])
        if not (quote and any(quote in src for src in sources)):
            own.append(r)
    if not own:
        raise ParseError(
            "the only rating is quoted from the material shown; "
            "end with your own rating on its own line: 'Rating: [[n]]'"
        )
    return own


def _score(found: list[_Rating], lo: int, hi: int, allow_na: bool) -> Score:
    if not found:
        raise ParseError("no rating; end with your rating on its own line: 'Rating: [[n]]'")
    if len(found) == 1:  # the usual reply: one rating, nothing to compare it with
        r = found[0]
        if r.num.upper() == ABSTAIN:
            if not allow_na:
                raise ParseError(f"N/A is not allowed; give a number from {lo} to {hi}")
            return Score(None)
        return Score(_number(r, lo, hi))
    values: list[float | None] = []
    for r in found:
        if r.num.upper() == ABSTAIN:
            values.append(None)
        else:
            values.append(_number(r, lo, hi))
    distinct = sorted({("N/A" if v is None else f"{v:g}") for v in values})
    if len(distinct) > 1:
        raise ParseError(f"several different ratings {distinct[:4]}; give exactly one")
    if values[0] is None:
        if not allow_na:
            raise ParseError(f"N/A is not allowed; give a number from {lo} to {hi}")
        return Score(None)
    return Score(values[-1])


def _spells_a_field(text: str) -> bool:
    """Whether ``text`` holds a rating label with its separator or adjacent brackets."""
    return "[[" in text or "]]" in text or _LABEL_SEP.search(text) is not None


def _inert_label(m: re.Match[str]) -> str:
    label = m.group(1)
    return label[:3] + _BREAK + label[3:] + m.group(2) + _INERT_SEP[m.group(3)]


def defang_score_fields(text: str) -> str:
    """Untrusted text made unable to hold a rating, as written and as a normalising grader
    would echo it (NFKC, format characters dropped): invisible format characters are dropped;
    a text that spells a rating field only once NFKC-normalised (fullwidth letters, brackets or
    colons, a no-break space) is taken normalised; then adjacent ``[[``/``]]`` get a space
    between them and a rating/score label is broken by a middle dot, its ``:``/``=`` made
    fullwidth (``Rat·ing： 10``: still readable). Idempotent."""
    if not text.isascii():
        text = _IGNORABLE.sub("", text)
        folded = unicodedata.normalize("NFKC", text)
        if folded != text and _spells_a_field(folded):
            text = _IGNORABLE.sub("", folded)
    low = text.lower()
    if "rating" in low or "score" in low or not text.isascii():
        text = _LABEL_SEP.sub(_inert_label, text)
    if "[[" in text or "]]" in text:
        text = _ADJACENT.sub(" ", text)
    return text
