#!/usr/bin/env python3
"""Bookkeeping for /opt/loop/submit.sh: state.jsonl, best.json, finalize.

  loop_state.py record K STATE_DIR DEV_DIR DIFF_PATH [ENGINE_RC]
  loop_state.py finalize STATE_DIR REPO SCOPE...
"""

import datetime
import hashlib
import json
import os
import subprocess
import sys


def _load(path):
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def record(k, state_dir, dev_dir, diff_path, engine_rc="0"):
    reward = _load(os.path.join(dev_dir, "reward.json"))
    broken = reward is None or str(engine_rc) == "3"
    try:
        with open(diff_path, "rb") as fh:
            diff_sha = hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        diff_sha = None
    row = {
        "k": int(k),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "harness_error": broken,
        "counted": not broken,
        "correctness_ok": bool(reward and reward.get("correctness_ok")) and not broken,
        "hard_fail_reasons": [h for h in (reward or {}).get("hard_fail_reasons", [])
                              if not h.startswith("ref_speedup_invalid")],
        "dev_speedup": (reward or {}).get("speedup"),
        "candidate_diff_sha256": diff_sha,
    }
    with open(os.path.join(state_dir, "state.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    best_path = os.path.join(state_dir, "best.json")
    best = _load(best_path)
    if row["correctness_ok"] and row["dev_speedup"] is not None:
        if best is None or float(row["dev_speedup"]) > float(best.get("dev_speedup") or 0.0):
            _write(best_path, {"k": row["k"], "dev_speedup": row["dev_speedup"],
                               "candidate_diff": diff_path,
                               "candidate_diff_sha256": diff_sha})
    return 0


def finalize(state_dir, repo, scope):
    best = _load(os.path.join(state_dir, "best.json"))
    out = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    if best is None:
        out.update({"restored_round": None, "ok": True,
                    "note": "no correctness-passing round; the working tree is left as it is"})
        _write(os.path.join(state_dir, "finalize.json"), out)
        print("finalize: no correctness-passing round, working tree unchanged")
        return 0
    diff = best["candidate_diff"]
    co = subprocess.run(["git", "-C", repo, "checkout", "--", *scope], capture_output=True, text=True)
    args = ["git", "-C", repo, "apply", "--whitespace=nowarn"]
    for s in scope:
        args.append("--include=" + s)
    args.append(diff)
    ap = subprocess.run(args, capture_output=True, text=True) if os.path.getsize(diff) else None
    ok = co.returncode == 0 and (ap is None or ap.returncode == 0)
    out.update({"restored_round": best["k"], "dev_speedup": best.get("dev_speedup"), "ok": ok,
                "error": None if ok else (co.stderr + (ap.stderr if ap else ""))[-1000:]})
    _write(os.path.join(state_dir, "finalize.json"), out)
    print("finalize: restored round %s%s" % (best["k"], "" if ok else " (FAILED, see finalize.json)"))
    return 0 if ok else 1


def main(argv):
    if len(argv) >= 6 and argv[1] == "record":
        return record(argv[2], argv[3], argv[4], argv[5], argv[6] if len(argv) > 6 else "0")
    if len(argv) >= 5 and argv[1] == "finalize":
        return finalize(argv[2], argv[3], argv[4:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
