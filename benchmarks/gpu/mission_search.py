"""The mission's command on a real benchmark package, with a scripted model (issue 49, the GPU
"done when"): `pesflow run TASK --tasks-root ROOT --llm openai:gpt-4o-mini [--rounds N] [--set ...]`
as a process of its own, OPENAI_BASE_URL pointing at tests/llm_server.py's ScriptedLLMServer on
127.0.0.1, which answers as benchmarks/engineer_model.py's Engineer (its ladder of the package's
own reference: a raising version, a wrong version, the reference). Then what the run directory
says, read back:

    (1) the parent's per-shape times in the round-1 executor prompts (the lines
        `workload <shape>: baseline ..., candidate ...` under "# The parent's grading")
    (2) the card's measured ceilings (the prompt head's "# The machine the grader runs on")
    (3) the baseline's profile: its `how` (ncu inside the grading's sandbox, or why not) and limiter
    (4) the found best: run.json's best (speedup, reward, grader)

written to COLLECT/mission.json and COLLECT/mission.md, with COLLECT/rundir.tgz holding the key
files of the run directory (run.json, journal, round-1 executor prompts, planner prompts,
verdicts, profiles, final/).

    python3 benchmarks/gpu/mission_search.py --tasks-root ROOT [--task kfc/ssm-selective-scan-firstorder] \
        [--rounds 3] [--out RUNS] [--collect DIR] [--set evaluator.local.install_steps=skip ...]
    python3 benchmarks/gpu/mission_search.py --summarize RUN_DIR --collect DIR   # read a finished run only

The ssm package's ladder lives here (benchmarks/engineer_model.py knows CPU packages only): the
misspelt kernel name raises a NameError when called; the wrong rung drops the chunk's transition
product from the carry between chunks (S = S + H), wrong on every input longer than one chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

SSM = "kfc/ssm-selective-scan-firstorder"
MODEL = "gpt-4o-mini"


def ssm_ladder():
    from engineer_model import Break, Ladder

    return Ladder(
        raise_=Break("state_space_scan.py", "    _chunk_output_kernel[grid](", "    _chunk_outputs_kernel[grid]("),
        name="_chunk_outputs_kernel",
        wrong=Break("state_space_scan.py", "carry = p * carry + h", "carry = carry + h"),
        wrong_what="the chunk's transition product dropped from the carry between chunks (S = S + H)")


def engineer(task_name: str, tasks_root: str):
    """The scripted model of this package: engineer_model's Engineer over the package's ladder."""
    import engineer_model as em

    from evaluator.task import load_task
    from tests.adversarial.reward_hacking.corpus import reference_files

    if task_name == SSM and task_name not in em.LADDERS:
        em.LADDERS[task_name] = ssm_ladder()  # the driver's own rung table, beside the model's
    if task_name not in em.LADDERS:
        raise SystemExit(f"no ladder for {task_name}: engineer_model.LADDERS has {sorted(em.LADDERS)}")
    task = load_task(task_name, [tasks_root])
    ladder = em.rungs(task_name, reference_files(task))
    return em.Engineer(task_name, ladder)


def run_search(args) -> tuple[Path | None, int, dict[str, Any]]:
    """`pesflow run` as its own process against the scripted server; (run dir, exit code, model facts)."""
    from tests.llm_server import ScriptedLLMServer

    model = engineer(args.task, args.tasks_root)
    cmd = [sys.executable, "-m", "agent.cli", "run", args.task, "--tasks-root", args.tasks_root, "--llm", f"openai:{MODEL}"]
    if args.rounds is not None:
        cmd += ["--rounds", str(args.rounds)]
    if args.out:
        cmd += ["--out", args.out]
    for kv in args.set:
        cmd += ["--set", kv]
    run_dir, log = None, Path(args.collect) / "pesflow-run.log"
    t0 = time.monotonic()
    with ScriptedLLMServer(model) as srv:
        env = {**os.environ, "OPENAI_BASE_URL": srv.openai_base_url, "OPENAI_API_KEY": "sk-scripted-server-needs-no-key",
               "PYTHONUNBUFFERED": "1"}
        print("$ OPENAI_BASE_URL=" + srv.openai_base_url + " pesflow " + " ".join(cmd[3:]), flush=True)
        with log.open("w") as fh:
            fh.write("$ OPENAI_BASE_URL=" + srv.openai_base_url + " pesflow " + " ".join(cmd[3:]) + "\n")
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in proc.stdout:  # type: ignore[union-attr]
                fh.write(line)
                fh.flush()
                print(line, end="", flush=True)
                if line.startswith("run: "):
                    run_dir = Path(line[5:].strip())
            rc = proc.wait()
        facts = {"requests": len(srv.requests), "server_errors": srv.errors[:5], "unmatched": srv.unmatched[:5],
                 "answers": {f"{r} {g}": n for (r, g), n in sorted(model.answers.items())},
                 "evidence_hits": {f"{r}: {g}": n for (r, g), n in sorted(model.hits.items())},
                 "seconds": round(time.monotonic() - t0, 1), "exit_code": rc, "command": "pesflow " + " ".join(cmd[3:])}
    return run_dir, rc, facts


# ---------------------------------------------------------------- reading the run directory
def section(text: str, heading: str) -> str | None:
    """The text under a `# heading` line up to the next `# ` heading (None where absent)."""
    m = re.search(rf"^# {re.escape(heading)}[^\n]*\n(.*?)(?=^# |\Z)", text, re.DOTALL | re.MULTILINE)
    return m.group(1).strip("\n") if m else None


def prompt_files(run_dir: Path, round_: int, role: str) -> list[Path]:
    base = run_dir / "rounds" / f"{round_:02d}" if (run_dir / "rounds" / f"{round_:02d}").is_dir() else run_dir / "rounds" / str(round_)
    return sorted(p for p in (base / role).rglob("*prompt*") if p.is_file()) if (base / role).is_dir() else []


def verdict_of(run_dir: Path, label: str) -> dict[str, Any] | None:
    """The journal's first verdict with this label (the baseline's: 'baseline')."""
    for ln in (run_dir / "journal.jsonl").read_text().splitlines():
        if not ln.strip():
            continue
        e = json.loads(ln)
        if e["kind"] == "verdict" and e["data"].get("label") == label:
            return {**e["data"], **(e["data"].get("verdict") or {})}
    return None


def profiles(run_dir: Path) -> list[dict[str, Any]]:
    """Every profile.json under evaluations/ (the probe's raw figures), with its path."""
    out = []
    for p in sorted((run_dir / "evaluations").rglob("profile.json")):
        try:
            raw = json.loads(p.read_text())
        except ValueError:
            continue
        out.append({"path": str(p.relative_to(run_dir)), "how": raw.get("how"), "why": raw.get("why"), "ncu": raw.get("ncu"),
                    "limiter": raw.get("limiter")})
    return out


def summarize(run_dir: Path, collect: Path, model: dict[str, Any] | None = None) -> dict[str, Any]:
    run = json.loads((run_dir / "run.json").read_text())
    ex = prompt_files(run_dir, 1, "executor")
    ex_prompts = [p for p in ex if p.name.startswith("prompt")]
    workload, machine, parent = [], None, None
    for p in ex_prompts:
        text = p.read_text()
        sec = section(text, "The parent's grading")
        if sec is not None and parent is None:
            parent = sec
        workload += [ln.strip() for ln in (sec or "").splitlines() if ln.strip().startswith("workload ")]
        machine = machine or section(text, "The machine the grader runs on")
    base = verdict_of(run_dir, "baseline") or {}
    prof = base.get("profile")
    best = run.get("best") or {}
    final = run_dir / "final" / "verdict.json"
    best_profile = (json.loads(final.read_text()).get("profile") if final.is_file() else None)
    out = {
        "run_dir": str(run_dir), "status": run.get("status"), "stopped_by": run.get("stopped_by"),
        "rounds_done": run.get("rounds_done"), "task_source": (run.get("task") or {}).get("source"),
        "machine_run_json": run.get("machine"),
        "executor_prompts_round1": [str(p.relative_to(run_dir)) for p in ex_prompts],
        "parents_grading_round1": parent, "workload_lines_round1": list(dict.fromkeys(workload)),
        "machine_section": machine,
        "baseline_verdict": {k: base.get(k) for k in ("status", "speedup", "grader", "content_hash", "seconds")},
        "baseline_profile": prof, "profile_files": profiles(run_dir),
        "best": {k: best.get(k) for k in ("id", "speedup", "reward", "grader", "dev_speedup", "status", "content_hash",
                                           "dropped", "ref_speedup")} if best else None,
        "best_profile": best_profile, "best_raw": best, "totals": run.get("totals"), "suspects": run.get("suspects"), "model": model,
    }
    (collect / "mission.json").write_text(json.dumps(out, indent=1, default=str))
    (collect / "mission.md").write_text(render(out))
    pack(run_dir, collect / "rundir.tgz")
    return out


def render(s: dict[str, Any]) -> str:
    prof = s.get("baseline_profile") or {}
    lines = [f"run: {s['run_dir']}", f"status: {s['status']} ({s['stopped_by']}), rounds {s['rounds_done']}",
             f"package source: {json.dumps(s['task_source'])}", "",
             "(1) the parent's grading in round 1's executor prompts:",
             *(f"    {ln}" for ln in (s["workload_lines_round1"] or ["(no workload lines)"])), "",
             "(2) the machine section:", *(f"    {ln}" for ln in (s["machine_section"] or "(none)").splitlines()), "",
             f"(3) the baseline's profile: how={prof.get('how')} limiter={prof.get('limiter')} roofline={prof.get('roofline')}",
             *(f"    {ln}" for ln in prof.get("lines") or []),
             *(f"    raw {p['path']}: how={p['how']} ncu={p['ncu']} why={p['why']}" for p in s["profile_files"]), "",
             f"(4) best: {json.dumps(s['best'])}",
             f"    its profile: how={(s.get('best_profile') or {}).get('how')} limiter={(s.get('best_profile') or {}).get('limiter')}",
             *(f"    {ln}" for ln in (s.get("best_profile") or {}).get("lines") or []), "", f"totals: {json.dumps(s['totals'])}",
             f"model: {json.dumps(s['model'])}"]
    return "\n".join(lines) + "\n"


def pack(run_dir: Path, dest: Path) -> None:
    """The run directory's key files (no grader scratch, no checkpoints' solutions)."""
    keep = re.compile(r"^(run\.json|journal\.jsonl|final/.*|rounds/[^/]+/(planner|executor|summarizer)/.*"
                      r"|evaluations/[^/]+/(verdict\.json|profile\.json|.*\.log|.*\.txt|.*\.json))$")
    with tarfile.open(dest, "w:gz") as tar:
        for p in sorted(run_dir.rglob("*")):
            rel = p.relative_to(run_dir).as_posix()
            if p.is_file() and not p.is_symlink() and keep.match(rel) and p.stat().st_size < 4 << 20:
                tar.add(p, arcname=f"rundir/{rel}")


def ncu_check(args) -> int:
    """The package's reference graded once by the dev grader with a profile, its share of the
    grading raised (--profile-share), so that the probe tries an Nsight Compute replay inside the
    grading's sandbox: where the host's ncu is (evaluator/hardware.py), what the profile says."""
    import tempfile

    from evaluator import hardware
    from evaluator.candidate import CandidateSource
    from evaluator.config import EvaluatorConfig, LocalConfig
    from evaluator.evaluation import Evaluator
    from tests.adversarial.reward_hacking.corpus import reference_files

    collect = Path(args.collect)
    cfg = EvaluatorConfig(local=LocalConfig(install_steps="skip"), profile_share=args.profile_share)
    ev = Evaluator(cfg, tasks_roots=[args.tasks_root], log_root=Path(tempfile.mkdtemp(prefix="pesflow-ncu-check-")))
    try:
        task = ev.task(args.task)
        t0 = time.monotonic()
        v = ev.evaluate(task, candidate=CandidateSource(files=reference_files(task)), grader="dev", profile={})
        raw = profiles(Path(v.log_dir).parent) if v.log_dir else []
        raw = [r for r in raw if Path(v.log_dir).name in r["path"]] or raw
        out = {"ncu_install": str(hardware.ncu_install()), "ncu_mount": hardware.NCU_MOUNT, "status": v.status.value,
               "speedup": v.speedup, "grader_seconds": v.grader_seconds, "seconds": round(time.monotonic() - t0, 1),
               "profile_share": args.profile_share, "profile": v.profile, "raw": raw,
               "probes_sandbox": ((v.trust.checks or {}).get("probes") or {}).get("sandbox") if v.trust else None}
        for p in Path(v.log_dir).rglob("profile.json"):
            out["raw_file"] = {k: val for k, val in json.loads(p.read_text()).items() if k in ("how", "ncu", "why", "ncu_kernels")}
            break
    finally:
        ev.close()
    (collect / "ncu-check.json").write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps(out, indent=1, default=str))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks-root")
    ap.add_argument("--task", default=SSM)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--out", default=None, help="pesflow run's --out (default: its own, traces/)")
    ap.add_argument("--collect", default="mission-out", help="where mission.json, mission.md, rundir.tgz and the log go")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to pesflow run")
    ap.add_argument("--summarize", default=None, metavar="RUN_DIR", help="only read a finished run directory")
    ap.add_argument("--ncu-check", action="store_true",
                    help="grade the reference once (dev grader, a profile with --profile-share) and say whether ncu ran")
    ap.add_argument("--profile-share", type=float, default=0.8)
    ap.add_argument("--ladder-only", action="store_true", help="build the package's rungs and print their differences")
    args = ap.parse_args()
    collect = Path(args.collect)
    collect.mkdir(parents=True, exist_ok=True)
    if args.ncu_check:
        return ncu_check(args)
    if args.ladder_only:
        model = engineer(args.task, args.tasks_root)
        for rung in ("raise", "wrong"):
            import engineer_model as em
            print(rung, em._distinct_lines(model.ladder[rung], model.ladder["reference"]))
        return 0
    if args.summarize:
        s = summarize(Path(args.summarize), collect)
        print(render(s))
        return 0
    if not args.tasks_root:
        ap.error("--tasks-root is needed for a search")
    run_dir, rc, facts = run_search(args)
    (collect / "model.json").write_text(json.dumps(facts, indent=1))
    print(json.dumps(facts), flush=True)
    if run_dir is None or not (run_dir / "run.json").is_file():
        print(f"no run directory (exit {rc})", flush=True)
        return rc or 1
    s = summarize(run_dir, collect, facts)
    print(render(s), flush=True)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
