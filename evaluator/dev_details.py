"""The dev engine's own details of a grading, for the model: the checks and cases that failed with
their messages and correct counts, and the time (or count) per workload, baseline against
candidate, wherever the engine writes them (its JSON products and per-case lines of its logs: a
rule of the format, never a package's name); never an anchor or a ref_ figure, never tests/.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

# What the benchmark's dev engines write, by spelling (a rule of the format, never a package's name):
# - correctness_results.json: suites counting their cases (expected_case_count the total,
#   actual_case_count the passed ones, failed), or {passed, total, cases: [{name, passed, message}]};
# - benchmark_results.json: workloads with candidate_X / baseline_X figures and their own speedup;
# - logs (*.log, *.out): per-case lines `CASE_FAIL <name>: <why>`; per-workload lines of key=value
#   tokens naming the workload (shape=, config=, case=, ...) with baseline_X= and candidate_X=
#   (and ratio=), once per repeat of the benchmark; `BENCH_FAIL <name>: <why>`; one JSON verdict a
#   line after a `<TOKEN>_RESULT ` prefix (its correctness_ok, counts and detail);
# - reward.json: one baseline_X / candidate_X pair for the whole run, where nothing names workloads.
DEV_PRODUCTS = ("logs/loop/dev", "logs/verifier")  # where a dev grading's engine writes them, in order
_NAME_KEYS = ("name", "case", "id", "workload", "check")
_MESSAGE_KEYS = ("message", "error", "detail", "reason", "diagnostic")
_TOTAL_KEYS = ("expected_case_count", "total", "n_cases", "cases", "case_count", "total_cases")  # the suite's size
_FAILED_KEYS = ("failed", "n_failed", "failed_count")
_PASSED_KEYS = ("passed", "n_passed", "passed_count")
_RATIO_KEYS = ("speedup", "ratio", "median_ratio")  # a workload's own baseline-over-candidate figure
_LOG_NAME_KEYS = ("shape", "config", "case", "workload", "name")
_HIGHER_IS_BETTER = ("flops", "gbps", "throughput", "per_s", "tokens_s", "bandwidth")
_TIME_UNITS = {"ms", "us", "ns", "s", "sec", "seconds", "time", "wall_ms", "time_ms"}
MAX_DETAIL_LINES = 16
MAX_FAILED_LINES = 8


def _load_json(p: Path) -> object:
    try:
        if p.is_symlink() or not p.is_file() or p.stat().st_size > 4 << 20:
            return None
        return json.loads(p.read_text(errors="replace"))
    except (OSError, ValueError):
        return None


def _name(d: dict) -> str | None:
    return next((str(d[k]) for k in _NAME_KEYS if isinstance(d.get(k), (str, int)) and not isinstance(d.get(k), bool)),
                None)


def _count(d: dict, keys: tuple[str, ...]) -> int | None:
    return next((d[k] for k in keys if isinstance(d.get(k), int) and not isinstance(d.get(k), bool) and d[k] >= 0),
                None)


def _case_count(d: dict) -> str:
    """` (F of T cases failed)` from a suite's own counts, whichever way its engine spells them: the
    total is the suite's size (an engine's actual_case_count counts the passed ones, not the run
    ones), else passed + failed; never a failed count above its total. Empty without a count."""
    failed, passed, total = _count(d, _FAILED_KEYS), _count(d, _PASSED_KEYS), _count(d, _TOTAL_KEYS)
    if failed is None and total is not None and passed is not None and passed <= total:
        failed = total - passed
    if failed is None:
        return ""
    if total is None or total < failed or (passed is not None and passed + failed > total):
        total = passed + failed if passed is not None else None
    return f" ({failed} of {total} cases failed)" if total else f" ({failed} cases failed)"


def _said(d: dict) -> str:
    said = next((str(d[k]) for k in _MESSAGE_KEYS if d.get(k) and not isinstance(d[k], (dict, list))), "")
    if not said and d.get("hard_fail_reasons"):
        said = ", ".join(map(str, d["hard_fail_reasons"]))
    return " ".join(said.split())[:200]


def _failed_checks(node: object, out: list[str]) -> None:
    """Each named check that failed (`name: message`), with its case count where it is a suite that
    counts them: a case with passed false, or a suite whose failed count is above 0."""
    if isinstance(node, list):
        for x in node:
            _failed_checks(x, out)
        return
    if not isinstance(node, dict):
        return
    name, counted = _name(node), _count(node, _FAILED_KEYS)
    if name and (node.get("passed") is False or node.get("ok") is False or (counted or 0) > 0):
        out.append(f"{name}{_case_count(node)}: {_said(node) or 'failed'}")
    for k, v in node.items():
        if isinstance(v, (list, dict)) and k not in ("gates",):
            _failed_checks(v, out)


def _number(v: object) -> str | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return str(v) if isinstance(v, int) else f"{v:.5g}"  # a count whole: one instruction in 10^8 is a result


def _float(v: object) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if x == x and abs(x) != float("inf") else None


def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    return (xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2) if xs else None


@dataclass
class Workload:
    """One workload's figures as the dev engine wrote them, over its repeats. A figure at or under 0
    is none: the engines leave 0 or -1 where they did not measure (a candidate that failed)."""

    name: str
    what: str = ""  # the figure's unit or metric (`ms`, `recompiles`, `peak_bytes`)
    baseline: list[float] = field(default_factory=list)
    candidate: list[float] = field(default_factory=list)
    ratio: list[float] = field(default_factory=list)  # the engine's own ratio, where it writes one
    failed: str = ""  # why the engine could not measure the candidate on it (its BENCH_FAIL)
    # (baseline, candidate, ratio) a pass
    passes: list[tuple[float | None, float | None, float | None]] = field(default_factory=list)

    def add(self, what: str, base: object, cand: object, ratio: object = None) -> None:
        self.what = self.what or what
        got = []
        for xs, v in ((self.baseline, base), (self.candidate, cand), (self.ratio, ratio)):
            x = _float(v)
            x = x if x is not None and x > 0 else None
            if x is not None:
                xs.append(x)
            got.append(x)
        self.passes.append((got[0], got[1], got[2]))

    def _shown(self) -> tuple[float | None, float | None, float | None]:
        """(baseline, candidate, ratio) of one pass, the one whose ratio is the median: figures of one
        measurement, never one pass's times beside another's ratio. Where no pass has both times, the
        medians of what was measured."""
        higher = any(h in self.what.lower() for h in _HIGHER_IS_BETTER)
        whole = [(b, c, r or (c / b if higher else b / c)) for b, c, r in self.passes
                 if b is not None and c is not None]
        if whole:
            whole.sort(key=lambda p: p[2])
            return whole[(len(whole) - 1) // 2]
        return _median(self.baseline), _median(self.candidate), None

    def line(self) -> str | None:
        """`workload <name>: baseline <b>, candidate <c> (<x>x)`; None where nothing was measured."""
        b, c, x = self._shown()
        unit = self.what.removesuffix("_median").replace("_", " ")

        def fig(x: float | None) -> str:
            return f"{_number(int(x) if x == int(x) else x)}{' ' + unit if unit else ''}" if x is not None else "?"

        why = f" ({self.failed[:160]})" if self.failed else ""
        if c is None:
            return f"workload {self.name}: baseline {fig(b)}, candidate not measured{why}" if b is not None \
                else (f"workload {self.name}: candidate not measured{why}" if why else None)
        if b is None:
            return f"workload {self.name}: candidate {fig(c)}, baseline not measured"
        x = x or (c / b if any(h in self.what.lower() for h in _HIGHER_IS_BETTER) else b / c)
        worse = "" if x >= 1 else (", candidate slower" if unit.split(" ")[-1] in _TIME_UNITS else ", candidate worse")
        return f"workload {self.name}: baseline {fig(b)}, candidate {fig(c)} ({x:.5g}x{worse})"


def _pair(d: dict) -> tuple[str, object, object] | None:
    """A record's first baseline_X / candidate_X pair (a lower-is-better one first), never a ref_ one."""
    pairs = [(k[len("candidate_"):], d.get("baseline_" + k[len("candidate_"):]), d[k])
             for k in d if k.startswith("candidate_") and "ref" not in k and ("baseline_" + k[len("candidate_"):]) in d]
    pairs = [p for p in pairs if _float(p[1]) is not None and _float(p[2]) is not None]
    pairs.sort(key=lambda p: any(h in p[0].lower() for h in _HIGHER_IS_BETTER))
    return pairs[0] if pairs else None


def _workloads(node: object, out: dict[str, Workload]) -> None:
    """Each named workload of a benchmark_results.json with a candidate and a baseline figure."""
    if isinstance(node, list):
        for x in node:
            _workloads(x, out)
        return
    if not isinstance(node, dict):
        return
    name, pair = _name(node), _pair(node)
    if name and pair:
        ratio = next((node[k] for k in _RATIO_KEYS if _float(node.get(k)) is not None), None)
        out.setdefault(name, Workload(name)).add(pair[0], pair[1], pair[2], ratio)
        return
    for k, v in node.items():
        if isinstance(v, (list, dict)) and "ref" not in k:
            _workloads(v, out)


_KV = re.compile(r"(?<![^\s,;])([A-Za-z][\w.]*)=([^\s,;]+)")
_CASE_FAIL = re.compile(r"^CASE_FAIL\s+([^\s:]+):?\s*(.*)$")
_BENCH_FAIL = re.compile(r"^BENCH_FAIL\s+([^\s:]+):\s*(.*)$")
_RESULT = re.compile(r"^[A-Z][A-Z0-9_]*_RESULT\s+(\{.*\})\s*$")


@dataclass
class LogFacts:
    """What a dev engine's logs say case by case and workload by workload."""

    failed_cases: list[str] = field(default_factory=list)  # `name: why`
    workloads: dict[str, Workload] = field(default_factory=dict)
    verdicts: list[dict] = field(default_factory=list)  # its `<TOKEN>_RESULT {...}` records


def _log_line(ln: str, facts: LogFacts) -> None:
    """One line of a dev engine's log, in whichever of the spellings it is (see above)."""
    m = _CASE_FAIL.match(ln)
    if m:
        facts.failed_cases.append(f"{m.group(1)}: {' '.join((m.group(2) or 'failed').split())[:200]}")
        return
    m = _BENCH_FAIL.match(ln)
    if m:
        facts.workloads.setdefault(m.group(1), Workload(m.group(1))).failed = " ".join(m.group(2).split())
        return
    m = _RESULT.match(ln)
    if m:
        try:
            rec = json.loads(m.group(1))
        except ValueError:
            return
        if isinstance(rec, dict):
            facts.verdicts.append(rec)
        return
    if "baseline_" in ln and "candidate_" in ln and "=" in ln:
        kv = dict(_KV.findall(ln))
        name, pair = next((kv[k] for k in _LOG_NAME_KEYS if kv.get(k)), None), _pair(kv)
        if name and pair:
            ratio = next((kv[k] for k in _RATIO_KEYS if _float(kv.get(k)) is not None), None)
            facts.workloads.setdefault(name, Workload(name)).add(pair[0], pair[1], pair[2], ratio)


def _read_logs(d: Path, facts: LogFacts, limit: int = 1 << 20) -> None:
    """Every log the engine wrote in folder d (not below it), the last `limit` bytes of each."""
    for f in sorted({*d.glob("*.log"), *d.glob("*.out")}):
        try:
            if f.is_symlink() or not f.is_file():
                continue
            text = f.read_text(errors="replace")[-limit:]
        except OSError:
            continue
        for ln in text.splitlines():
            _log_line(ln.strip(), facts)


def _verdict_checks(recs: list[dict]) -> tuple[list[str], list[str]]:
    """The failed correctness verdicts an engine printed as `<TOKEN>_RESULT {...}` lines, with their
    counts and detail (checks), and the cases they name (`failed: {case: why}`, `failures: ["case:why"]`)."""
    checks: list[str] = []
    cases: list[str] = []
    for r in recs:
        named = r.get("failed") if isinstance(r.get("failed"), dict) else {}
        listed = [str(x) for x in r["failures"]] if isinstance(r.get("failures"), list) else []
        if r.get("correctness_ok") is not False and not named and not listed and not (_count(r, _FAILED_KEYS) or 0):
            continue
        cases += [f"{k}: {' '.join(str(v).split())[:200]}" for k, v in named.items()]
        cases += [(x.split(":", 1)[0] + ": " + " ".join(x.split(":", 1)[1].split())[:200]) if ":" in x else x
                  for x in listed]
        # its failed invariants
        false = ", ".join(f"{k} false" for k, v in r.items() if v is False and k != "correctness_ok")
        checks.append(f"{r.get('mode') or 'correctness'}{_case_count(r)}: {_said(r) or false or 'failed'}")
    return checks, cases


def _grouped(failed: list[str], noun: str = "check") -> list[str]:
    """Checks (or cases) that failed with the same message, said once with their names."""
    by: dict[str, list[str]] = {}
    for line in dict.fromkeys(failed):
        name, _, said = line.partition(": ")
        by.setdefault(said, []).append(name)
    out = []
    for said, names in by.items():
        shown = ", ".join(dict.fromkeys(names[:4])) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        out.append(f"failed {noun}{'s' if len(names) > 1 else ''} {shown}: {said}")
    return out


def _whole_run(log_dir: Path) -> list[str]:
    """Where nothing names a workload: the run's one baseline / candidate pair in its reward.json."""
    for where in DEV_PRODUCTS:
        rec = _load_json(Path(log_dir) / where / "reward.json")
        pair = _pair(rec) if isinstance(rec, dict) else None
        if pair:
            w = Workload("(the whole run)")
            w.add(*pair)
            line = w.line()
            if line:
                return [line]
    return []


def dev_details(log_dir: Path) -> list[str]:
    """A dev grading's failed checks and cases with the engine's messages, then its figure per
    workload, baseline against candidate, wherever its engine writes them (see the spellings above;
    only its products under DEV_PRODUCTS, never the hidden tests/); at most MAX_DETAIL_LINES lines."""
    checks: list[str] = []
    loads: dict[str, Workload] = {}
    facts = LogFacts()
    for where in DEV_PRODUCTS:
        d = Path(log_dir) / where
        _failed_checks(_load_json(d / "correctness_results.json"), checks)
        _workloads(_load_json(d / "benchmark_results.json"), loads)
        _read_logs(d, facts)
    said_checks, said_cases = _verdict_checks(facts.verdicts)
    failed = _grouped(checks + said_checks) + _grouped(facts.failed_cases + said_cases, "case")
    for name, w in facts.workloads.items():
        loads.setdefault(name, w)
    per = [ln for ln in (w.line() for w in loads.values()) if ln] or _whole_run(log_dir)
    lines = failed[:MAX_FAILED_LINES] + per
    if len(lines) > MAX_DETAIL_LINES:
        lines = lines[:MAX_DETAIL_LINES - 1] + [f"... ({len(lines) - MAX_DETAIL_LINES + 1} more)"]
    return lines
