"""`pesflow report RUN_DIR`: one self-contained HTML page about a run, for people.

The evolution tree (parent -> child; colour = what happened to the candidate, outline = its
island), the best speedup by round, each candidate's diff against its parent, its verdict,
plan and lessons, the run's memory, what the LLM roles cost, and every grading the trust
screens flagged (suspect, awaiting review) with its reasons and a person's decision. Everything is inline: the
data as JSON, the tree and the chart as SVG drawn here, the CSS and JS from
agent/readers/report_assets/. The page makes no request of any kind.
The run directory is read by agent/readers/run_view.py.
"""

from __future__ import annotations

import html
import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent.readers.run_view import KINDS, as_number, correct, load_run
from agent.rundir.store import atomic_write
from evaluator.trust.findings import FAMILIES, REVIEWS
from evaluator.verdict import SPEED_ONLY_GATES

ASSETS = Path(__file__).resolve().parent / "report_assets"
KIND_LABEL = {"improved": "correct, faster than the baseline", "slow": "correct, not faster",
              "suspect": "suspect: an exploit's score, not counted", "needs_review": "awaiting a person's review",
              "rejected": "rejected by a person, not counted", "hard_fail": "hard fail",
              "timeout": "timeout", "scope_violation": "scope violation", "grader_error": "grader error",
              "infra_error": "infrastructure error", "no_code": "no usable code", "unknown": "not graded / unknown"}
ISLAND_COLOURS = ["#3b6fd8", "#d8733b", "#8b46c8", "#1f9e89", "#c8467a", "#6c7a1f", "#4a4a4a", "#b8860b"]


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
            "infra_error": "infra", "no_code": "none", "suspect": "suspect", "needs_review": "review?",
            "rejected": "rejected"}.get(c["kind"], "?")


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
        if c.get("speedup") is not None and c.get("counts", True):
            tip += f' · speedup {c["speedup"]:g}'
        if c["reasons"]:
            tip += " · " + ", ".join(c["reasons"])
        if (c.get("trust") or {}).get("reasons"):
            tip += " · " + "; ".join(c["trust"]["reasons"])
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
        out.append(f'<circle class="pt" cx="{X(k):.1f}" cy="{Y(s):.1f}" r="3.5">'
                   f'<title>round {k}: {html.escape(str(bid))} {s:g}×</title></circle>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- the page


def _package_line(src: dict) -> str:
    """Which package the run graded: the benchmark's own, or not (and why)."""
    if not src:
        return ""
    if src.get("official"):
        return ('<span class="official">official Φ-Bench package @ '
                f'{html.escape(str(src.get("commit") or "")[:12])}</span> · ')
    return ('<span class="recreated">not the official package: '
            f'{html.escape(src.get("note") or src.get("repo") or "")}</span> · ')


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
             ("best speedup", speedup_text(as_number(best.get("speedup")))),
             ("reward", _fmt(as_number(best.get("reward")))),
             ("scored by", best.get("grader") or d.get("grader") or "-"), ("candidates", f"{n} ({failed} failed)"),
             ("flagged", str(len(d.get("suspects") or []))),
             ("rounds", str(max([c["round"] for c in d["candidates"]] + [0]))),
             ("gradings",
              f'{sc.get("dev", "-")} dev · {sc.get("hidden", "-")} hidden / budget {sc.get("task_budget", "-")}'
                          + (f' · dev past the loop\'s cap of {sc.get("dev_cap")}' if sc.get("dev_over_cap") else "")),
             ("model shown", d.get("feedback") or "-"),
             ("LLM calls", str(t.get("llm_calls", d["costs"]["total"]["calls"]))), ("tokens", f"{tokens:,}"),
             ("USD", f'{float(t.get("usd") or 0):.4f}'), ("wall", f'{_fmt(as_number(t.get("elapsed_seconds")))} s')]
    return "".join(f'<div class="card"><div class="k">{html.escape(k)}</div>'
                   f'<div class="v">{html.escape(str(v))}</div></div>'
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
            items.append('<span class="li"><svg width="14" height="14"><circle class="dot k-'
                         f'{k}" cx="7" cy="7" r="6"/></svg>{html.escape(KIND_LABEL[k])} <b>{counts[k]}</b>'
                         f'{f" <small>({html.escape(why)})</small>" if why else ""}</span>')
    for i in islands:
        items.append(f'<span class="li"><svg width="14" height="14"><circle cx="7" cy="7" r="5.5" fill="#fff" '
                     f'stroke="{ISLAND_COLOURS[i % len(ISLAND_COLOURS)]}" stroke-width="3"/></svg>island {i}</span>')
    items.append('<span class="li"><svg width="18" height="18"><circle cx="9" cy="9" r="8" '
                 'class="best-ring"/></svg>final pick</span>')
    if any(c.get("duplicate_of") for c in d["candidates"]):
        items.append('<span class="li"><svg width="14" height="14"><circle cx="7" cy="7" '
                     'r="5.5" fill="#fff" stroke="#666" stroke-dasharray="2 2" stroke-width="2"/>'
                     '</svg>same code as an earlier candidate</span>')
    return "".join(items)


def _costs_table(costs: dict[str, Any]) -> str:
    if not costs["roles"]:
        return '<p class="empty">No LLM calls recorded.</p>'

    def money(v: Any) -> str:
        return "-" if v is None else f"{float(v):.4f}"

    def secs(v: Any) -> str:
        return "-" if v is None else f"{float(v):.1f}"

    rows = "".join(f'<tr><td>{html.escape(r["role"])}</td><td>{html.escape(r["models"])}</td><td>{r["calls"]}</td>'
                   f'<td>{r["failed"]}</td><td>{_fmt(r["input_tokens"])}</td>'
                   f'<td>{_fmt(r.get("cache_read_tokens"))}</td><td>{_fmt(r["output_tokens"])}</td>'
                   f'<td>{money(r["usd"])}</td><td>{secs(r["seconds"])}</td></tr>' for r in costs["roles"])
    t = costs["total"]
    total = (f'<tr class="total"><td>total</td><td></td><td>{t["calls"]}</td><td></td>'
             f'<td>{_fmt(t["input_tokens"])}</td><td>{_fmt(t.get("cache_read_tokens"))}</td>'
             f'<td>{_fmt(t["output_tokens"])}</td><td>{money(t["usd"] or 0)}</td>'
             f'<td>{secs(t["seconds"] or 0)}</td></tr>')
    return ('<table class="costs"><thead><tr><th>role</th><th>model</th><th>calls</th>'
            '<th>failed</th><th>input tokens</th><th>of them cached</th><th>output tokens</th><th>USD</th>'
            f'<th>LLM s</th></tr></thead><tbody>{rows}{total}</tbody></table>')


def _candidates_table(cands: list[dict[str, Any]]) -> str:
    rows = "".join(f'<tr data-id="{html.escape(c["id"])}" class="k-{c["kind"]}"><td>'
                   f'<span class="sw k-{c["kind"]}"></span>{html.escape(c["id"])}</td><td>{c["round"]}</td>'
                   f'<td>{c["island"]}</td><td>{html.escape(c["parent"] or "-")}</td>'
                   f'<td>{html.escape(KIND_LABEL[c["kind"]])}</td><td>'
                   f'{speedup_text(c.get("speedup") if correct(c) and c.get("counts", True) else None)}</td>'
                   f'<td>{_fmt(c.get("reward") if c.get("counts", True) else None)}</td><td>'
                   f'{html.escape(", ".join([*c["reasons"], *((c.get("trust") or {}).get("reasons") or [])]) or "-")}'
                   '</td></tr>' for c in cands)
    return ('<table id="cand-table" class="cands"><thead><tr><th>candidate</th><th>round</th>'
            '<th>island</th><th>parent</th><th>outcome</th><th>speedup</th><th>reward</th><th>hard fails</th></tr>'
            f'</thead><tbody>{rows}</tbody></table>')


def _reason_html(reason: str) -> str:
    family, _, evidence = reason.partition(":")
    meaning = FAMILIES.get(family.strip()) or REVIEWS.get(family.strip(), "")
    return (f'<b>{html.escape(family.strip())}</b>' + (f' <small>({html.escape(meaning)})</small>' if meaning else "")
            + (f': {html.escape(evidence.strip())}' if evidence.strip() else ""))


def _suspects_table(d: dict[str, Any]) -> str:
    """Every flagged grading: what the screens said, a person's decision, and how to give one."""
    rows = d.get("suspects") or []
    if not rows:
        return '<p class="empty">No grading was flagged: every figure on this page counts.</p>'
    body = []
    for g in rows:
        what = "suspect" if g.get("suspect") else "needs review" if g.get("needs_review") else "reviewed"
        rv = g.get("review") or {}
        decision = f'{rv.get("decision")}ed: {html.escape(str(rv.get("why") or ""))}' if rv else "none yet"
        reasons = "<br>".join(_reason_html(r) for r in g.get("reasons") or []) or "-"
        cid = g.get("candidate_id") or "-"
        body.append(f'<tr data-id="{html.escape(cid)}" class="{"counts" if g.get("counts") else "not-counted"}">'
                    f'<td>{html.escape(cid)}</td><td><code>'
                    f'{html.escape(str(g.get("content_hash") or "")[:12])}</code></td>'
                    f'<td>{html.escape(str(g.get("grader")))} · {html.escape(str(g.get("label")))}</td><td>{what}</td>'
                    f'<td>{reasons}</td><td>{speedup_text(as_number(g.get("claimed_speedup")))}</td><td>{decision}</td>'
                    f'<td>{"yes" if g.get("counts") else "no"}</td></tr>')
    how = html.escape(f'pesflow review {d["run_dir"]} ID --accept|--reject --why TEXT')
    return ('<table id="suspects-table" class="cands"><thead><tr><th>candidate</th>'
            '<th>code</th><th>grader · grading</th><th>flag</th><th>reasons</th><th>claimed speedup</th>'
            f'<th>review</th><th>counts</th></tr></thead><tbody>{"".join(body)}</tbody></table>'
            f'<p class="hint">A person decides with <code>{how}</code>.</p>')


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
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \
script-src 'unsafe-inline'; img-src data:">
<title>{html.escape(title)}</title>
<style>{_asset("report.css")}</style></head>
<body>
<header><h1>{html.escape(d["task"] or "run")} <span class="sub">{html.escape(d["run_id"])}</span></h1>
<p class="meta">{_package_line(d.get("package") or {})}{html.escape(d.get("reward_class") or "")} task · \
seed {html.escape(_fmt(d["seed"]))} · search grader {html.escape(d.get("grader") or "-")}{method} · \
started {html.escape(d.get("started") or "-")} · finished {html.escape(d.get("finished") or "-")}</p>
<div class="cards">{_cards(d)}</div></header>
<main>
<section class="tree-and-detail">
<div class="panel tree-panel"><h2>Evolution tree</h2><p class="hint">Click a candidate for its diff against \
its parent, verdict and lessons.</p>
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
<section class="panel"><h2>The run's memory (lessons carried between rounds)</h2>\
<ul class="memory">{memory}</ul></section>
<section class="panel" id="suspects"><h2>Flagged gradings (suspects and those awaiting review: never fitness, parent, \
best or pick)</h2>{_suspects_table(d)}</section>
<section class="panel"><h2>All candidates</h2>{_candidates_table(d["candidates"])}</section>
</main>
<footer>Written by pesflow on {datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")} \
from {html.escape(d["run_dir"])} (candidates from {html.escape(d["source"])}). {missing}</footer>
<script type="application/json" id="pesflow-data">{blob}</script>
<script>{_asset("report.js")}</script>
</body></html>
"""


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    data = load_run(run_dir)
    out = Path(out) if out else Path(run_dir) / "report.html"
    atomic_write(out, render(data))
    out.chmod(0o644)  # a page meant to be passed around, not a private temporary file
    return out
