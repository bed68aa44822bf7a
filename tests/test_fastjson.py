"""The JSON fast paths (durablelab/fastjson.py) give exactly what the plain code gives."""

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from durablelab import fastjson, history

SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.tuples(inner, inner)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=4), max_leaves=12)
PLAIN = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                         sort_keys=True)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_fast_encoder_is_encode(value):
    assert fastjson.fast_encoder(PLAIN)(value) == PLAIN.encode(value)


def test_fast_encoder_raises_what_encode_raises():
    fast = fastjson.fast_encoder(PLAIN)
    loop = []
    loop.append(loop)
    for bad in ([math.nan], {"a": object()}, loop):
        try:
            PLAIN.encode(bad)
        except (TypeError, ValueError) as plain:
            expected = (type(plain), str(plain))
        try:
            fast(bad)
        except (TypeError, ValueError) as got:
            assert (type(got), str(got)) == expected
        else:
            raise AssertionError(f"{bad!r} was encoded")


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_kept_then_copied_is_loads(value):
    text = history.compact(value)
    held = fastjson.kept(value, text)
    if held is not None:
        first, second = fastjson.copied(held), fastjson.copied(held)
        assert first == json.loads(text) and second == json.loads(text)
        assert type(first) is type(json.loads(text))
        if isinstance(first, (list, dict)):
            assert first is not second           # a fresh object each time, as loads gives


def test_kept_refuses_text_with_escaped_surrogates():
    value = ["\ud83d\ude00"]
    assert fastjson.kept(value, history.compact(["\ud83d"])) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(VALUES, max_size=3), st.dictionaries(st.text(max_size=4), VALUES, max_size=3))
def test_matched_args_is_the_loaded_canonical_text(args, kwargs):
    matched = fastjson.matched_args(tuple(args), kwargs)
    if matched is not None:
        assert matched == json.loads(history.canonical(tuple(args), kwargs, "t", None))


@settings(max_examples=400, deadline=None)
@given(st.lists(VALUES, max_size=3), st.dictionaries(st.text(max_size=3), VALUES, max_size=2),
       st.lists(VALUES, max_size=3), st.dictionaries(st.text(max_size=3), VALUES, max_size=2))
def test_matched_before_never_says_yes_where_digests_differ(args, kwargs, args2, kwargs2):
    recorded = json.loads(history.canonical(tuple(args), kwargs, "t", None))
    assert fastjson.matched_before(recorded, tuple(args), kwargs)
    if fastjson.matched_before(recorded, tuple(args2), kwargs2):
        assert history.canonical(tuple(args2), kwargs2, "t", None) == \
            history.canonical(tuple(args), kwargs, "t", None)


def test_one_true_and_one_point_zero_are_different_arguments():
    recorded = json.loads(history.canonical((1,), {}, "t", None))
    assert not fastjson.matched_before(recorded, (1.0,), {})
    assert not fastjson.matched_before(recorded, (True,), {})
    assert not fastjson.matched_before(None, (1,), {})
