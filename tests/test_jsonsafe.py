"""Bounded JSON: every oversized, over-deep or non-finite document is one ValueError."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memearena.jsonsafe import JSONLimitError, json_depth, loads_bounded, nests_deeper_than


def test_ordinary_documents_parse_as_json_loads_does() -> None:
    doc = '{"a": [1, 2.5, "x]}", {"b": null}], "c": true}'
    assert loads_bounded(doc) == json.loads(doc)
    assert loads_bounded(doc.encode()) == json.loads(doc)


def test_depth_counts_only_brackets_outside_strings() -> None:
    assert json_depth('"[[[[["') == 0
    assert json_depth('[{"a": "]]]", "b": [[1]]}]') == 4
    assert json_depth(r'["\"[[[", [2]]') == 2


@given(
    st.text(alphabet='[]{}"\\ a,:', max_size=60),
    st.integers(min_value=0, max_value=12),
)
def test_the_bracket_count_precheck_decides_as_the_full_scan_does(text: str, limit: int) -> None:
    # Any text, well-formed or not, brackets inside strings and escapes included.
    assert nests_deeper_than(text, limit) == (json_depth(text, stop_at=limit) > limit)


def test_deep_nesting_is_refused_before_parsing() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(JSONLimitError, match="deeper than 64"):
        loads_bounded(deep)
    assert loads_bounded("[" * 64 + "]" * 64, max_depth=64) is not None
    with pytest.raises(JSONLimitError):
        loads_bounded("[" * 65 + "]" * 65, max_depth=64)


def test_size_is_bounded_in_utf8_bytes() -> None:
    with pytest.raises(JSONLimitError, match="bytes"):
        loads_bounded('"' + "x" * 200 + '"', max_bytes=100)
    # 40 characters of 3 bytes each: 120 bytes.
    with pytest.raises(JSONLimitError):
        loads_bounded('"' + "€" * 40 + '"', max_bytes=100)
    assert loads_bounded('"' + "€" * 30 + '"', max_bytes=100) == "€" * 30
    with pytest.raises(JSONLimitError):
        loads_bounded(b"[" + b"1," * 100 + b"1]", max_bytes=100)


def test_long_numbers_and_non_finite_values_are_refused() -> None:
    with pytest.raises(JSONLimitError, match="5,000 characters"):
        loads_bounded("9" * 5000)
    with pytest.raises(JSONLimitError):
        loads_bounded('{"x": 1.' + "5" * 100 + "}")
    for bad in ("NaN", "[Infinity]", '{"a": -Infinity}', "1e999"):
        with pytest.raises(JSONLimitError):
            loads_bounded(bad)
    assert loads_bounded("[NaN]", allow_nan=True)[0] != 0


def test_syntax_errors_stay_json_decode_errors_with_a_position() -> None:
    with pytest.raises(json.JSONDecodeError) as e:
        loads_bounded('{"a": 1,\n "b": }')
    assert e.value.lineno == 2
    with pytest.raises(JSONLimitError, match="not UTF-8"):
        loads_bounded(b'"\xff"')
