#!/usr/bin/env python3
"""Prints the solver-facing feedback of one dev scoring.

Shows: submission k/max, correctness pass/fail (failed gate names and short
error text), dev_speedup (and per-workload figures). Never the anchor, the
ref_speedup or a reward.
"""

import json
import sys

HIDDEN_KEYS = ("reward", "ref_speedup", "ref_speedup_source", "score")


def main() -> int:
    verdict_path, k, max_k = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        v = json.load(open(verdict_path))
    except Exception as exc:  # noqa: BLE001
        print(f"submission {k}/{max_k}: no verdict ({type(exc).__name__})")
        return 0
    for key in HIDDEN_KEYS:
        v.pop(key, None)
    hard = [h for h in v.get("hard_fail_reasons", []) if not h.startswith("ref_speedup")]
    tests = v.get("tests", {})
    print(f"submission {k}/{max_k}")
    if v.get("correctness_ok"):
        print(f"correctness: PASS ({tests.get('passed', '?')}/{tests.get('total', '?')} dev cases)")
    else:
        print(f"correctness: FAIL ({tests.get('passed', '?')}/{tests.get('total', '?')} dev cases)")
    if hard:
        print("failed gates: " + ", ".join(hard))
    for err in v.get("errors", [])[:5]:
        print("  - " + str(err)[:300])
    sp = v.get("speedup")
    if sp is None:
        print("dev_speedup: n/a (not timed)")
    else:
        print(f"dev_speedup: {sp:.3f}x  (ABBA median per workload, geometric mean)")
        for w in (v.get("timing") or {}).get("workloads", []):
            print(f"  {w['name']:<28} baseline {w['baseline_ms']:9.2f} ms  candidate "
                  f"{w['candidate_ms']:9.3f} ms  x{w['speedup']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
