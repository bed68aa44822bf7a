"""A dict key JSON would turn into a string (1 -> "1") is refused where the value enters
history, with the key, its type and where it is: otherwise the workflow reads "1" after
replay and a KeyError blames its code.

`errors.check_json_keys` is the check; `dl.sweep` calls it on every input (the engine's
`start()` is to call it too)."""

import pytest

import durablelab as dl
from durablelab.errors import SerializationError, check_json_keys


@pytest.mark.parametrize("value, key, path, becomes", [
    ({1: "a"}, "1", "input", "'1'"),
    ({"items": [{"sku": 1}, {2.5: "x"}]}, "2.5", "input['items'][1]", "'2.5'"),
    ({"flags": {True: 1}}, "True", "input['flags']", "'true'"),
    ([{"ok": 1}, ({None: 0},)], "None", "input[1][0]", "'null'"),
])
def test_a_non_string_key_is_refused_naming_it_and_where(value, key, path, becomes):
    with pytest.raises(SerializationError) as caught:
        check_json_keys(value, "the workflow input", "Engine.start(checkout)")
    message = str(caught.value)
    assert message.startswith(f"the workflow input has a dict key {key} (of type ")
    assert f" in {path}, at Engine.start(checkout)." in message
    assert f"would read the key {becomes} instead" in message
    assert caught.value.what == "the workflow input"
    assert caught.value.where == "Engine.start(checkout)"
    assert isinstance(caught.value, TypeError)


def test_string_keys_and_plain_values_pass():
    check_json_keys({"a": [1, 2, {"b": None}], "c": (1, "2")}, "the workflow input", "here")
    check_json_keys([1, "x", None, 2.5], "the workflow input", "here")


def _echo(n):
    return n


def _takes(ctx, order):
    return ctx.activity("echo", _echo, order["qty"][1])


def test_sweep_refuses_an_input_with_an_int_key_before_any_run():
    with pytest.raises(SerializationError, match=r"input 1 has a dict key 1 \(of type int\) in "
                                                 r"inputs\[1\]\['qty'\], at dl.sweep"):
        dl.sweep(_takes, [{"qty": {"1": 5}}, {"qty": {1: 5}}], seeds=range(1))
