"""Print the in-session feedback for one submission.

Usage: sanitize_feedback.py REWARD_JSON K MAX
Shows the submission number, correctness verdict (failed gate names plus
short error text) and the dev speedup. Never prints an anchor or a reward.
"""

import json
import sys

HIDE = ("ref", "anchor", "reward")


def clip(text, limit=240):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main():
    path, k, kmax = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        r = json.load(open(path))
    except (OSError, ValueError) as exc:
        print("submission %s/%s: no verdict (%s)" % (k, kmax, exc))
        return 1
    hard = [h for h in r.get("hard_fail_reasons", []) if not any(w in h.lower() for w in HIDE)]
    print("submission %s/%s" % (k, kmax))
    tests = r.get("tests", {})
    ok = bool(r.get("correctness_ok")) and not any(
        h.split(":")[0] in ("patch_apply_failed", "head_moved", "out_of_scope_edit",
                            "forbidden_pattern", "import_failed", "error_contract_failed",
                            "correctness_failed") for h in hard)
    print("correctness: %s (%s/%s checks passed)" % ("pass" if ok else "FAIL",
                                                      tests.get("passed"), tests.get("total")))
    if hard:
        print("failed gates: " + ", ".join(hard))
    for note in r.get("notes", [])[:4]:
        if not any(w in note.lower() for w in HIDE):
            print("  note: " + clip(note))
    # Short text of the first failing checks (dev workloads only).
    try:
        cres = json.load(open(path.replace("reward.json", "correctness_results.json")))
        shown = 0
        for rec in cres.get("cases", []):
            if not rec.get("passed") and shown < 4:
                print("  %s: %s" % (rec.get("name"), clip(rec.get("error", ""))))
                shown += 1
    except (OSError, ValueError):
        pass
    sp = r.get("speedup")
    print("dev_speedup: %s" % ("%.2fx" % sp if isinstance(sp, (int, float)) else "n/a"))
    cv = r.get("cv")
    if isinstance(cv, (int, float)):
        print("dev_timing_cv: %.3f" % cv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
