"""`pesflow report RUN_DIR`: one self-contained HTML page about a run, for people.

The evolution tree (parent -> child; colour = what happened to the candidate, outline = its
island), the best speedup by round, each candidate's diff against its parent, its verdict,
plan and lessons, the run's memory, and what the LLM roles cost. Everything is inline: the
data as JSON, the tree and the chart as SVG drawn here, the CSS and JS from
agent/report_assets/. The page makes no request of any kind.

Reading is tolerant, because the page must work on any run directory, a crashed one, and
imported LoongFlow traces: every file is optional, and what was missing is listed at the
bottom of the page. Sources, best first:
- candidates: the last checkpoints/*/pesflow_state.json (population); else the largest
  LoongFlow `solutions/*.json` folder anywhere under RUN_DIR; else the journal's
  candidate and verdict events.
- diffs: rounds/*/executor/<id>/candidate.diff; else computed from the parent's files.
- verdicts: rounds/*/executor/<id>/verdict.json, evaluations/<hash>/**/verdict.json.
- costs: the journal's llm_call events; else run.json totals.
"""

from __future__ import annotations

import difflib
import html
import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent import journal
from evaluator.verdict import SPEED_ONLY_GATES  # one definition of what "correct" forgives

ASSETS = Path(__file__).resolve().parent / "report_assets"
MAX_DIFF_CHARS = 200_000  # a page people can still open; the rest stays in the run directory
KINDS = ["improved", "slow", "hard_fail", "timeout", "scope_violation", "grader_error", "infra_error", "no_code", "unknown"]
KIND_LABEL = {"improved": "correct, faster than the baseline", "slow": "correct, not faster", "hard_fail": "hard fail",
              "timeout": "timeout", "scope_violation": "scope violation", "grader_error": "grader error",
              "infra_error": "infrastructure error", "no_code": "no usable code", "unknown": "not graded / unknown"}
ISLAND_COLOURS = ["#3b6fd8", "#d8733b", "#8b46c8", "#1f9e89", "#c8467a", "#6c7a1f", "#4a4a4a", "#b8860b"]


# ---------------------------------------------------------------- reading, tolerantly


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(errors="replace"))
    except (OSError, ValueError):
        return None


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _population_state(run_dir: Path) -> tuple[dict[str, Any] | None, Path | None]:
    for cp in sorted(run_dir.glob("checkpoints/*"), key=lambda p: p.name, reverse=True):
        state = _json(cp / "pesflow_state.json")
        if isinstance(state, dict) and isinstance(state.get("population"), dict):
            return state, cp
    return None, None


def _from_pesflow(state: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    pop = state["population"]
    out = []
    for s in pop.get("solutions") or []:
        if not isinstance(s, dict) or "id" not in s:
            continue
        out.append({"id": str(s["id"]), "parent": s.get("parent_id"), "round": int(s.get("round") or 0),
                    "island": int(s.get("island") or 0), "status": s.get("status") or "unknown",
                    "reasons": list(s.get("hard_fail_reasons") or []), "speedup": _num(s.get("speedup")),
                    "reward": _num(s.get("reward")), "tests": [s.get("tests_passed", 0), s.get("tests_total", 0)],
                    "plan": s.get("plan") or "", "lessons": s.get("lessons") or "", "duplicate_of": s.get("duplicate_of"),
                    "files": s.get("files") or {}, "content_hash": s.get("content_hash") or ""})
    return out, dict(pop.get("baseline_files") or {})


def _loongflow_dir(run_dir: Path) -> Path | None:
    dirs: dict[Path, int] = {}
    for p in run_dir.rglob("solutions/*.json"):
        dirs[p.parent.parent] = dirs.get(p.parent.parent, 0) + 1
    if not dirs:
        return None
    # The latest checkpoint holds every solution so far: the most files, then the last name.
    return max(dirs, key=lambda d: (dirs[d], d.name))


def _from_loongflow(cp: Path) -> list[dict[str, Any]]:
    out = []
    for p in sorted(cp.glob("solutions/*.json")):
        s = _json(p)
        if not isinstance(s, dict):
            continue
        meta = s.get("metadata") if isinstance(s.get("metadata"), dict) else {}
        ev = meta.get("evaluation") if isinstance(meta.get("evaluation"), dict) else None
        if ev is None and isinstance(s.get("evaluation"), str):
            parsed = _json_text(s["evaluation"])
            ev = parsed if isinstance(parsed, dict) else {"message": s["evaluation"]}
        ev = ev or {}
        score = _num(s.get("score"))
        status = ev.get("status") or ("ok" if score and score > 0 else "unknown")
        tests = ev.get("tests") if isinstance(ev.get("tests"), dict) else {}
        files = meta.get("files") if isinstance(meta.get("files"), dict) else {"solution": str(s.get("solution") or "")}
        out.append({"id": str(s.get("solution_id") or p.stem), "parent": s.get("parent_id") or None,
                    "round": int(_num(s.get("iteration")) or 0), "island": int(_num(s.get("island_id")) or 0),
                    "status": status, "reasons": list(ev.get("hard_fail_reasons") or []),
                    "speedup": _num(ev.get("speedup")) if "speedup" in ev else score, "reward": _num(ev.get("reward")),
                    "tests": [tests.get("passed", 0), tests.get("total", 0)], "plan": str(s.get("generate_plan") or ""),
                    "lessons": str(s.get("summary") or ""), "duplicate_of": ev.get("duplicate_of") or meta.get("duplicate_of"),
                    "files": files, "content_hash": str(meta.get("content_hash") or ""),
                    "message": ev.get("message") if isinstance(ev.get("message"), str) else ""})
    return out


def _json_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _from_journal(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    verdicts = {}
    for e in events:
        if e.get("kind") == "verdict" and not (e.get("data") or {}).get("label"):
            verdicts[e["data"].get("content_hash")] = e["data"].get("verdict") or {}
    out = []
    for e in events:
        d = e.get("data") or {}
        if e.get("kind") != "candidate" or "id" not in d:
            continue
        v = verdicts.get(d.get("content_hash"), {})
        tests = v.get("tests") or {}
        out.append({"id": str(d["id"]), "parent": d.get("parent_id"), "round": int(d.get("round") or 0), "island": 0,
                    "status": d.get("status") if d.get("status") not in (None, "ok") else (v.get("status") or d.get("status") or "unknown"),
                    "reasons": list(v.get("hard_fail_reasons") or []), "speedup": _num(v.get("speedup")),
                    "reward": _num(v.get("reward")), "tests": [tests.get("passed", 0), tests.get("total", 0)], "plan": "",
                    "lessons": str(d.get("detail") or ""), "duplicate_of": None, "files": {},
                    "content_hash": d.get("content_hash") or ""})
    return out


def correct(c: dict[str, Any]) -> bool:
    return c["status"] in ("ok", "hard_fail") and not [r for r in c["reasons"] if r not in SPEED_ONLY_GATES]


def kind_of(c: dict[str, Any]) -> str:
    if correct(c):
        return "improved" if (c.get("speedup") or 0) > 1.0 else "slow"
    return c["status"] if c["status"] in KINDS else "unknown"


def unified_diff(before: dict[str, str], after: dict[str, str]) -> str:
    out = []
    for rel in sorted(set(before) | set(after)):
        a, b = before.get(rel), after.get(rel)
        if a == b:
            continue
        out += difflib.unified_diff((a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
                                    "/dev/null" if a is None else f"a/{rel}", "/dev/null" if b is None else f"b/{rel}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def _recorded(run_dir: Path, cid: str, name: str) -> Path | None:
    found = sorted(run_dir.glob(f"rounds/*/executor/{cid}/{name}"))
    return found[0] if found else None


def _verdict_for(run_dir: Path, c: dict[str, Any]) -> dict[str, Any] | None:
    p = _recorded(run_dir, c["id"], "verdict.json")
    v = _json(p) if p else None
    if v is None and c.get("content_hash"):
        for q in sorted((run_dir / "evaluations" / c["content_hash"][:16]).glob("**/verdict.json"), key=lambda q: len(q.parts)):
            v = _json(q)
            if v is not None:
                break
    return v if isinstance(v, dict) else None


def _costs(events: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    roles: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.get("kind") != "llm_call":
            continue
        d = e.get("data") or {}
        r = roles.setdefault(d.get("role") or "?", {"role": d.get("role") or "?", "models": set(), "calls": 0, "failed": 0,
                                                    "input_tokens": 0, "output_tokens": 0, "usd": 0.0, "seconds": 0.0})
        r["calls"] += 1
        r["failed"] += d.get("text") is None
        r["models"].add(str(d.get("model") or "?"))
        usage = d.get("usage") or {}
        r["input_tokens"] += int(usage.get("input_tokens") or 0)
        r["output_tokens"] += int(usage.get("output_tokens") or 0)
        r["usd"] += float(d.get("cost_usd") or 0.0)
        r["seconds"] += float(d.get("latency_s") or 0.0)
    rows = [{**r, "models": ", ".join(sorted(r["models"]))} for r in roles.values()]
    totals = run.get("totals") or {}
    if not rows and totals.get("calls_by_role"):  # no journal: what run.json kept, without a per-role split of tokens
        rows = [{"role": k, "models": "", "calls": v, "failed": 0, "input_tokens": None, "output_tokens": None, "usd": None,
                 "seconds": None} for k, v in totals["calls_by_role"].items()]
    order = {"planner": 0, "executor": 1, "repair": 2, "summarizer": 3}
    rows.sort(key=lambda r: (order.get(r["role"], 9), r["role"]))
    total = {"calls": sum(r["calls"] for r in rows), "input_tokens": totals.get("input_tokens", sum(r["input_tokens"] or 0 for r in rows)),
             "output_tokens": totals.get("output_tokens", sum(r["output_tokens"] or 0 for r in rows)),
             "usd": totals.get("usd", sum(r["usd"] or 0 for r in rows)),
             "seconds": totals.get("llm_seconds", sum(r["seconds"] or 0 for r in rows))}
    return {"roles": rows, "total": total}


def best_by_round(run: dict[str, Any], state: dict[str, Any] | None, cands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for src in (run.get("best_by_round"), (state or {}).get("best_by_round")):
        if isinstance(src, list) and src:
            return [{"round": int(b.get("round") or 0), "best_id": b.get("best_id"), "speedup": _num(b.get("speedup"))}
                    for b in src if isinstance(b, dict)]
    out: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    for k in sorted({c["round"] for c in cands}):
        for c in cands:
            if c["round"] == k and correct(c) and c.get("speedup") and (best is None or c["speedup"] > best["speedup"]):
                best = c
        out.append({"round": k, "best_id": best["id"] if best else None, "speedup": best["speedup"] if best else None})
    return out


def load_run(run_dir: Path) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-able data; `missing` names what was not found."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir} is not a directory; pass a run directory (traces/<bench>/<dir>/<run-id>)")
    missing: list[str] = []
    run = _json(run_dir / "run.json")
    if not isinstance(run, dict):
        missing.append("run.json")
        run = {}
    events = journal.read(run_dir / "journal.jsonl") if (run_dir / "journal.jsonl").is_file() else []
    if not events:
        missing.append("journal.jsonl")
    state, _ = _population_state(run_dir)
    baseline_files: dict[str, str] = {}
    if state is not None:
        cands, baseline_files = _from_pesflow(state)
        source = "pesflow checkpoint"
    elif (lf := _loongflow_dir(run_dir)) is not None:
        cands, source = _from_loongflow(lf), f"LoongFlow solutions in {lf.relative_to(run_dir) or '.'}"
        missing.append("checkpoints/*/pesflow_state.json")
    else:
        cands, source = _from_journal(events), "journal events"
        missing.append("checkpoints (no population found)")
    ids = {c["id"] for c in cands}
    by_id = {c["id"]: c for c in cands}
    best_id = (run.get("best") or {}).get("id")
    if best_id not in ids:
        ranked = [c for c in cands if correct(c) and c.get("speedup")]
        best_id = max(ranked, key=lambda c: c["speedup"])["id"] if ranked else None
    for c in cands:
        if c["parent"] not in ids:
            c["parent"] = None
        diff_file = _recorded(run_dir, c["id"], "candidate.diff")
        if diff_file is not None:
            c["diff"], c["diff_source"] = diff_file.read_text(errors="replace"), "recorded"
        else:
            before = by_id[c["parent"]]["files"] if c["parent"] else baseline_files
            c["diff"] = unified_diff(before, c["files"]) if (before or c["parent"]) and c["files"] else ""
            c["diff_source"] = "computed" if c["diff"] else "none"
        if len(c["diff"]) > MAX_DIFF_CHARS:
            c["diff"] = c["diff"][:MAX_DIFF_CHARS] + f"\n... (cut at {MAX_DIFF_CHARS} characters; the whole diff is in the run directory)\n"
        v = _verdict_for(run_dir, c) or {}
        c["verdict"] = {k: v.get(k) for k in ("status", "grader", "message", "seconds", "hardware", "speedup", "reward")}
        if not c["verdict"].get("message") and c.get("message"):
            c["verdict"]["message"] = c["message"]
        c["kind"] = kind_of(c)
        c["best"] = c["id"] == best_id
    for c in cands:  # the files are in the diffs now; the page need not carry every version whole
        c.pop("files", None)
        c.pop("message", None)
    task = run.get("task") if isinstance(run.get("task"), dict) else {"name": run.get("task") or ""}
    lessons = (state or {}).get("memory") or []
    if not lessons:
        for p in sorted(run_dir.glob("rounds/*/summarizer/lessons.json"), reverse=True):
            mem = (_json(p) or {}).get("memory")
            if mem:
                lessons = mem
                break
    return {
        "run_dir": str(run_dir.resolve()), "run_id": run.get("run_id") or run_dir.name,
        "task": task.get("name") or "", "reward_class": task.get("reward_class"), "status": run.get("status") or "unknown",
        "seed": run.get("seed"), "grader": run.get("grader"), "started": run.get("started"), "finished": run.get("finished"),
        "method": (run.get("baseline") or {}).get("method"), "best": run.get("best") or {}, "best_id": best_id,
        "totals": run.get("totals") or {}, "candidates": cands, "best_by_round": best_by_round(run, state, cands),
        "costs": _costs(events, run), "memory": [str(m) for m in lessons], "source": source, "missing": missing,
        "package": task.get("source") or {},
    }


# ---------------------------------------------------------------- the tree and the chart, as SVG


def tree_layout(cands: list[dict[str, Any]]) -> dict[str, tuple[float, int]]:
    """id -> (slot, round): leaves take consecutive slots in depth-first order, a parent sits
    over the middle of its children, and each candidate sits on its round's row."""
    kids: dict[str | None, list[dict[str, Any]]] = {}
    for c in cands:
        kids.setdefault(c["parent"], []).append(c)
    for v in kids.values():
        v.sort(key=lambda c: (c["round"], c["id"]))
    pos: dict[str, tuple[float, int]] = {}
    slot = 0
    # Iterative post-order: a run may be a long chain, deeper than Python's recursion limit.
    stack: list[tuple[dict[str, Any], bool]] = [(c, False) for c in reversed(kids.get(None, []))]
    while stack:
        c, done = stack.pop()
        children = kids.get(c["id"], [])
        if not children:
            pos[c["id"]] = (float(slot), c["round"])
            slot += 1
        elif done:
            pos[c["id"]] = ((pos[children[0]["id"]][0] + pos[children[-1]["id"]][0]) / 2, c["round"])
        else:
            stack.append((c, True))
            stack += [(k, False) for k in reversed(children)]
    return pos


def speedup_text(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:,.0f}×" if s >= 100 else f"{s:.3g}×" if s < 10 else f"{s:.1f}×"


def _short(c: dict[str, Any]) -> str:
    if c["kind"] in ("improved", "slow"):
        return speedup_text(c.get("speedup"))
    return {"hard_fail": "fail", "timeout": "time", "scope_violation": "scope", "grader_error": "grader",
            "infra_error": "infra", "no_code": "none"}.get(c["kind"], "?")


def tree_svg(cands: list[dict[str, Any]]) -> str:
    if not cands:
        return '<p class="empty">No candidates were found in this run directory.</p>'
    pos = tree_layout(cands)
    dx, dy, left, top, r = 44, 66, 84, 26, 11
    rounds = sorted({c["round"] for c in cands})
    row = {k: i for i, k in enumerate(rounds)}
    xy = {cid: (left + s * dx, top + row[k] * dy) for cid, (s, k) in pos.items()}
    width = left + (max(s for s, _ in pos.values()) + 1) * dx
    height = top + len(rounds) * dy
    parts = [f'<svg id="tree-svg" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
             f'viewBox="0 0 {width:.0f} {height}" role="img" aria-label="evolution tree">']
    for k in rounds:
        y = top + row[k] * dy
        parts.append(f'<text class="round-label" x="6" y="{y + 4}">round {k}</text>'
                     f'<line class="round-rule" x1="{left - 20}" x2="{width:.0f}" y1="{y}" y2="{y}"/>')
    for c in cands:
        if c["parent"] in xy:
            (x1, y1), (x2, y2) = xy[c["parent"]], xy[c["id"]]
            mid = (y1 + y2) / 2
            parts.append(f'<path class="edge" data-child="{html.escape(c["id"])}" '
                         f'd="M{x1:.1f},{y1 + r} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2 - r}"/>')
    for c in cands:
        x, y = xy[c["id"]]
        cls = f'node k-{c["kind"]}' + (" best" if c["best"] else "") + (" dup" if c.get("duplicate_of") else "")
        island = ISLAND_COLOURS[c["island"] % len(ISLAND_COLOURS)]
        tip = f'{c["id"]} · round {c["round"]} · island {c["island"]} · {KIND_LABEL[c["kind"]]}'
        if c.get("speedup") is not None:
            tip += f' · speedup {c["speedup"]:g}'
        if c["reasons"]:
            tip += " · " + ", ".join(c["reasons"])
        parts.append(f'<g class="{cls}" data-id="{html.escape(c["id"])}" tabindex="0" role="button" '
                     f'transform="translate({x:.1f},{y})"><title>{html.escape(tip)}</title>'
                     + (f'<circle class="best-ring" r="{r + 5}"/>' if c["best"] else "")
                     + f'<circle class="dot" r="{r}" style="stroke:{island}"/>'
                     f'<text class="node-label" y="{r + 12}">{html.escape(_short(c))}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        ticks = [10.0 ** e for e in range(a, b + 1)]
        return [t for t in ticks if lo / 1.0001 <= t <= hi * 1.0001] or [lo, hi]
    step = (hi - lo) / 4 or 1.0
    return [lo + i * step for i in range(5)]


def chart_svg(points: list[dict[str, Any]]) -> str:
    pts = [(p["round"], p["speedup"], p.get("best_id")) for p in points if p.get("speedup") and p["speedup"] > 0]
    if not pts:
        return '<p class="empty">No correct candidate with a speedup: nothing to chart.</p>'
    w, h, l, rgt, t, b = 560, 230, 58, 16, 14, 36
    ks = [k for k, _, _ in pts]
    ys = [s for _, s, _ in pts]
    lo, hi = min(ys + [1.0]), max(ys + [1.0])
    log = hi / lo > 20
    if hi == lo:
        lo, hi = lo * 0.9, hi * 1.1
    f = (lambda v: math.log10(v)) if log else (lambda v: v)
    kmax = max(max(ks), 1)

    def X(k: float) -> float:
        return l + (k - min(ks)) / max(kmax - min(ks), 1) * (w - l - rgt)

    def Y(v: float) -> float:
        return t + (1 - (f(v) - f(lo)) / (f(hi) - f(lo))) * (h - t - b)

    out = [f'<svg id="chart-svg" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
           f'role="img" aria-label="best speedup by round">']
    for v in _ticks(lo, hi, log):
        out.append(f'<line class="grid" x1="{l}" x2="{w - rgt}" y1="{Y(v):.1f}" y2="{Y(v):.1f}"/>'
                   f'<text class="tick" x="{l - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:,.4g}×</text>')
    step = max(1, (kmax - min(ks)) // 12)
    for k in range(min(ks), kmax + 1, step):
        out.append(f'<text class="tick" x="{X(k):.1f}" y="{h - b + 16}" text-anchor="middle">{k}</text>')
    out.append(f'<text class="axis" x="{(l + w - rgt) / 2}" y="{h - 4}" text-anchor="middle">round</text>')
    out.append(f'<text class="axis" transform="translate(12,{(t + h - b) / 2}) rotate(-90)" text-anchor="middle">'
               f'best speedup{" (log)" if log else ""}</text>')
    if lo <= 1.0 <= hi:
        out.append(f'<line class="one" x1="{l}" x2="{w - rgt}" y1="{Y(1.0):.1f}" y2="{Y(1.0):.1f}"/>')
    # Steps: the best holds until a later round beats it.
    path = f"M{X(pts[0][0]):.1f},{Y(pts[0][1]):.1f}" + "".join(f" H{X(k):.1f} V{Y(s):.1f}" for k, s, _ in pts[1:])
    out.append(f'<path class="line" d="{path}"/>')
    for k, s, bid in pts:
        out.append(f'<circle class="pt" cx="{X(k):.1f}" cy="{Y(s):.1f}" r="3.5"><title>round {k}: {html.escape(str(bid))} '
                   f'{s:g}×</title></circle>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- the page


def _package_line(src: dict) -> str:
    """Which package the run graded: the benchmark's own, or not (and why)."""
    if not src:
        return ""
    if src.get("official"):
        return f'<span class="official">official Φ-Bench package @ {html.escape(str(src.get("commit") or "")[:12])}</span> · '
    return f'<span class="recreated">not the official package: {html.escape(src.get("note") or src.get("repo") or "")}</span> · '


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"
    return str(v)


def _cards(d: dict[str, Any]) -> str:
    best, t = d["best"], d["totals"]
    n = len(d["candidates"])
    failed = sum(1 for c in d["candidates"] if not correct(c))
    tokens = (t.get("input_tokens") or 0) + (t.get("output_tokens") or 0)
    sc = t.get("scorings") or {}
    cards = [("status", d["status"]), ("best", f'{best.get("id") or d["best_id"] or "-"}'),
             ("best speedup", speedup_text(_num(best.get("speedup")))),
             ("reward", _fmt(_num(best.get("reward")))), ("scored by", best.get("grader") or d.get("grader") or "-"),
             ("candidates", f"{n} ({failed} failed)"), ("rounds", str(max([c["round"] for c in d["candidates"]] + [0]))),
             ("gradings", f'{sc.get("dev", "-")} dev · {sc.get("hidden", "-")} hidden / budget {sc.get("task_budget", "-")}'),
             ("LLM calls", str(t.get("llm_calls", d["costs"]["total"]["calls"]))), ("tokens", f"{tokens:,}"),
             ("USD", f'{float(t.get("usd") or 0):.4f}'), ("wall", f'{_fmt(_num(t.get("elapsed_seconds")))} s')]
    return "".join(f'<div class="card"><div class="k">{html.escape(k)}</div><div class="v">{html.escape(str(v))}</div></div>'
                   for k, v in cards)


def _legend(d: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    reasons: dict[str, dict[str, int]] = {}
    islands = sorted({c["island"] for c in d["candidates"]})
    for c in d["candidates"]:
        counts[c["kind"]] = counts.get(c["kind"], 0) + 1
        for r in c["reasons"]:
            if r not in SPEED_ONLY_GATES:
                reasons.setdefault(c["kind"], {}).setdefault(r, 0)
                reasons[c["kind"]][r] += 1
    items = []
    for k in KINDS:
        if k in counts:
            why = ", ".join(f"{r} ×{n}" for r, n in sorted(reasons.get(k, {}).items()))
            items.append(f'<span class="li"><svg width="14" height="14"><circle class="dot k-{k}" cx="7" cy="7" r="6"/></svg>'
                         f'{html.escape(KIND_LABEL[k])} <b>{counts[k]}</b>{f" <small>({html.escape(why)})</small>" if why else ""}</span>')
    for i in islands:
        items.append(f'<span class="li"><svg width="14" height="14"><circle cx="7" cy="7" r="5.5" fill="#fff" '
                     f'stroke="{ISLAND_COLOURS[i % len(ISLAND_COLOURS)]}" stroke-width="3"/></svg>island {i}</span>')
    items.append('<span class="li"><svg width="18" height="18"><circle cx="9" cy="9" r="8" class="best-ring"/></svg>final pick</span>')
    if any(c.get("duplicate_of") for c in d["candidates"]):
        items.append('<span class="li"><svg width="14" height="14"><circle cx="7" cy="7" r="5.5" fill="#fff" stroke="#666" '
                     'stroke-dasharray="2 2" stroke-width="2"/></svg>same code as an earlier candidate</span>')
    return "".join(items)


def _costs_table(costs: dict[str, Any]) -> str:
    if not costs["roles"]:
        return '<p class="empty">No LLM calls recorded.</p>'

    def money(v: Any) -> str:
        return "-" if v is None else f"{float(v):.4f}"

    def secs(v: Any) -> str:
        return "-" if v is None else f"{float(v):.1f}"

    rows = "".join(f'<tr><td>{html.escape(r["role"])}</td><td>{html.escape(r["models"])}</td><td>{r["calls"]}</td>'
                   f'<td>{r["failed"]}</td><td>{_fmt(r["input_tokens"])}</td><td>{_fmt(r["output_tokens"])}</td>'
                   f'<td>{money(r["usd"])}</td><td>{secs(r["seconds"])}</td></tr>' for r in costs["roles"])
    t = costs["total"]
    total = (f'<tr class="total"><td>total</td><td></td><td>{t["calls"]}</td><td></td><td>{_fmt(t["input_tokens"])}</td>'
             f'<td>{_fmt(t["output_tokens"])}</td><td>{money(t["usd"] or 0)}</td><td>{secs(t["seconds"] or 0)}</td></tr>')
    return ('<table class="costs"><thead><tr><th>role</th><th>model</th><th>calls</th><th>failed</th><th>input tokens</th>'
            f'<th>output tokens</th><th>USD</th><th>LLM s</th></tr></thead><tbody>{rows}{total}</tbody></table>')


def _candidates_table(cands: list[dict[str, Any]]) -> str:
    rows = "".join(f'<tr data-id="{html.escape(c["id"])}" class="k-{c["kind"]}"><td><span class="sw k-{c["kind"]}"></span>'
                   f'{html.escape(c["id"])}</td><td>{c["round"]}</td><td>{c["island"]}</td><td>{html.escape(c["parent"] or "-")}</td>'
                   f'<td>{html.escape(KIND_LABEL[c["kind"]])}</td><td>{speedup_text(c.get("speedup") if correct(c) else None)}</td><td>{_fmt(c.get("reward"))}</td>'
                   f'<td>{html.escape(", ".join(c["reasons"]) or "-")}</td></tr>' for c in cands)
    return ('<table id="cand-table" class="cands"><thead><tr><th>candidate</th><th>round</th><th>island</th><th>parent</th>'
            f'<th>outcome</th><th>speedup</th><th>reward</th><th>hard fails</th></tr></thead><tbody>{rows}</tbody></table>')


def _asset(name: str) -> str:
    return (ASSETS / name).read_text()


def render(d: dict[str, Any]) -> str:
    # "<" is escaped inside the JSON so that no string in it can close the script element.
    blob = json.dumps({"candidates": d["candidates"], "best_id": d["best_id"], "kind_label": KIND_LABEL},
                      ensure_ascii=False).replace("<", "\\u003c")
    title = f'pesflow · {d["task"] or "run"} · {d["run_id"]}'
    memory = "".join(f"<li>{html.escape(m)}</li>" for m in d["memory"]) or '<li class="empty">none recorded</li>'
    missing = (f'<p>Not found in the run directory (shown without): {html.escape(", ".join(d["missing"]))}.</p>'
               if d["missing"] else "")
    method = f' · method {html.escape(d["method"])}' if d.get("method") else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{html.escape(title)}</title>
<style>{_asset("report.css")}</style></head>
<body>
<header><h1>{html.escape(d["task"] or "run")} <span class="sub">{html.escape(d["run_id"])}</span></h1>
<p class="meta">{_package_line(d.get("package") or {})}{html.escape(d.get("reward_class") or "")} task · seed {html.escape(_fmt(d["seed"]))} · search grader {html.escape(d.get("grader") or "-")}{method} · started {html.escape(d.get("started") or "-")} · finished {html.escape(d.get("finished") or "-")}</p>
<div class="cards">{_cards(d)}</div></header>
<main>
<section class="tree-and-detail">
<div class="panel tree-panel"><h2>Evolution tree</h2><p class="hint">Click a candidate for its diff against its parent, verdict and lessons.</p>
<div class="legend">{_legend(d)}</div>
<div id="tree" class="scroll">{tree_svg(d["candidates"])}</div></div>
<aside class="panel" id="detail"><h2 id="detail-title">Candidate</h2>
<div id="detail-badges"></div>
<table id="detail-meta" class="meta-table"></table>
<h3>Verdict</h3><p id="detail-verdict" class="verdict"></p>
<h3>Plan</h3><pre id="detail-plan" class="text"></pre>
<h3>Lessons</h3><pre id="detail-lessons" class="text"></pre>
<h3>Diff against its parent <small id="detail-diff-source"></small></h3><pre id="detail-diff" class="diff"></pre>
</aside>
</section>
<section class="row">
<div class="panel"><h2>Best by round</h2>{chart_svg(d["best_by_round"])}</div>
<div class="panel"><h2>Costs by role</h2>{_costs_table(d["costs"])}</div>
</section>
<section class="panel"><h2>The run's memory (lessons carried between rounds)</h2><ul class="memory">{memory}</ul></section>
<section class="panel"><h2>All candidates</h2>{_candidates_table(d["candidates"])}</section>
</main>
<footer>Written by pesflow on {datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")} from {html.escape(d["run_dir"])} (candidates from {html.escape(d["source"])}). {missing}</footer>
<script type="application/json" id="pesflow-data">{blob}</script>
<script>{_asset("report.js")}</script>
</body></html>
"""


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    from agent.run_store import atomic_write

    data = load_run(run_dir)
    out = Path(out) if out else Path(run_dir) / "report.html"
    atomic_write(out, render(data))
    out.chmod(0o644)  # a page meant to be passed around, not a private temporary file
    return out
