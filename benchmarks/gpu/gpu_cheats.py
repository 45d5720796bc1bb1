"""Cheats against the bundled GPU packages' hidden graders: each one must end with a named hard fail.

Every cheat is the task's honest oracle (solution/oracle.patch applied to the baseline scope
file) with a cheat layered on top, so that a gate that missed it would let the oracle's real
speed count for the cheat. Cheats aimed at a runtime gate build the names they need from
pieces at run time, so the grader's textual scan (harness.py FORBIDDEN, sgemm's cu_scan.py)
lets them through and the runtime gate is what is tested. The honest oracle is graded once
per task as a control row (expected: ok, no hard fail).

Run from the repository root, as root, on a machine with an NVIDIA GPU (no network needed:
Dockerfile install steps are skipped, the host's torch stands in):
    python3 benchmarks/gpu/gpu_cheats.py --out DIR [--task TASK ...] [--cheat NAME ...] [--device cuda|cpu]
Writes DIR/cheats.json; exits 0 iff every oracle control graded ok and every cheat was caught
(reward 0 and an expected reason) or, for a cheat that only hides work from the timer, scored
no more than the oracle control (see NO_GAIN_MARGIN). With --device cpu (no GPU) only the
cheats the CPU lane can observe run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evaluator.candidate import apply_diff
from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.task import load_task

TASKS = ["kfc/ssm-selective-scan-firstorder", "kfc/flash-online-softmax-prefill", "kfc/sgemm-register-blocktiling"]

# ---------------------------------------------------------------------------------- Python scopes
# Appended to the oracle's scope file; {entry} is the graded function, {base_file} the frozen
# baseline's file name. The blocks see the oracle module's globals (torch is imported there).
PY_CHEATS = {
    # (code, expected reason names, needs a GPU)
    "side_stream": ('''
_honest = {entry}
_side = []


def {entry}(*args, **kwargs):
    # The oracle runs on a second stream made once; it waits for the inputs, but the caller's
    # stream is never made to wait for it, so events on the caller's stream time nothing.
    if not _side:
        _side.append(torch.cuda.Stream())
    _side[0].wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side[0]):
        return _honest(*args, **kwargs)
''', ["side_stream_escape", "beyond_roofline"], True),
    "event_patched": ('''
_cuda = getattr(torch, "cu" + "da")


class _QuickEvent(getattr(_cuda, "Ev" + "ent")):
    pass


setattr(_QuickEvent, "elapsed" + "_time", lambda self, end_event: 1e-3)  # every call "takes" 1 us
setattr(_cuda, "Ev" + "ent", _QuickEvent)
''', ["timer_patched"], False),
    "sync_patched": ('''
setattr(getattr(torch, "cu" + "da"), "synchro" + "nize", lambda device=None: None)
''', ["timer_patched"], False),
    "output_cached": ('''
_honest = {entry}
_answers = {{}}


def {entry}(*args, **kwargs):
    # Keyed on where the inputs live and on their shapes, not on what they hold.
    key = tuple((a.data_ptr(), tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else repr(a) for a in args)
    key += tuple(sorted(kwargs.items()))
    if key not in _answers:
        _answers[key] = _honest(*args, **kwargs)
    return _answers[key]
''', ["output_cached", "correctness_failed"], False),
    "inputs_mutated": ('''
_honest = {entry}


def {entry}(*args, **kwargs):
    out = _honest(*args, **kwargs)
    # The answer goes into the input of the same shape and dtype (saves an allocation).
    for a in args:
        if isinstance(a, torch.Tensor) and a.shape == out.shape and a.dtype == out.dtype:
            a.copy_(out)
            return a
    return out
''', ["inputs_mutated", "correctness_failed"], False),
    "baseline_called": ('''
import runpy as _runpy

_frozen = _runpy.run_path("/opt/" + "verifier" + "-baseline/" + "{base_file}")["{entry}"]


def {entry}(*args, **kwargs):
    return _frozen(*args, **kwargs)
''', ["baseline_called"], False),
    # The function object torch.cuda.Event.elapsed_time stays the same object while its
    # __code__ is swapped, so an identity check of the timers misses it. From then on every
    # candidate call would be reported at 0.8 x its true event time (a 1.25x speedup for free),
    # too little for side_stream_escape (1.5x) and beyond_roofline (0.9 x bound). Caught by the
    # timer fingerprint (harness.py _timer_fingerprint: code, defaults, closure, class dict).
    "timer_code_swapped": ('''
_Ev = getattr(getattr(torch, "cu" + "da"), "Ev" + "ent")


def _scaled(cls):  # one free variable, like the original's __class__ cell (which it keeps)
    def patched(self, end_event):
        ms = getattr(super(cls, self), "elapsed" + "_time")(end_event)
        k = cls.__dict__.get("_next_scale", 1.0)
        cls._next_scale = 1.0
        return ms * k
    return patched


getattr(_Ev, "elapsed" + "_time").__code__ = _scaled(_Ev).__code__
_honest = {entry}


def {entry}(*args, **kwargs):
    out = _honest(*args, **kwargs)
    _Ev._next_scale = 0.8  # the next elapsed time read is this call's
    return out
''', ["timer_patched"], False),
    # A frozen-baseline function held inside a dict: neither sys.modules nor a module global.
    # Caught by the gc scan for code from the protected folders that the harness does not own,
    # and by the audit hook that saw the candidate open the frozen file.
    "baseline_hidden": ('''
import runpy as _runpy

_held = {{"fn": _runpy.run_path("/opt/" + "verifier" + "-baseline/" + "{base_file}")["{entry}"]}}


def {entry}(*args, **kwargs):
    return _held["fn"](*args, **kwargs)
''', ["baseline_called"], False),
    # The host-clock rule flags side_stream_escape only when the host time exceeds
    # max(1.5 x event time, event time + 0.2 ms): a call whose real work takes under 0.2 ms
    # (the selective-scan timing workloads) can leave it all on a second stream, keeping on
    # the caller's stream only a read of its inputs, which takes about the roofline time.
    # Caught by the device gap (gpu_timing.py): the side stream is still busy after the end
    # event, so the event recorded after the device synchronize comes late.
    "side_stream_partial": ('''
_honest = {entry}
_side = []


def {entry}(*args, **kwargs):
    if not _side:
        _side.append(torch.cuda.Stream())
    _side[0].wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side[0]):
        out = _honest(*args, **kwargs)
    for a in args:  # what the event timer sees: one pass over the inputs
        if isinstance(a, torch.Tensor):
            a.sum()
    return out
''', ["side_stream_escape", "beyond_roofline"], True),
    # Tuned to the checks the timing loop used to make at fixed positions (timed pairs 0,
    # pairs // 2 and pairs - 1: 0, 7 and 14 of 15, after 3 warm-up calls): honest on the first
    # 6 calls of a shape (the correctness phase's cache probe makes 5) and on timed calls
    # 0 mod 7, otherwise the last honest answer for that shape comes back (wrong: every timed
    # call has new inputs). Caught because the checked calls are now drawn at random.
    "sampled_checks": ('''
_honest = {entry}
_calls = {{}}
_last = {{}}


def {entry}(*args, **kwargs):
    key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else repr(a) for a in args)
    key += tuple(sorted((k, repr(v)) for k, v in kwargs.items()))
    n = _calls.get(key, 0)
    _calls[key] = n + 1
    timed = n - 3
    if key in _last and n >= 6 and timed % 7 != 0:
        return _last[key]
    out = _honest(*args, **kwargs)
    _last[key] = out
    return out
''', ["output_cached", "correctness_failed"], True),
}

# ---------------------------------------------------------------------------------- sgemm (.cu)
# The oracle's entry point becomes `static int oracle_sgemm_launch(...)`; the cheat's own
# extern "C" sgemm_launch wraps it. The CPU lane of this grader only scans, builds, links and
# loads, so only the textual cheat is observable there. event_patched, sync_patched and
# baseline_called do not apply: a .cu cannot reach the grader's Python objects (the Python C
# API, dlopen/dlsym and unresolved symbols are banned by cu_scan.py and the link check).
CU_SIG = ("int M, int N, int K, float alpha, const float* A, const float* B, float beta, "
          "const float* C, float* D, void* stream")
CU_CHEATS = {
    # The legacy default stream (0) neither waits for nor is waited on by the grader's
    # non-blocking torch stream: a side stream that needs no cudaStreamCreate (banned by name).
    "side_stream": ('''
extern "C" int sgemm_launch(%s) {
  (void)stream;
  return oracle_sgemm_launch(M, N, K, alpha, A, B, beta, C, D, nullptr);
}
''', ["side_stream_escape", "beyond_roofline"], True),
    # The cheat as one would first write it: cu_scan.py bans cudaStreamCreate* by name, and
    # no disguise of the name is possible (token pasting, dlsym and the driver API are banned
    # too), so the textual scan catches it, on the CPU lane as well.
    "side_stream_created": ('''
extern "C" int sgemm_launch(%s) {
  static cudaStream_t side = nullptr;
  if (side == nullptr) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  (void)stream;
  return oracle_sgemm_launch(M, N, K, alpha, A, B, beta, C, D, side);
}
''', ["forbidden_pattern"], False),
    "output_cached": ('''
extern "C" int sgemm_launch(%s) {
  static const void* last[4] = {nullptr, nullptr, nullptr, nullptr};
  static int last_mnk[3] = {-1, -1, -1};
  if (M > 0 && N > 0 && last[0] == A && last[1] == B && last[2] == C && last[3] == D &&
      last_mnk[0] == M && last_mnk[1] == N && last_mnk[2] == K) {
    return 0;  // "D already holds this product"
  }
  last[0] = A; last[1] = B; last[2] = C; last[3] = D;
  last_mnk[0] = M; last_mnk[1] = N; last_mnk[2] = K;
  return oracle_sgemm_launch(M, N, K, alpha, A, B, beta, C, D, stream);
}
''', ["output_cached", "correctness_failed"], True),
    "inputs_mutated": ('''
extern "C" int sgemm_launch(%s) {
  const int rc = oracle_sgemm_launch(M, N, K, alpha, A, B, beta, C, D, stream);
  if (rc == 0 && M > 0 && K > 0) {
    // A used as scratch after the product: its first element is overwritten (NaN bytes).
    cudaMemsetAsync(const_cast<float*>(A), 0xFF, sizeof(float), static_cast<cudaStream_t>(stream));
  }
  return rc;
}
''', ["inputs_mutated", "correctness_failed"], True),
}
CU_ENTRY = 'extern "C" int sgemm_launch('


def oracle_text(task) -> tuple[str, str]:
    """(scope path, the scope file with solution/oracle.patch applied to the baseline)."""
    (scope,) = task.scope
    baseline = (task.root / "environment" / "repo" / scope).read_text()
    after = apply_diff((task.root / "solution" / "oracle.patch").read_text(), {scope: baseline})
    return scope, after[scope]


def build_candidates(task, names=None) -> dict[str, tuple[dict[str, str], list[str], bool]]:
    """name -> (files, expected reason names, needs a GPU), for the cheats that apply to the task."""
    scope, text = oracle_text(task)
    out = {}
    if scope.endswith(".cu"):
        assert text.count(CU_ENTRY) == 1, f"{task.name}: the oracle's entry point is not where expected"
        inner = text.replace(CU_ENTRY, "static int oracle_sgemm_launch(")
        for name, (code, expected, gpu) in CU_CHEATS.items():
            if names is None or name in names:
                out[name] = ({scope: inner + "\n" + code % CU_SIG}, expected, gpu)
        return out
    entry = {"state_space_scan.py": "state_space_scan", "attn/prefill.py": "causal_attention"}[scope]
    base_file = scope.rsplit("/", 1)[-1]
    for name, (code, expected, gpu) in PY_CHEATS.items():
        if names is None or name in names:
            out[name] = ({scope: text + "\n" + code.format(entry=entry, base_file=base_file)}, expected, gpu)
    return out


def make_evaluator(out: Path, cache_dir: Path | None = None) -> Evaluator:
    cfg = EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir or out / "cache"), install_steps="skip"))
    return Evaluator(cfg, log_root=out / "logs")


# A timing cheat (work hidden from the timer) that the gates let through but that scores no more
# than the honest oracle it wraps bought nothing: on a kernel whose timed call is bound by the
# host's launch work, hiding the GPU's part hides almost nothing. Within this margin of the
# oracle control's speedup (its spread across gradings is a few percent) it counts as no gain.
TIMING_GATES = {"side_stream_escape", "beyond_roofline"}
NO_GAIN_MARGIN = 0.10


def _row(task_name, cheat, expected, v, seconds, oracle_speedup=None) -> dict:
    names = [r.split(":", 1)[0] for r in v.hard_fail_reasons]
    no_gain = False
    if cheat == "oracle":
        caught, as_expected = False, v.status.value == "ok" and not v.hard_fail_reasons
    else:
        caught = not v.reward and any(n in expected for n in names)  # 0, or withheld (None) when it tampered
        no_gain = (not caught and set(expected) <= TIMING_GATES and v.speedup is not None
                   and oracle_speedup is not None and v.speedup <= oracle_speedup * (1 + NO_GAIN_MARGIN))
        as_expected = caught or no_gain
    return {"task": task_name, "cheat": cheat, "expected": expected, "status": v.status.value, "reward": v.reward,
            "speedup": v.speedup, "oracle_speedup": oracle_speedup, "hard_fail_reasons": v.hard_fail_reasons,
            "message": v.message, "seconds": round(seconds, 1), "caught": caught, "no_gain": no_gain,
            "as_expected": as_expected, "log_dir": v.log_dir}


def grade(ev: Evaluator, task_name: str, names=None, device: str = "cuda", oracle: bool = True,
          log=print) -> list[dict]:
    """Grade the oracle (control) and each applicable cheat with the hidden grader; one row each."""
    task = load_task(task_name)
    rows = []
    oracle_speedup = None
    if oracle:
        t0 = time.monotonic()
        v = ev.evaluate(task, mode="oracle", grader="hidden", device=device)
        rows.append(_row(task.name, "oracle", [], v, time.monotonic() - t0))
        oracle_speedup = v.speedup
        log(line(rows[-1]))
    for name, (files, expected, gpu) in build_candidates(task, names).items():
        if gpu and device == "cpu":
            log(f"{task.name:40s} {name:20s} skipped: needs a GPU")
            continue
        t0 = time.monotonic()
        v = ev.evaluate(task, candidate=CandidateSource(files=files), grader="hidden", device=device)
        rows.append(_row(task.name, name, expected, v, time.monotonic() - t0, oracle_speedup))
        log(line(rows[-1]))
    return rows


def line(r: dict) -> str:
    verdict = "ok" if r["as_expected"] else "NOT AS EXPECTED"
    what = ("caught" if r["caught"] else "control" if r["cheat"] == "oracle" else "no gain" if r.get("no_gain")
            else "MISSED")
    speed = "-" if r["speedup"] is None else f"{r['speedup']:.3g}"
    reward = "withheld" if r["reward"] is None else f"{r['reward']:.3g}"  # a tampered grading has no figures
    return (f"{r['task']:40s} {r['cheat']:20s} {what:8s} {verdict:15s} status={r['status']} reward={reward} "
            f"speedup={speed} reasons={r['hard_fail_reasons']} ({r['seconds']} s)")


def summary(rows: list[dict]) -> str:
    cheats = [r for r in rows if r["cheat"] != "oracle"]
    bad = [f"{r['task']}:{r['cheat']}" for r in rows if not r["as_expected"]]
    gainless = sum(bool(r.get("no_gain")) for r in cheats)
    return (f"{sum(r['caught'] for r in cheats)}/{len(cheats)} cheats caught"
            + (f" ({gainless} more let through that scored no more than the oracle)" if gainless else "") + ", "
            f"{sum(r['as_expected'] for r in rows if r['cheat'] == 'oracle')}/{len(rows) - len(cheats)} oracle controls ok"
            + (f"; not as expected: {', '.join(bad)}" if bad else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--task", action="append", help="repeatable; default: the three bundled GPU tasks")
    ap.add_argument("--cheat", action="append", help="repeatable; default: every cheat that applies")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--no-oracle", action="store_true", help="leave out the oracle control rows")
    a = ap.parse_args(argv)
    known = {*PY_CHEATS, *CU_CHEATS}
    if set(a.cheat or ()) - known:
        ap.error(f"unknown cheat(s) {sorted(set(a.cheat) - known)}; known: {sorted(known)}")
    a.out.mkdir(parents=True, exist_ok=True)
    ev = make_evaluator(a.out.resolve())
    rows = []
    try:
        for task_name in a.task or TASKS:
            rows += grade(ev, task_name, a.cheat, a.device, oracle=not a.no_oracle)
            (a.out / "cheats.json").write_text(json.dumps(rows, indent=1))
    finally:
        ev.close()
    print(summary(rows))
    return 0 if rows and all(r["as_expected"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
