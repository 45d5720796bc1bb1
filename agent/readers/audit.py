"""`pesflow audit DIR`: is this trace what it claims to be?

For a pesflow run directory: the journal's hash chain is intact; every candidate's code
matches its hash; every verdict has its grader logs; checkpoints agree with the journal;
final/ matches the best candidate, and its final grading counts (not a suspect nobody accepted);
every review event names a graded candidate, decides, and says why; every candidate stayed in
scope; no API key or other secret appears in any file; nothing of the task's tests/ (nor its anchor) appears in any
prompt, nor any figure computed from the anchor (a verdict's benchmark reward, its speedup over the
anchor: recomputed for every verdict the journal holds). LoongFlow traces are handed to agent/loongflow.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agent.rundir import journal
from agent.llm.leak_guard import AnchorFigures, LeakGuard
from evaluator.candidate import candidate_hash
from agent.readers.loongflow.audit import audit_loongflow
from agent.readers.loongflow.trace import is_loongflow_trace
from agent.rundir.review import check_reviews
from agent.rundir.schema import STATE_FILE, flagged
from agent.rundir.secrets import find_secrets
from agent.rundir.store import checkpoints_of
from evaluator.candidate import apply_diff
from evaluator.scoring import DevFigure
from evaluator.task import Task, TaskError, load_task


class AuditReport(BaseModel):
    kind: str = "pesflow"
    path: str
    findings: list[str] = Field(default_factory=list)  # what was checked and seen
    violations: list[str] = Field(default_factory=list)  # what is wrong
    stats: dict[str, Any] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations


def _last_state(run_dir: Path) -> tuple[str | None, dict[str, Any] | None]:
    found = checkpoints_of(run_dir)
    if not found:
        return None, None
    return found[-1][1].name, json.loads((found[-1][1] / STATE_FILE).read_text())


def audit_run(run_dir: Path) -> AuditReport:
    rep = AuditReport(path=str(run_dir))
    run = json.loads((run_dir / "run.json").read_text())
    events = journal.read(run_dir / "journal.jsonl")
    rep.stats["journal_lines"] = len(events)
    _check_chain(run_dir, events, rep)
    solutions = _check_candidates(run_dir, run, events, rep)
    _check_logs(events, rep)
    _check_final(run_dir, run, events, solutions, rep)
    _check_reviews(events, rep)
    _check_secrets(run_dir, rep)
    # nothing of tests/ in a prompt
    path = (run.get("task") or {}).get("path")
    try:
        if not path:
            raise TaskError("no task path")
        task = load_task(path)
    except TaskError:
        rep.findings.append("leak check skipped: the task package is not at the path run.json records")
        return rep
    check_prompts(run_dir, task, events, rep)
    return rep


def _check_chain(run_dir: Path, events: list[dict[str, Any]], rep: AuditReport) -> None:
    chain = journal.verify(run_dir / "journal.jsonl")
    for problem in chain:
        rep.violations.append(f"journal: {problem}")
    if not chain:
        rep.findings.append(f"journal: {len(events)} lines, hash chain intact")


def _check_candidates(run_dir: Path, run: dict[str, Any], events: list[dict[str, Any]],
                      rep: AuditReport) -> dict[str, dict[str, Any]]:
    """Candidates match their hashes and stay in scope; checkpoints agree with the journal.
    Returns the last checkpoint's candidates by id."""
    v = rep.violations.append
    cp_name, state = _last_state(run_dir)
    solutions = {s["id"]: s for s in (state or {}).get("population", {}).get("solutions", [])}
    rep.stats["candidates"] = len(solutions)
    scope = set(run.get("task", {}).get("scope", []))
    cand_events = {e["data"]["id"]: e["data"] for e in events if e["kind"] == "candidate"}
    baseline = (state or {}).get("population", {}).get("baseline_files") or {}
    for sid, s in solutions.items():
        if s["status"] != "no_code" and candidate_hash(s["files"], baseline) != s["content_hash"]:
            v(f"candidate {sid}: its code does not match its hash {s['content_hash'][:12]} ({cp_name})")
        if sid not in cand_events:
            v(f"candidate {sid} is in {cp_name} but no journal event records it")
        elif cand_events[sid].get("content_hash") not in (None, s["content_hash"]) and s["status"] != "no_code":
            v(f"candidate {sid}: the journal and {cp_name} disagree on its code hash")
        outside = sorted(set(s["files"]) - scope) if scope else []
        if outside:
            v(f"candidate {sid} touches files outside the scope: {', '.join(outside)}")
    missing = [cid for cid in cand_events if cid not in solutions and state is not None
               and cand_events[cid].get("round", 0) <= state["round"]]
    for cid in missing:
        v(f"candidate {cid} is journaled for a checkpointed round but missing from {cp_name}")
    cp_events = [e["data"]["round"] for e in events if e["kind"] == "checkpoint"]
    on_disk = [k for k, _ in checkpoints_of(run_dir)]
    if sorted(set(cp_events)) != on_disk:
        v(f"checkpoints on disk {on_disk} do not match the journal's {sorted(set(cp_events))}")
    else:
        rep.findings.append(f"checkpoints: {len(on_disk)} rounds, matching the journal; "
                            f"{len(solutions)} candidates match their hashes")
    return solutions


def _check_logs(events: list[dict[str, Any]], rep: AuditReport) -> None:
    """Every verdict has its grader logs."""
    graded = [e["data"] for e in events if e["kind"] == "verdict" and not e["data"].get("reused")]
    for d in graded:
        log_dir = d["verdict"].get("log_dir")
        if not log_dir or not (Path(log_dir) / "verdict.json").is_file():
            rep.violations.append(f"verdict of {d['content_hash'][:12]} ({d.get('label') or 'search'}, {d['grader']}): "
                                  f"grader logs missing at {log_dir}")
    rep.stats["verdicts"] = len(graded)
    rep.findings.append(f"verdicts: {len(graded)} gradings recorded")


def _check_final(run_dir: Path, run: dict[str, Any], events: list[dict[str, Any]],
                 solutions: dict[str, dict[str, Any]], rep: AuditReport) -> None:
    """final/ is the best candidate, and its final grading counts (or a person decided it)."""
    v, f = rep.violations.append, rep.findings.append
    best = run.get("best") or {}
    if not best.get("id"):
        return
    s = solutions.get(best["id"])
    if s is None:
        v(f"final: the best candidate {best['id']} is not in the population")
    else:
        _check_final_files(run_dir, best["id"], s, solutions.get("baseline", {}).get("files", {}), rep)
        f(f"final: {best['id']} matches final/")
    final_labels = ("final-hidden", "final-regrade")
    for g in flagged(events):
        if g["candidate_id"] == best["id"] and g["label"] in final_labels and not g["counts"]:
            if g["review"] is None:
                v(f"final: the pick {best['id']}'s {g['label']} grading does not count ({'; '.join(g['reasons'])}), "
                  "yet it was picked")
            else:
                f(f"final: a person {g['review']['decision']}ed the pick {best['id']} afterwards: {g['review']['why']}")


def _check_final_files(run_dir: Path, best_id: str, s: dict[str, Any], base: dict[str, str], rep: AuditReport) -> None:
    """final/files/ holds the pick's code, and final/candidate.patch makes it from the baseline."""
    v = rep.violations.append
    for rel, text in s["files"].items():
        p = run_dir / "final" / "files" / rel
        if not p.is_file() or p.read_text() != text:
            v(f"final/files/{rel} differs from candidate {best_id}")
    patch = run_dir / "final" / "candidate.patch"
    if patch.is_file() and base:
        try:
            applied = apply_diff(patch.read_text(), dict(base))
            if {k: t for k, t in applied.items() if t is not None} != {**base, **s["files"]}:
                v("final/candidate.patch applied to the baseline does not give the best candidate")
        except Exception as e:  # noqa: BLE001 - any failure to apply is the finding
            v(f"final/candidate.patch does not apply to the baseline: {e}")


def _check_reviews(events: list[dict[str, Any]], rep: AuditReport) -> None:
    """A person's decisions: each names a graded candidate, decides, and says why."""
    problems, n_reviews = check_reviews(events)
    for problem in problems:
        rep.violations.append(f"journal: {problem}")
    if n_reviews and not problems:
        rep.findings.append(f"reviews: {n_reviews} decision(s), each naming a graded candidate, with its why")
    rep.stats["reviews"] = n_reviews


def _check_secrets(run_dir: Path, rep: AuditReport) -> None:
    for p in sorted(run_dir.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.stat().st_size < 8 << 20:
            names = find_secrets(p.read_text(errors="replace"))
            if names:
                rep.violations.append(f"{p.relative_to(run_dir)}: holds a secret ({', '.join(names)})")


def check_prompts(run_dir: Path, task: Task, events: list[dict[str, Any]], rep: AuditReport) -> None:
    """Every prompt the run sent (and wrote): nothing of tests/, nor the anchor's digits, nor a
    figure computed from the anchor."""
    guard = LeakGuard(task)
    figures = anchor_figures(task, events)
    sent, anchored = 0, 0

    def check(where: str, text: str) -> None:
        nonlocal anchored
        found = anchored_in(figures, guard, text)
        anchored += bool(found)
        found = guard.leaks(text) + found
        if found:
            rep.violations.append(f"prompt leak in {where}: {found[0]}")

    # In journal order, as the run screened them: the model's earlier answers are its own text.
    for e in events:
        if e["kind"] != "llm_call":
            continue
        d = e["data"]
        for m in d.get("messages") or []:
            sent += 1
            check(str(d.get("tag") or d.get("role")), m["content"])
        guard.learn(d.get("text"))
    for p in sorted(run_dir.glob("rounds/**/*prompt.md")):
        check(str(p.relative_to(run_dir)), p.read_text(errors="replace"))
    anchors = ", ".join(f"{a:g}" for a in figures.anchors) or "none known"
    if not anchored:
        rep.findings.append(f"anchor check: no figure computed from the anchor ({anchors}) in a prompt, of "
                            f"{len(figures.flagged)} such rendering(s) recomputed from the journal's verdicts")
    withheld = sum(len(e["data"].get("items") or []) for e in events if e["kind"] == "withheld")
    rep.findings.append(f"leak check: {sent} prompts sent hold nothing of tests/ nor the anchor"
                        + (f"; {withheld} line(s) were withheld from them (journal: withheld)" if withheld else ""))


def anchor_figures(task: Task, events: list[dict[str, Any]]) -> AnchorFigures:
    """The figures of every verdict journaled that depend on the anchor: the package's own, and the
    one each hidden grading recorded; less the figures the anchor does not decide (speedups, the dev
    engine's own figures, which the package's loop prints by design)."""
    verdicts = [e["data"] for e in events if e["kind"] == "verdict"]
    anchors = [task.anchor.value] + [d["verdict"].get("ref_speedup") for d in verdicts if d.get("grader") != "dev"]
    figures = AnchorFigures(anchors=[float(a) for a in anchors if isinstance(a, (int, float))])
    for d in verdicts:
        v = d["verdict"]
        dev = DevFigure.model_validate(v["dev"]) if isinstance(v.get("dev"), dict) else None
        for own in (v.get("speedup"),
                    *((dev.value, dev.baseline, dev.engine_reward, dev.engine_speedup) if dev else ())):
            figures.own(own)
    for d in verdicts:
        figures.add(d["verdict"].get("speedup"), d["verdict"].get("reward"))
    return figures


def anchored_in(figures: AnchorFigures, guard: LeakGuard, text: str) -> list[str]:
    """The anchored figures a prompt holds, in words (the model's own lines apart: its code is its own)."""
    return [f"a figure computed from the anchor: {x}" for ln in text.splitlines() if not guard.authored(ln)
            for x in figures.find(ln)]


def audit(path: Path) -> AuditReport:
    path = path.resolve()
    if (path / "run.json").is_file() and (path / "journal.jsonl").is_file():
        return audit_run(path)
    if is_loongflow_trace(path):
        report = audit_loongflow(path)
        return AuditReport(kind="loongflow", path=str(path), findings=report.findings, violations=report.violations,
                           stats=report.stats)
    raise FileNotFoundError(f"{path} is neither a pesflow run directory (run.json + "
                            "journal.jsonl) nor a LoongFlow trace")
