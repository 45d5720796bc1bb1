"""The trust probes as follow-ups of a local grading: fresh processes in the grading's own
sandbox once the grader's last process is gone (evaluator/supervise.py), so they see the
scratch as the grader left it (a JIT's compiled kernels included) and cost no second sandbox.

A LiveProber is the screen's Prober (evaluator/trust/screen.py) for one grading: it writes the
probe's config and files beside the grading's (the guard's read-only folder), has the init run
the command chrooted like the grader, and returns what the probe's run left as a GradeRun.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from evaluator import sandbox, supervise
from evaluator.backends.base import GradeRequest, GradeRun
from evaluator.sandbox import q
from evaluator.trust import collect, instrument


class LiveProber:
    same_sandbox = True

    def __init__(self, more: sandbox.FollowUp, run_dir: Path, follow: Path, trust_out: Path,
                 chroot: Callable[[str], str], request: GradeRequest):
        self.more, self.run_dir, self.follow, self.trust_out = more, run_dir, follow, trust_out
        self.chroot, self.request = chroot, request
        self.count = 0

    def __call__(self, config: dict[str, Any], files: dict[str, Path], command: str, limit: float) -> GradeRun:
        self.count += 1
        out = self.request.out_dir / "probe"
        out.mkdir(parents=True, exist_ok=True)
        trust_in = self.run_dir / "trust-in"
        instrument.write_config(trust_in, {**(self.request.trust or {}), **config})
        for name, host in files.items():
            shutil.copyfile(host, trust_in / name)
        self.follow.mkdir(exist_ok=True)
        kept = self.run_dir / f"trust-out-probe-{self.count}"
        # the guard's out folder emptied of the grading's files (never through a link), then the
        # probe: by the warm probe the init started before the grader, where it still waits, else cold
        status = self.follow / "warm.status"
        # its answer waited for a quarter of the limit at most: a cold probe must still fit after it
        warm = supervise.warm_go_lines(self.follow, trust_in / instrument.WARM_GO, self.run_dir / "root" / "proc",
                                       answer_sec=max(5.0, limit / 4)) \
            if self.count == 1 and (self.follow / "warm.pid").is_file() else ""
        (self.follow / "command").write_text(
            f"find {q(self.trust_out)} -mindepth 1 -delete 2>/dev/null\n{warm}{self.chroot(command)}\n")
        (self.follow / "copy").write_text(f"{self.trust_out}\n{kept}\n")
        events = collect.EventSocket(trust_in / "events.sock")
        try:
            done = self.more.run(limit)
        finally:
            sent = events.close()
        if kept.is_dir():
            shutil.copytree(kept, out / "trust", dirs_exist_ok=True)  # already bounded by the init's copy
        got = collect.merge(sent, collect.read_event_files(out / "trust"))
        (out / "grader_output.log").write_text(done.output)
        said = []  # what the warm probe said (why it left the probe cold, say)
        if warm and status.is_file():
            with open(status, "rb") as f:  # its few lines, written before the candidate's code ran there
                said = [f"warm: {line}" for line in f.read(4096).decode(errors="replace").splitlines()[:8]]
        # when the init saw the probe's processes gone, its files out
        marks = supervise.read_status(self.follow / "status")
        said += [f"follow: {k} {marks[k]}" for k in ("reaped", "copied") if k in marks]
        return GradeRun(None, done.returncode, done.timed_out, done.seconds, done.output, notes=said,
                        infra_error=done.stopped if done.stopped and not done.timed_out else None,
                        trust_events=got, trust_socket=any(e.get("via") == "socket" for e in got))
