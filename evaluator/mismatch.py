"""How a wrong answer is wrong, for the model: a stage after a dev grading whose correctness gate
failed (the commonest kernel failure, an answer that is wrong and raises nothing, of which the
package says one sentence).

On calls the runtime guard kept from the dev engine's run (their inputs, as the trust probes get
them), a fresh process of ours calls the candidate's entry point and the frozen baseline's on
copies of the same inputs (inside/pesflow_mismatch.py), in the grading's own sandbox once the
grader is over (a fresh one of the same candidate where the backend cannot follow up): never in a
process the grader measures, and nothing of it goes into the verdict's figures, status or trust.
What it says becomes Verdict.mismatch: a few lines a prompt shows (arrays: shape, dtype, largest
errors, first index off, share off under pesflow's tolerance; other values: the first path that
differs and both values, cut short; inputs by kind and shape only), or one line on why there is
no comparison. Only the dev engine's calls are kept: nothing of the hidden grader's tests/.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evaluator.grading_records import GradeRun
from evaluator.trust import instrument, runtime
from evaluator.trust.inside import pesflow_probe_values as values  # the one tolerance, the sandbox's too
from evaluator.trust.probe_run import Prober, read_json, scope_key

SCRIPT = "pesflow_mismatch.py"
FILES = (SCRIPT, "pesflow_probe_inputs.py", "pesflow_probe_values.py")  # carried into CONFIG_DIR, loaded from there
OUT_FILE = "mismatch.json"  # the script's, in the prober's out folder (log_dir/probe/trust)
MAX_CALLS = 8  # kept calls handed over: a few of each entry point
MAX_INPUT_BYTES = 48 << 20  # of their inputs, together
MAX_SHOWN = 2  # differing calls a prompt is shown
START_SEC = 30.0  # the process's start, imports (torch) and first module loads, beyond the budget
# the gates that say an answer was wrong (as the benchmark's engines name them), not a crash or a build
CORRECTNESS_WORDS = ("correct", "mismatch", "wrong", "differ")
TOLERANCE = (f"pesflow's tolerance, not the package's: floats |x-y| <= {values.ATOL:g} + "
             f"{values.RTOL:g}*|y| (16-bit floats {values.LOOSE_ATOL:g} + {values.LOOSE_RTOL:g}*|y|), "
             "integers, text and other values exact")


class Mismatch(BaseModel):
    """Verdict.mismatch: how a dev grading's wrong answer differs from the frozen baseline's."""

    lines: list[str] = Field(default_factory=list)  # what a prompt shows: the comparison, or why there is none
    compared: int = 0  # kept calls answered by both
    differ: int = 0  # of which the candidate's answer differs
    why: str | None = None  # no comparison: why
    seconds: float | None = None


def wanted(grader: str, status: str, reasons: list[str]) -> bool:
    """A dev grading failed by a correctness gate: the answers are worth comparing."""
    return grader == "dev" and status == "hard_fail" and any(w in r.lower() for r in reasons for w in CORRECTNESS_WORDS)


def none(why: str) -> Mismatch:
    return Mismatch(why=why, lines=[f"(no comparison with the frozen baseline's answers: {why})"])


def chosen(run: GradeRun, callables: set[str], baseline: dict[str, str]) -> list[dict[str, Any]]:
    """The kept calls to compare: plain functions of a scope file the candidate changed, a few of
    each entry point (round robin, the smaller inputs first: they answer fast), their inputs bounded."""
    recs = [r for r in runtime.records(run.trust_events, run.trust_socket)
            if not r.get("cls") and r.get("fn") not in callables
            and scope_key(str(r.get("file")), baseline) in baseline]
    by_fn: dict[tuple, list[dict[str, Any]]] = {}
    for r in sorted(recs, key=lambda r: int(r.get("size") or 0)):
        by_fn.setdefault((r.get("file"), r.get("fn")), []).append(r)
    out: list[dict[str, Any]] = []
    total = 0
    while len(out) < MAX_CALLS and any(by_fn.values()):
        for queue in by_fn.values():
            if queue and len(out) < MAX_CALLS and total + int(queue[0].get("size") or 0) <= MAX_INPUT_BYTES:
                total += int(queue[0].get("size") or 0)
                out.append(queue.pop(0))
            elif queue:
                queue.clear()  # too large to carry: its other calls are larger still
    return out


def compare(run: GradeRun, baseline: dict[str, str], prober: Prober, log_dir: Path, budget: float,
            callables: set[str], restore: tuple[dict[str, str], dict[str, Path]]) -> Mismatch:
    """The comparison of one failed grading, through `prober` (a process in its sandbox, or a grading
    of its own). `baseline`: sandbox path of each changed scope file -> the frozen baseline's text;
    `restore`: the scope files as graded (sandbox path -> file name, and those files)."""
    recs = chosen(run, callables, baseline)
    if not recs:
        return none("the guard kept no call into a function of the scope files the candidate changed")
    folder = log_dir / "trust"
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {name: instrument.INSIDE / name for name in FILES}
    files.update(restore[1])
    entries, bases = [], {}
    kept = folder
    for i, r in enumerate(recs):
        try:
            with open(kept / Path(str(r.get("path"))).name, "rb") as f:
                f.seek(int(r["offset"]))
                blob = f.read(int(r["size"]))
        except (OSError, KeyError, ValueError):
            continue
        if len(blob) != int(r["size"]):
            continue
        name = f"mismatch-input-{i}.pkl"
        (folder / name).write_bytes(blob)
        files[name] = folder / name
        key = scope_key(str(r["file"]), baseline)
        if key not in bases:
            bases[key] = f"mismatch-baseline-{len(bases)}.py"
            (folder / bases[key]).write_text(baseline[key])
            files[bases[key]] = folder / bases[key]
        entries.append(
            {**{k: r.get(k) for k in ("sha256", "size", "fn", "module", "file", "n", "argv", "cwd", "sys_path")},
             "name": name, "baseline_key": key})
    if not entries:
        return none("the kept inputs did not come back")
    cfg = {"records": entries, "budget_sec": budget, "restore": restore[0],
           "baseline": {e["file"]: f"{instrument.CONFIG_DIR}/{bases[e['baseline_key']]}" for e in entries}}
    # no "probe" key: a warm probe waiting in the sandbox reads none and leaves the process to this one
    config = {"mismatch": cfg, "record": False, "out_dir": instrument.OUT_DIR, "socket": instrument.SOCKET,
              "candidate_paths": {}, "candidate_hashes": {}}
    exe = next((r.get("exe") for r in recs if r.get("exe")), None) or "python3"
    command = instrument.probe_command(str(exe), same_sandbox=bool(getattr(prober, "same_sandbox", False)),
                                       module=SCRIPT.removesuffix(".py"))
    out_file = log_dir / "probe" / "trust" / OUT_FILE
    out_file.unlink(missing_ok=True)
    t0 = time.monotonic()
    done = prober(config, files, command, budget + START_SEC)
    result = read_json(out_file)
    if result is None:
        tail = (done.infra_error or done.output.strip().splitlines()[-1:] or ["no output"])[0][:200]
        return none("the comparison ran past its time" if done.timed_out else f"the comparison failed: {tail}")
    return said(result.get("calls") or [], round(time.monotonic() - t0, 3))


def said(calls: list[dict[str, Any]], seconds: float) -> Mismatch:
    """The script's per-call results as the lines a prompt shows."""
    answered = [c for c in calls if c.get("said") in ("same", "differs", "candidate_raised")]
    wrong = [c for c in answered if c.get("said") != "same"]
    if not answered:
        whys = sorted({f"{c.get('fn')}: {c.get('why')}" for c in calls if c.get("why")})
        return none("no kept call could be answered by both" + (f" ({'; '.join(whys[:2])})" if whys else ""))
    fns = sorted({str(c.get("fn")) for c in answered})
    m = Mismatch(compared=len(answered), differ=len(wrong), seconds=seconds)
    m.lines.append(f"pesflow called the candidate and the frozen baseline on {len(answered)} of the dev grader's calls "
                   f"({', '.join(fns[:4])}{', ...' if len(fns) > 4 else ''}): {len(wrong)} "
                   f"answered otherwise ({TOLERANCE})")
    for c in wrong[:MAX_SHOWN]:
        where = (f"{c.get('fn')} (call {c.get('n')} of `"
                 f"{' '.join(map(str, c.get('argv') or []))}`; inputs {c.get('inputs')})")
        if c.get("said") == "candidate_raised":
            m.lines.append(f"- {where}: the candidate raised {c.get('why')}; the baseline answered")
        else:
            m.lines.append(f"- {where}:")
            m.lines += [f"  {ln}" for ln in c.get("lines") or []]
    if not wrong:
        m.lines.append("every answer compared matches the baseline's: what the grader rejects lies elsewhere "
                       "(another input, a call not kept, or a property beyond these outputs)")
    return m
