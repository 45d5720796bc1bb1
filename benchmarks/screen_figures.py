"""Does the trust screen change the figure it screens? Each package's reference graded with the
screen off and on, in turn (off, on, off, ...), under each grader, on one machine, side by side.

The official grading never has the screen in it (evaluator/trust/watch.py), so a counted figure
must be the screen-off figure exactly, unless the grader itself differs between two screen-off
gradings (then within that spread); a timed one within the grader's own spread. Every row:
the figures in the order graded, the spread of the screen-off ones, the ratio of the medians,
and whether the screen-on gradings were suspect or need review.

    python3 benchmarks/screen_figures.py --tasks-root <benchmark>/tasks --task T ... \
        [--grader dev|hidden|both] [--repeats 2] [--cache DIR] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evaluator.config import EvaluatorConfig, LocalConfig, TrustConfig  # noqa: E402
from evaluator.evaluation import Evaluator  # noqa: E402
from evaluator.verdict import judged_figure  # noqa: E402
from evaluator.trust import watch  # noqa: E402


def summary(task: str, grader: str, kind: str, rows: list[dict]) -> dict:
    off = [r["figure"] for r in rows if r["screen"] == "off" and r["figure"] is not None]
    on = [r["figure"] for r in rows if r["screen"] == "on" and r["figure"] is not None]
    out = {"task": task, "grader": grader, "kind": kind, "off": off, "on": on,
           "statuses": sorted({f"{r['screen']}:{r['status']}" for r in rows}),
           "suspect": any(r["suspect"] for r in rows if r["screen"] == "on"),
           "needs_review": any(r["needs_review"] for r in rows if r["screen"] == "on"),
           "watched": sorted({str(r.get("watch")) for r in rows if r["screen"] == "on"})}
    inside = [r["watched_figure"] for r in rows if r["screen"] == "on" and r.get("watched_figure") is not None]
    if off and on and statistics.median(off):
        m = statistics.median(off)
        out["ratio"] = round(statistics.median(on) / m, 5)  # the verdict's figure, screen on over off
        out["off_spread"] = round(max(off) / min(off), 5) if min(off) > 0 else None
        out["equal"] = set(on) == set(off) and len(set(off)) == 1
        if inside:  # the watched grading's figure: what the guard inside the grading reads
            out["inside_ratio"] = round(statistics.median(inside) / m, 5)
    return out


def table(path: str) -> str:
    """The rows of one or more runs (JSON lines) as a Markdown table, one line a package and grader."""
    groups: dict[tuple[str, str], list[dict]] = {}
    kinds: dict[str, str] = {}
    for line in open(path):
        d = json.loads(line)
        if "row" in d:
            groups.setdefault((d["row"]["task"], d["row"]["grader"]), []).append(d["row"])
        elif "summary" in d:
            kinds[d["summary"]["task"]] = d["summary"]["kind"]
    out = ["| package | grader | kind | screen off | screen on (the verdict's) | on/off | off spread | "
           "guard inside (watched) / off | statuses | suspect or review |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (task, grader), rows in groups.items():
        s = summary(task, grader, kinds.get(task, "?"), rows)

        def figs(xs: list) -> str:
            return ", ".join(f"{x:.6g}" for x in xs) or "-"
        flag = "; ".join(dict.fromkeys(x for r in rows if r["screen"] == "on" for x in r["reasons"]))[:120] or "no"
        out.append(f"| {task} | {grader} | {s['kind']} | {figs(s['off'])} | {figs(s['on'])} | {s.get('ratio', '-')} | "
                   f"{s.get('off_spread', '-')} | {s.get('inside_ratio', '-')} | {', '.join(s['statuses'])} | {flag} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks-root", action="append", default=[])
    ap.add_argument("--task", action="append", default=[])
    ap.add_argument("--grader", default="both", choices=("dev", "hidden", "both"))
    ap.add_argument("--repeats", type=int, default=2, help="gradings of each setting, alternating (off first)")
    ap.add_argument("--mode", default="oracle", choices=("oracle", "noop"))
    ap.add_argument("--cache", default=None)
    ap.add_argument("--install-steps", default="auto", choices=("auto", "skip", "require"))
    ap.add_argument("--out", default=None, help="append rows and summaries as JSON lines")
    ap.add_argument("--table", default=None, help="print the Markdown table of a rows file and exit")
    a = ap.parse_args(argv)
    if a.table:
        print(table(a.table))
        return 0
    cache = a.cache or tempfile.mkdtemp(prefix="pesflow-screen-figures-")
    logs = Path(tempfile.mkdtemp(prefix="pesflow-screen-figures-logs-"))
    local = LocalConfig(cache_dir=cache, install_steps=a.install_steps)
    evs = {"off": Evaluator(EvaluatorConfig(local=local, trust=TrustConfig(enabled=False)), tasks_roots=a.tasks_root,
                            log_root=logs / "off"),
           "on": Evaluator(EvaluatorConfig(local=local, trust=TrustConfig()), tasks_roots=a.tasks_root,
                           log_root=logs / "on")}
    out = open(a.out, "a") if a.out else None
    graders = ["hidden", "dev"] if a.grader == "both" else [a.grader]
    for name in a.task:
        task = evs["off"].task(name)
        kind, why = watch.figure_kind(task.toml.primary_metric.metric_kind, task.toml.verifier.timing_metric)
        print(f"{name}: {kind} ({why}); {task.root} (official: {task.source.official})", flush=True)
        for grader in graders:
            rows = []
            for i in range(2 * a.repeats):
                screen = "off" if i % 2 == 0 else "on"
                t0 = time.monotonic()
                v = evs[screen].evaluate(task, mode=a.mode, grader=grader)
                r = {"task": name, "grader": grader, "screen": screen, "status": v.status.value, "figure": judged_figure(v),
                     "reward": v.reward, "suspect": v.trust.suspect, "needs_review": v.trust.needs_review,
                     "reasons": v.trust.reasons[:3], "seconds": round(time.monotonic() - t0, 2),
                     "watch": (v.trust.checks.get("watch") or {}).get("how"),
                     "watched_figure": (v.trust.checks.get("watch") or {}).get("figure"),
                     # pesflow's own timing of the same calls on new values, and how many were new
                     "reproduced": (v.trust.checks.get("probes") or {}).get("reproduced"),
                     "new_values": sum(1 for p in (v.trust.checks.get("probes") or {}).get("pace") or []
                                       if isinstance(p, list) and len(p) > 5 and p[5])}
                rows.append(r)
                print(f"  {grader:6} {screen:3} {r['status']:10} figure {r['figure']!s:>12} watched {r['watched_figure']!s:>10}"
                      f" suspect {r['suspect']} review {r['needs_review']} reproduced {r['reproduced']}"
                      f" {r['seconds']:6.1f} s", flush=True)
                if out:
                    out.write(json.dumps({"row": r}) + "\n")
                    out.flush()
            s = summary(name, grader, kind, rows)
            print(f"  => {json.dumps(s)}", flush=True)
            if out:
                out.write(json.dumps({"summary": s}) + "\n")
                out.flush()
    for ev in evs.values():
        ev.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
