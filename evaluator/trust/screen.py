"""The trust stage of a grading: one place that turns what every screen saw into `trust`.

The evaluator asks it twice: before grading, for the guard's config (what the backend puts
into the sandbox); after, with the grading's events, for the verdict's trust. In between it
may run the probes through the Prober it is given: fresh processes in the grading's own
sandbox once the grader is over (a backend that can follow up, the local one), else one more
grading of the same candidate through the same backend with the probe script instead of the
grader, so every backend that carries a GradeRequest's guard carries the probes too. It never
touches the grader's figures.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from evaluator.backends.base import GradeRun
from evaluator.config import TrustConfig
from evaluator.trust import instrument, runtime, static
from evaluator.trust.findings import AT_REWARD_CAP, NOT_REPRODUCED, REVIEW, Finding, Trust

Prober = Callable[[dict[str, Any], dict[str, Path], str, float], GradeRun]  # config, files, command, timeout -> run

SCREENED_MODES = ("candidate", "oracle", "negative")  # noop is the baseline: the reference point, not a result
MAX_PROBE_RECORDS = 6
WARM_MIN_IMPORT_SEC = 0.5  # what a probe's imports must cost for the warm probe to pay for its own start


class TrustScreen:
    def __init__(self, config: TrustConfig, cache: Path):
        self.config = config
        self.cache = cache  # where an oracle's speedup measured here is kept (the plausibility reference)

    def guard_config(self, mode: str, source_root: str, scope_texts: dict[str, str | None],
                     baseline: dict[str, str | None], env: dict[str, str], warm_key: str = "") -> dict[str, Any] | None:
        """The guard's config for one grading, with the warm probe's: the baseline's installed
        imports, done beside the grader where a probe of this package was seen to spend
        WARM_MIN_IMPORT_SEC importing them (torch: seconds), else once the grader is over (numpy's
        tenth of a second beside the grader cost it more than it saved: on a machine of two cores
        the imports slowed the grader), overlapping the host's reading of the grading."""
        if not (self.config.enabled and self.config.runtime) or mode not in SCREENED_MODES:
            return None
        cfg = instrument.guard_config(source_root, scope_texts, baseline, env, record=self.config.probes)
        cfg["draws"] = instrument.draw_secret()
        if self.config.probes and self.config.warm_probe:
            seen = _read_json(self._imports_file(warm_key)) if warm_key else None
            cfg["warm_modules"] = runtime.imported_packages(baseline)
            cfg["warm"] = "grader" if seen and float(seen.get("seconds") or 0) >= WARM_MIN_IMPORT_SEC else "after"
        return cfg

    def judge(self, *, mode: str, task_key: str, run: GradeRun | None, files: dict[str, str | None],
              baseline: dict[str, str | None], references: dict[str, list[str]], correct: bool,
              speedup: float | None, anchor: float | None, prober: Prober | None, log_dir: Path,
              baseline_scale: bool = True, warm_key: str = "", graders: str = "",
              profile: dict[str, Any] | None = None, timed: bool = True) -> Trust:
        """`references`: for a scope file, texts whose outputs the candidate's must match
        (the baseline's first, then the package's reference). `speedup` is over the baseline
        when `baseline_scale`, else the dev engine's own figure. `graders`: the grader's own
        scripts' text (written.grader_text), whose planted files are the grader's. `profile`: the
        probe also profiles the candidate ({"budget_sec"}: evaluator/profile.py), and a correct
        grading the probes would pass over is replayed for its profile alone. `timed`: the figure is
        a time (watch.figure_kind), which pesflow's own clock can reproduce; a count is not."""
        if not self.config.enabled or mode not in SCREENED_MODES:
            return Trust(checks={"screened": False})
        findings: list[Finding] = []
        checks: dict[str, Any] = {"screened": True}
        callables = runtime.baseline_callables(baseline)  # functions whose contract is to return one
        if self.config.static and files:
            found, checks["static"] = static.screen(files, baseline)
            findings += found
        if run is not None and self.config.runtime:
            found, checks["runtime"] = runtime.read(run.trust_events, runtime.baseline_classes(baseline), callables, graders)
            findings += found
        reference = self.reference_speedup(task_key, anchor)
        # the oracle is the reference itself; an anchor at or below 1 is none (the format's own rule)
        implausible = bool(mode != "oracle" and speedup and reference and reference > 1
                           and speedup > self.config.plausibility_ratio * reference)
        # on the package's own scale: the benchmark's reward is capped at a speedup of the anchor
        # squared, which can lie under the ratio's line (an anchor under 3): a cheat would take the
        # whole reward there unflagged, so a figure there needs a person too
        capped = bool(self.config.review_at_reward_cap and mode != "oracle" and baseline_scale and speedup and anchor and anchor > 1 and speedup >= anchor ** 2
                      and not implausible)
        checks["plausibility"] = {"speedup": speedup, "reference": reference, "ratio": self.config.plausibility_ratio,
                                  "implausible": implausible, "reward_cap": anchor ** 2 if anchor and anchor > 1 else None,
                                  "at_reward_cap": capped}
        # Probes for what could become a result: correct, and faster than the baseline (or of
        # unknown speed); a grading no faster than the baseline gains nothing from a cheat.
        worth = speedup is None or not baseline_scale or speedup > 1.0 or implausible or capped
        far = None  # a figure pesflow's own clock comes short of, for a person (not_reproduced)
        if profile:  # the baseline's profile beside the candidate's: only the frozen baseline's, never the package's reference's
            profile = {**profile, "baseline_texts": {t for t in baseline.values() if t}}
        if run is not None and self.config.probes and correct and prober is not None and worth:
            # every probe only for an implausible figure with nothing found yet: a grading already
            # suspect needs no more evidence than the quick probes give, nor their minute
            # the figure timed again with pesflow's clock, where it is large enough to be out of reach
            reproduce = bool(self.config.reproduce_ratio and timed and baseline_scale and speedup
                             and speedup > self.config.reproduce_ratio)
            found, checks["probes"] = self._probe(run, references, (implausible or capped) and not findings, prober, log_dir,
                                                  callables, graders, profile,
                                                  reproduce={"budget_sec": self.config.reproduce_sec,
                                                             "baseline_texts": {t for t in baseline.values() if t}}
                                                  if reproduce else None)
            findings += found
            if reproduce and isinstance(checks["probes"].get("pace"), list):
                miss, far, checks["probes"]["reproduced"] = not_reproduced(
                    checks["probes"]["pace"], float(speedup or 0), self.config.reproduce_ratio, self.config.reproduce_suspect_ratio)
                findings += [miss] if miss else []
            if warm_key and checks["probes"].get("ran") and not checks["probes"].get("error"):
                self.keep_import_cost(warm_key, checks["probes"])
        elif run is not None and self.config.probes and prober is not None and profile:  # asked for a correct one only
            self._probe(run, references, False, prober, log_dir, callables, graders, profile, only_profile=True)
        if mode == "oracle" and speedup and not findings:
            self._keep_oracle(task_key, speedup)
        trust = Trust.of(findings, checks, needs_review=bool(implausible or capped or far))
        if trust.needs_review and far:
            trust.reasons = [far]
        elif trust.needs_review and implausible:
            trust.reasons = [f"{REVIEW}: speedup {speedup:.4g} is over {self.config.plausibility_ratio:g}x the "
                             f"reference's {reference:.4g} and passed every probe; a person should look"]
        elif trust.needs_review:
            trust.reasons = [f"{AT_REWARD_CAP}: speedup {speedup:.4g} reaches the benchmark's reward cap (the anchor squared) "
                             f"and passed every probe; a person should look"]
        return trust

    # ------------------------------------------------------------------ probes
    def _probe(self, run: GradeRun, references: dict[str, list[str]], full: bool, prober: Prober,
               log_dir: Path, callables: set[str], graders: str = "", profile: dict[str, Any] | None = None,
               only_profile: bool = False, reproduce: dict[str, Any] | None = None) -> tuple[list[Finding], dict[str, Any]]:
        # a function whose contract is to return a function (a decorator factory) has no output to check
        recs = [r for r in runtime.records(run.trust_events, run.trust_socket) if r.get("fn") not in callables]
        if not recs:
            return [], {"ran": False, "why": "no call into the candidate was kept"}
        chosen = _spread(recs, MAX_PROBE_RECORDS if full else 2)
        folder = log_dir / "trust"
        files: dict[str, Path] = {}
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
            entries.append({**{k: r.get(k) for k in ("sha256", "size", "fn", "module", "file", "n", "argv", "cwd", "sys_path", "cls")},
                            "name": name, **_got(src, r.get("got"), folder, i, files)})
        if not entries:
            return [], {"ran": False, "why": "the kept inputs did not come back"}
        refs: dict[str, list[str]] = {}
        base_refs: list[str] = []  # the modules whose first reference is the frozen baseline (the profile's comparison)
        for e in entries:
            texts = references.get(_scope_key(str(e["file"]), references), [])
            if e["file"] in refs:
                continue
            for j, text in enumerate(texts):
                name = f"reference-{abs(hash(e['file'])) % 10**8}-{j}.py"
                path = folder / name
                path.write_text(text)
                files[name] = path
                refs.setdefault(e["file"], []).append(f"{instrument.CONFIG_DIR}/{name}")
                if j == 0 and text in (profile or reproduce or {}).get("baseline_texts", ()):
                    base_refs.append(e["file"])
        budget = self.config.full_probe_budget_sec if full else self.config.probe_budget_sec
        exe = next((r.get("exe") for r in chosen if r.get("exe")), None) or "python3"
        limit = budget + 60
        if profile:  # its calls, the baseline's, and an ncu replay at most (pesflow_profile.py)
            limit += float(profile["total_sec"]) + 10
        if reproduce:  # the timing, and a slow last round past its budget
            limit += 2 * float(reproduce["budget_sec"]) + 10
        varied = [{k: v.get(k) for k in ("fn", "file", "n", "later", "argv")} for v in runtime.records(run.trust_events, run.trust_socket, "varied")]
        config = {"probe": {"records": entries, "references": refs, "budget_sec": budget, "full": full, "exe": exe, "varied": varied[:16],
                            **({"profile": {"budget_sec": profile["budget_sec"], "total_sec": profile["total_sec"],
                                            "baseline_refs": base_refs},
                                "only_profile": only_profile} if profile else {}),
                            **({"pace": {"budget_sec": reproduce["budget_sec"], "baseline_refs": base_refs}} if reproduce else {})},
                  "record": False, "out_dir": instrument.OUT_DIR, "socket": instrument.SOCKET,
                  "candidate_paths": {}, "candidate_hashes": {}}
        files.update(instrument.probe_files())
        command = instrument.probe_command(str(exe), same_sandbox=bool(getattr(prober, "same_sandbox", False)))
        t_ask = time.time()
        probe_run = prober(config, files, command, limit)
        t_back = time.time()
        result = _read_json(log_dir / "probe" / "trust" / "probe.json")
        checks: dict[str, Any] = {"ran": True, "full": full, "inputs": len(entries), "seconds": round(probe_run.seconds, 3)}
        if result is None:
            checks["error"] = (probe_run.infra_error or probe_run.output.strip().splitlines()[-1:] or ["no output"])[0][:300] \
                if not probe_run.timed_out else "the probes ran past their time"
            return [], checks
        checks.update(result.get("checks") or {})
        wall = checks.pop("wall", None)
        if isinstance(wall, list) and len(wall) == 2:  # one host's clock: the handing over, either side of the probe
            checks["handover"] = {"to_start": round(float(wall[0]) - t_ask, 3), "from_end": round(t_back - float(wall[1]), 3),
                                  **_after_end(probe_run.notes, float(wall[1]))}
        said = [n[6:] for n in probe_run.notes if n.startswith("warm: ")]  # the local backend's warm probe
        if said:
            checks["warm"] = {**(checks["warm"] if isinstance(checks.get("warm"), dict) else {}), "said": said}
        found = [Finding(rule=str(f[0]), evidence=str(f[1])[:300], screen="probe")
                 for f in result.get("findings") or [] if isinstance(f, list) and len(f) == 2]
        # the guard watched the probe's process too (and a backend's look at what was written, the grader's own let through)
        extra, _ = runtime.read(probe_run.trust_events, set(), graders=graders)
        return found + [f for f in extra if f.family != "lazy_output"], checks

    # ------------------------------------------------------------------ what a probe's imports cost
    def _imports_file(self, warm_key: str) -> Path:
        return self.cache / "trust" / f"imports-{warm_key}.json"

    def keep_import_cost(self, warm_key: str, checks: dict[str, Any]) -> None:
        """What this package's probe spent importing installed packages: what the warm probe
        preloaded (so that a package that pays for it keeps it), else a cold probe's imports of
        what its inputs hold (never the candidate's own module: its cost is the candidate's)."""
        warm = checks.get("warm") if isinstance(checks.get("warm"), dict) else {}
        if warm.get("preloaded"):
            seconds = sum(float(t) for _, t in warm["preloaded"])
        elif isinstance(checks.get("loads"), list):
            seconds = sum(float(t) for n, t in checks["loads"] if n in ("numpy", "torch"))
        else:
            return
        p = self._imports_file(warm_key)
        p.parent.mkdir(parents=True, exist_ok=True)
        # a name of its own: gradings in parallel threads of one process write it at once (a
        # pid-named one was renamed away under the other, and that grading raised)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=p.name + ".", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({"seconds": round(seconds, 4)}))
        os.replace(tmp, p)  # whole or absent

    # ------------------------------------------------------------------ the plausibility reference
    def _oracle_file(self, task_key: str) -> Path:
        return self.cache / "trust" / f"oracle-{task_key}.json"

    def _keep_oracle(self, task_key: str, speedup: float) -> None:
        p = self._oracle_file(task_key)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"speedup": speedup}))

    def reference_speedup(self, task_key: str, anchor: float | None) -> float | None:
        """The package's oracle as measured here (same grader and device), else its anchor."""
        got = _read_json(self._oracle_file(task_key))
        if got and isinstance(got.get("speedup"), (int, float)) and got["speedup"] > 0:
            return float(got["speedup"])
        return anchor


def _scope_key(file: str, references: dict[str, list[str]]) -> str:
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


def not_reproduced(rows: list[Any], speedup: float, review: float, suspect: float) -> tuple[Finding | None, str | None, float | None]:
    """(a finding or None, a review reason or None, pesflow's own ratio): the grader's speedup over
    the baseline against pesflow's timing of the same calls (pesflow_probe_pace.py). A workload's
    figure is no larger than its best case's, so the largest of pesflow's ratios is the one to
    reach; the calls timed may miss the workload's best case, and a figure can be a count that a
    clock does not follow, so a figure past `suspect` times that ratio is not reproduced (not a
    result), one past `review` times needs a person. Both lines are also figures themselves: a
    candidate pesflow times slower than the baseline is not called out for a figure of 1.5."""
    ratios = [float(r[3]) / float(r[2]) for r in rows
              if isinstance(r, list) and len(r) == 5 and float(r[2]) > 0 and float(r[3]) > 0]
    if not ratios:
        return None, None, None
    mine = max(ratios)
    said = f"the grader's speedup {speedup:.4g}; pesflow's own clock, timing candidate and baseline on the timing pass's inputs, " \
           f"{mine:.4g} at most ({len(ratios)} calls)"
    if speedup > suspect * max(mine, 1.0):
        return Finding(rule="probe.speed_not_reproduced", screen="probe", evidence=said), None, round(mine, 4)
    if speedup > review * max(mine, 1.0):
        return None, f"{NOT_REPRODUCED}: {said}; a person should look", round(mine, 4)
    return None, None, round(mine, 4)


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


def _read_json(path: Path) -> dict[str, Any] | None:
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
