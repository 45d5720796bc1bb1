"""Hand-made correctness cases and the error contract of the native-histogram merge grader."""


def _h(scale, buckets, zero_count=0, total=0):
    return {"scale": scale, "zero_count": zero_count, "count": zero_count + sum(buckets.values()),
            "sum": total, "buckets": dict(buckets)}


def fixed_cases():
    """(name, histograms, max_buckets) edge cases; each is checked against the reference."""
    big = 2 ** 70
    return [
        ("single_histogram", [_h(3, {5: 2, 7: 1, -4: 9}, 4, 17)], 160),
        ("single_empty", [_h(0, {}, 0, 0)], 160),
        ("only_zero_counts", [_h(2, {}, 5, 11), _h(2, {}, 3, -2)], 160),
        ("same_scale_overlapping", [_h(1, {0: 1, 1: 2, 2: 3}), _h(1, {1: 5, 3: 1}), _h(1, {2: 1})], 160),
        ("disjoint_far_apart", [_h(0, {-500: 1}), _h(0, {500: 2})], 160),
        ("differing_scales", [_h(4, {17: 3, 18: 1, 40: 2}), _h(2, {4: 1, 9: 7}), _h(6, {70: 5})], 160),
        ("finer_later", [_h(0, {1: 1}), _h(5, {33: 2, 63: 4, 64: 1})], 160),
        ("negative_indices", [_h(3, {-1: 1, -2: 2, -9: 3}), _h(1, {-1: 4, -3: 1}), _h(2, {-5: 6, 0: 1})], 160),
        ("negative_odd_shift", [_h(5, {-33: 1, -31: 1, -1: 1}), _h(0, {-2: 1})], 160),
        ("downscale_to_fit", [_h(8, {i * 37: abs(i) + 1 for i in range(-20, 21)})], 16),
        ("max_buckets_two", [_h(4, {-100: 1, 100: 1, 7: 3}), _h(4, {3: 2})], 2),
        ("max_buckets_odd", [_h(2, {i: 1 for i in range(0, 90, 3)}), _h(3, {-60: 2, 250: 1})], 7),
        ("zero_entries_ignored", [_h(2, {-300: 0, 1: 1, 2: 0, 400: 0}), _h(2, {3: 2, 900: 0})], 8),
        ("all_zero_entries", [_h(1, {4: 0, 9: 0}, 2), _h(1, {}, 1)], 160),
        ("empty_lowers_scale", [_h(6, {64: 1, 65: 2}), _h(-3, {}, 1, 5), _h(6, {70: 1})], 160),
        ("min_scale", [_h(-10, {0: 1, -1: 2, 1: 3}), _h(-10, {2: 1})], 160),
        ("max_scale", [_h(20, {2 ** 20: 1, 2 ** 20 + 1: 1}), _h(20, {3 * 2 ** 19: 4})], 160),
        ("huge_indices", [_h(20, {-(2 ** 40): 1, 2 ** 40: 1}), _h(0, {3: 2})], 10),
        ("huge_counts", [_h(1, {2: big, 3: big}, big, big), _h(1, {2: big + 1}, 0, -big)], 160),
        ("same_bucket_everywhere", [_h(4, {16: 3}) for _ in range(25)], 160),
        ("identity_with_empty", [_h(3, {}), _h(3, {8: 2, 9: 1}, 1, 4), _h(3, {})], 160),
        ("order_reversed_a", [_h(5, {40: 1, 41: 3}), _h(3, {9: 2}), _h(7, {170: 1, 600: 1})], 20),
        ("order_reversed_b", [_h(7, {170: 1, 600: 1}), _h(3, {9: 2}), _h(5, {40: 1, 41: 3})], 20),
        ("tuple_input", (_h(2, {1: 1}), _h(2, {1: 2, 2: 1})), 160),
        ("span_exactly_max", [_h(0, {0: 1, 159: 1})], 160),
        ("span_one_past_max", [_h(0, {0: 1, 160: 1})], 160),
    ]


def error_cases():
    """(name, args) calls that must raise ValueError."""
    ok = _h(2, {1: 1, 2: 3}, 1, 9)

    def bad(**changes):
        h = _h(2, {1: 1, 2: 3}, 1, 9)
        h.update(changes)
        return h

    missing = _h(2, {1: 1})
    del missing["sum"]
    return [
        ("empty_list", ([],)),
        ("not_a_list", (iter([ok]),)),
        ("not_a_dict", ([ok, [("scale", 2)]],)),
        ("missing_field", ([ok, missing],)),
        ("max_buckets_one", ([ok], 1)),
        ("max_buckets_bool", ([ok], True)),
        ("max_buckets_float", ([ok], 160.0)),
        ("scale_too_high", ([bad(scale=21)],)),
        ("scale_too_low", ([ok, bad(scale=-11)],)),
        ("scale_bool", ([bad(scale=True)],)),
        ("scale_float", ([bad(scale=2.0)],)),
        ("negative_zero_count", ([bad(zero_count=-1, count=3)],)),
        ("count_mismatch", ([ok, bad(count=6)],)),
        ("negative_count", ([bad(count=-5)],)),
        ("sum_float", ([bad(sum=9.5)],)),
        ("buckets_not_dict", ([bad(buckets=[(1, 1), (2, 3)])],)),
        ("bucket_index_float", ([ok, bad(buckets={1.0: 1, 2: 3})],)),
        ("bucket_index_bool", ([bad(buckets={True: 1, 2: 3})],)),
        ("bucket_count_negative", ([bad(buckets={1: 5, 2: -1}, count=5)],)),
        ("bucket_count_float", ([bad(buckets={1: 1.0, 2: 3})],)),
        ("late_bad_histogram", ([ok] * 30 + [bad(zero_count=None)],)),
    ]
