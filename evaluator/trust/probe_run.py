"""The probes' I/O: what one grading's probe is given (the kept calls, what the harness got from
them, the references whose outputs the candidate's must match) and what it says back. Which
probes run, and what their findings decide, is the screen's (screen.py); what they check is
the probe's own (inside/pesflow_probe.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from evaluator.grading_records import GradeRun
from evaluator.trust import instrument, runtime
from evaluator.trust.findings import Finding

Prober = Callable[[dict[str, Any], dict[str, Path], str, float], GradeRun]  # config, files, command, timeout -> run

MAX_PROBE_RECORDS = 6


def probe(run: GradeRun, references: dict[str, list[str]], full: bool, budget: float, prober: Prober,
          log_dir: Path, callables: set[str], graders: str = "", profile: dict[str, Any] | None = None,
          only_profile: bool = False, reproduce: dict[str, Any] | None = None) -> tuple[list[Finding], dict[str, Any]]:
    """The probes of one grading, run through `prober` (a process in the grading's sandbox, or a
    grading of its own): the kept calls and what the harness got from them written beside the
    references for the probe's process, then its findings and checks read back. Its budget:
    `budget` seconds, more for a profile and for the figure timed again."""
    # a function whose contract is to return a function (a decorator factory) has no output to check
    recs = [r for r in runtime.records(run.trust_events, run.trust_socket) if r.get("fn") not in callables]
    if not recs:
        return [], {"ran": False, "why": "no call into the candidate was kept"}
    chosen = _spread(recs, MAX_PROBE_RECORDS if full else 2)
    folder = log_dir / "trust"
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    entries = _write_inputs(chosen, folder, files)
    if not entries:
        return [], {"ran": False, "why": "the kept inputs did not come back"}
    baseline_texts = (profile or reproduce or {}).get("baseline_texts", ())
    refs, base_refs = _write_references(entries, references, baseline_texts, folder, files)
    exe = next((r.get("exe") for r in chosen if r.get("exe")), None) or "python3"
    varied = [{k: v.get(k) for k in ("fn", "file", "n", "later", "argv")}
              for v in runtime.records(run.trust_events, run.trust_socket, "varied")]
    config = {"probe": {"records": entries, "references": refs, "budget_sec": budget, "full": full, "exe": exe,
                        "varied": varied[:16],
                        **({"profile": {"budget_sec": profile["budget_sec"], "total_sec": profile["total_sec"],
                                        "baseline_refs": base_refs},
                            "only_profile": only_profile} if profile else {}),
                        **({"pace": {"budget_sec": reproduce["budget_sec"], "baseline_refs": base_refs}} if reproduce
                           else {})},
              "record": False, "out_dir": instrument.OUT_DIR, "socket": instrument.SOCKET,
              "candidate_paths": {}, "candidate_hashes": {}}
    files.update(instrument.probe_files())
    command = instrument.probe_command(str(exe), same_sandbox=bool(getattr(prober, "same_sandbox", False)))
    t_ask = time.time()
    probe_run = prober(config, files, command, _time_limit(budget, profile, reproduce))
    t_back = time.time()
    return _read_back(probe_run, log_dir, graders, t_ask, t_back,
                      {"ran": True, "full": full, "inputs": len(entries), "seconds": round(probe_run.seconds, 3)})


def _write_inputs(chosen: list[dict[str, Any]], folder: Path, files: dict[str, Path]) -> list[dict[str, Any]]:
    """Each chosen call's input (and what the harness got), cut out of the grading's record in
    `folder` for the probe; its record for the probe's config. A call whose input did not come back
    whole is left out."""
    entries = []
    for i, r in enumerate(chosen):
        src = folder / Path(str(r.get("path"))).name
        try:
            with open(src, "rb") as f:
                f.seek(int(r["offset"]))
                blob = f.read(int(r["size"]))
        except (OSError, KeyError, ValueError):
            continue
        name = f"input-{i}.pkl"
        (folder / name).write_bytes(blob)
        files[name] = folder / name
        if len(blob) != int(r["size"]):  # cut short on its way out (a copy limit): not the candidate's doing
            continue
        entries.append(
            {**{k: r.get(k) for k in ("sha256", "size", "fn", "module", "file", "n", "argv", "cwd", "sys_path", "cls")},
             "name": name, **_got(src, r.get("got"), folder, i, files)})
    return entries


def _write_references(entries: list[dict[str, Any]], references: dict[str, list[str]], baseline_texts: Any,
                      folder: Path, files: dict[str, Path]) -> tuple[dict[str, list[str]], list[str]]:
    """The references of each module a kept call went into, written for the probe: their paths
    in the probe's config by module, and the modules whose first reference is the frozen
    baseline (the profile's comparison)."""
    refs: dict[str, list[str]] = {}
    base_refs: list[str] = []
    for e in entries:
        texts = references.get(scope_key(str(e["file"]), references), [])
        if e["file"] in refs:
            continue
        for j, text in enumerate(texts):
            name = f"reference-{abs(hash(e['file'])) % 10**8}-{j}.py"
            path = folder / name
            path.write_text(text)
            files[name] = path
            refs.setdefault(e["file"], []).append(f"{instrument.CONFIG_DIR}/{name}")
            if j == 0 and text in baseline_texts:
                base_refs.append(e["file"])
    return refs, base_refs


def _time_limit(budget: float, profile: dict[str, Any] | None, reproduce: dict[str, Any] | None) -> float:
    limit = budget + 60
    if profile:  # its calls, the baseline's, and an ncu replay at most (pesflow_profile.py)
        limit += float(profile["total_sec"]) + 10
    if reproduce:  # the timing, and a slow last round past its budget
        limit += 2 * float(reproduce["budget_sec"]) + 10
    return limit


def _read_back(probe_run: GradeRun, log_dir: Path, graders: str, t_ask: float, t_back: float,
               checks: dict[str, Any]) -> tuple[list[Finding], dict[str, Any]]:
    """The probe's findings and `checks` completed: its own, the handing over's times, the
    warm probe's notes; or why it said nothing."""
    result = read_json(log_dir / "probe" / "trust" / "probe.json")
    if result is None:
        checks["error"] = ((probe_run.infra_error or probe_run.output.strip().splitlines()[-1:]
                            or ["no output"])[0][:300]
                           if not probe_run.timed_out else "the probes ran past their time")
        return [], checks
    checks.update(result.get("checks") or {})
    wall = checks.pop("wall", None)
    if isinstance(wall, list) and len(wall) == 2:  # one host's clock: the handing over, either side of the probe
        checks["handover"] = {"to_start": round(float(wall[0]) - t_ask, 3),
                              "from_end": round(t_back - float(wall[1]), 3),
                              **_after_end(probe_run.notes, float(wall[1]))}
    said = [n[6:] for n in probe_run.notes if n.startswith("warm: ")]  # the local backend's warm probe
    if said:
        checks["warm"] = {**(checks["warm"] if isinstance(checks.get("warm"), dict) else {}), "said": said}
    found = [Finding(rule=str(f[0]), evidence=str(f[1])[:300], screen="probe")
             for f in result.get("findings") or [] if isinstance(f, list) and len(f) == 2]
    # the guard watched the probe's process too (and a backend's look at what was written, the grader's own let through)
    extra, _ = runtime.read(probe_run.trust_events, set(), graders=graders)
    return found + [f for f in extra if f.family != "lazy_output"], checks


def scope_key(file: str, references: dict[str, list[str]]) -> str:
    """The scope file a module was loaded from: its own path, or the one path that ends the same
    way (the package installs the repository elsewhere: site-packages holds a copy of the scope)."""
    if file in references:
        return file
    parts = PurePosixPath(file).parts

    def common(key: str) -> int:
        n = 0
        for a, b in zip(reversed(parts), reversed(PurePosixPath(key).parts)):
            if a != b:
                break
            n += 1
        return n
    scored = sorted(((common(k), k) for k in references), reverse=True)
    if scored and scored[0][0] >= 2 and (len(scored) == 1 or scored[1][0] < scored[0][0]):
        return scored[0][1]
    return file


def _got(src: Path, got: Any, folder: Path, i: int, files: dict[str, Path]) -> dict[str, Any]:
    """The output the harness got from a kept call, beside its input for the probe ({} where
    none was kept; a note where the guard saw its inputs change after the call)."""
    if isinstance(got, str):
        return {"got_note": got[:100]}
    if not isinstance(got, dict):
        return {}
    try:
        with open(src, "rb") as f:
            f.seek(int(got["offset"]))
            blob = f.read(int(got["size"]))
    except (OSError, KeyError, ValueError, TypeError):
        return {}
    if len(blob) != int(got["size"]):
        return {}
    name = f"got-{i}.pkl"
    (folder / name).write_bytes(blob)
    files[name] = folder / name
    return {"got": {"name": name, "sha256": str(got.get("sha256")), "size": len(blob)}}


def _spread(recs: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Up to n kept calls, from as many processes (passes) as there are, the latest of each first."""
    by_pid: dict[Any, list[dict[str, Any]]] = {}
    for r in recs:
        by_pid.setdefault(r.get("pid"), []).append(r)
    queues = [sorted(v, key=lambda r: -int(r.get("n") or 0)) for v in by_pid.values()]
    out: list[dict[str, Any]] = []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        v = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return v if isinstance(v, dict) else None


def _after_end(notes: list[str], end: float) -> dict[str, float]:
    """Where the time after the probe's last line went, from the local backend's marks (one
    clock): its process gone (the warm probe's), every process reaped, its files copied out."""
    out: dict[str, float] = {}
    for note in notes:
        words = note.replace("warm: ", "", 1).replace("follow: ", "", 1).split()
        if len(words) == 2 and words[0] in ("gone", "reaped", "copied"):
            try:
                out[words[0]] = round(float(words[1]) - end, 3)
            except ValueError:
                pass
    return out
