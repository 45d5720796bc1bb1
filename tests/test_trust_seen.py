"""What the guard keeps of a call for "same answer whoever asks" (inside/pesflow_guard_seen.py)
and the probe's new values for inputs that are not arrays (inside/pesflow_probe.py): pure
functions, checked directly."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
import torch

from evaluator.trust.instrument import INSIDE


@pytest.fixture(scope="module")
def inside():
    sys.path.insert(0, str(INSIDE))
    try:
        yield importlib.import_module("pesflow_guard_seen"), importlib.import_module("pesflow_probe")
    finally:
        sys.path.remove(str(INSIDE))


def test_a_snapshot_is_a_copy_of_plain_values_and_nothing_else(inside):
    seen, _ = inside
    out = {"a": [1, 2.5, "x"], "b": np.arange(4), "c": torch.ones(3)}
    shot = seen.snapshot(out)
    out["a"].append(9)
    out["b"][0] = 7
    out["c"].zero_()
    assert shot["a"] == [1, 2.5, "x"] and shot["b"].tolist() == [0, 1, 2, 3] and shot["c"].tolist() == [1.0, 1.0, 1.0]
    assert seen.snapshot((1, "s", None)) == [1, "s", None]

    class Lazy:
        pass
    assert seen.snapshot(Lazy()) is seen.NOT_PLAIN
    assert seen.snapshot([1, (x for x in ())]) is seen.NOT_PLAIN


def test_an_output_nested_deeper_than_six_is_copied_compared_and_fingerprinted(inside):
    """Issue 51: the copy gave up past 6 levels (a package's outputs nest deeper) and such an answer
    went uncompared; the fingerprint stopped at 4, so a change down there went unseen. Only a
    container that holds itself, or a copy past the probe's count of containers, is not plain."""
    seen, _ = inside
    values = importlib.import_module("pesflow_probe_values")
    deep = {"leaf": np.arange(3)}
    for i in range(20):
        deep = {"level": i, "rest": [deep, (i, "x")]}
    shot = seen.snapshot(deep)
    assert shot is not seen.NOT_PLAIN
    leaf, before = shot, seen.fingerprint(deep)
    for _ in range(20):
        leaf = leaf["rest"][0]
    assert leaf["leaf"].tolist() == [0, 1, 2]
    assert values.close(values.plain(deep), values.plain(deep)) and values.numeric({"a": [[[[[[[[1.0]]]]]]]]})
    inner = deep
    for _ in range(19):
        inner = inner["rest"][0]
    inner["rest"][1] = (0, "y")  # 20 levels down
    assert seen.fingerprint(deep) != before
    loop: list = []
    loop.append(loop)
    assert seen.snapshot(loop) is seen.NOT_PLAIN and not values.numeric(loop)
    with pytest.raises(TypeError):
        values.plain(loop)
    shared = [1]
    for _ in range(30):  # 2**30 paths through 31 lists: bounded by the count of containers, never walked whole
        shared = [shared, shared]
    assert seen.snapshot(shared) is seen.NOT_PLAIN


@pytest.mark.parametrize("change", ["array_refilled", "tensor_refilled", "list_appended", "item_replaced", "dict_value"])
def test_the_inputs_fingerprint_moves_when_a_harness_refills_them(inside, change):
    seen, _ = inside
    big = np.arange(100_000, dtype=np.float64)
    args = ([big, torch.zeros(8)], {"keys": ["a", "b"], "n": 3})
    before = seen.fingerprint(args)
    assert seen.fingerprint(args) == before  # read twice, unchanged
    if change == "array_refilled":
        np.copyto(big, np.random.default_rng(0).random(big.size))
    elif change == "tensor_refilled":
        args[0][1].copy_(torch.ones(8))
    elif change == "list_appended":
        args[1]["keys"].append("c")
    elif change == "item_replaced":
        args[1]["keys"][0] = "z"
    else:
        args[1]["n"] = 4
    assert seen.fingerprint(args) != before


def test_lists_of_scalars_get_new_values_and_are_rewritten_in_place(inside):
    _, probe = inside
    args = ([3, 1, 4, 1, 5, 9, 2, 6], ("a", "b", "c"), [(1, "x"), (2, "y"), (3, "z")])
    new = probe.rolled(args)
    assert sorted(new[0]) == sorted(args[0]) and new[0] != args[0]  # the same items, reordered
    assert new[1] == args[1]  # a tuple cannot be rewritten in place: left as it is
    assert sorted(new[2]) == sorted(args[2]) and new[2] != args[2]
    assert probe.rolled(args, 1)[0] != new[0] and len(probe.shifts(args, 5)) >= 2
    target = ([0] * 8, ("a", "b", "c"), [(0, "")] * 3)
    keep = target[0]
    assert probe.overwrite(target, new) and target[0] is keep and target[0] == new[0]
    assert not probe.overwrite(([0] * 7, (), [(0, "")] * 3), new)  # another length: no rewrite


def test_values_are_compared_whatever_their_kind(inside):
    _, probe = inside
    assert probe.close(["k1", {"a": 1}], ["k1", {"a": 1}]) and not probe.close(["k1"], ["k2"])
    assert probe.close([[1.0, 2, 3]], [[1.0 + 1e-9, 2, 3]], loose=True) and not probe.close([[1.0, 2, 3]], [[1.5, 2, 3]], loose=True)
    assert not probe.close([], [[1.0, 1, 2]], loose=True)
