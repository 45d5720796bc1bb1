"""What runs inside a grading container, shared by the docker and Modal backends.

The grader is run by a small shell wrapper that times it from inside (so that our own
overhead can be told apart from the grader's run), then lists the processes it left running
and kills them. A limit the candidate broke (memory, background processes) becomes a named
hard-fail reason in front of the grader's own, with reward 0, as the local backend reports it.
"""

from __future__ import annotations

import re
import shlex

from evaluator.limits import STRAY_GRACE_SEC


TIMED, STRAYS, FORGED = "@@pesflow:grader_ns=", "@@pesflow:strays=", "@@pesflow:forged="

# Lists the container's live processes other than its init, this shell and the init's own
# `sleep` (pid $keep, or any `sleep` child of the init when $keep is empty); forks nothing.
ALIVE_FN = r"""
alive() {
  left=""
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = 1 ] && continue
    [ "$p" = "$$" ] && continue
    [ "$p" = "$keep" ] && continue
    { read -r st < "$d/stat"; } 2>/dev/null || continue
    rest=${st##*) }; state=${rest%% *}; rest=${rest#* }; ppid=${rest%% *}
    comm=${st#*(}; comm=${comm%)*}
    [ "$state" = Z ] && continue
    [ -z "$keep" ] && [ "$ppid" = 1 ] && [ "$comm" = sleep ] && continue
    left="$left $p:$comm"
  done
}
"""


# Kills, by pid, the processes `alive` lists (stopped first, so a forking one cannot outrun the
# list), until none is left or 20 rounds have passed; forks only `kill` itself.
KILL_LISTED_FN = r"""
kill_listed() {
  n=0
  while [ "$n" -lt 20 ]; do
    alive
    [ -z "$left" ] && return 0
    pids=""; for e in $left; do pids="$pids ${e%%:*}"; done
    kill -STOP $pids 2>/dev/null; kill -9 $pids 2>/dev/null
    n=$((n + 1))
  done
}
"""


def grace(alive: str = "alive") -> str:
    """Shell lines that give what the grader left STRAY_GRACE_SEC to end by itself, as the local
    backend's init does: only what is still running then is a stray."""
    return (f"{alive}; g=0; while [ -n \"$left\" ] && [ \"$g\" -lt {max(1, int(STRAY_GRACE_SEC / 0.05))} ]; do "
            f"sleep 0.05; g=$((g + 1)); {alive}; done\n")


def forged_check(results: list[str] | tuple[str, ...]) -> str:
    """Shell lines, run once everything the grader left is dead, that name each result file whose
    inode changed after the grader returned (ctime, which no candidate can set back; 20 ms of
    grace, as the local backend's init allows): something that outlived the grader rewrote it."""
    if not results:
        return ""
    paths = " ".join(shlex.quote(r) for r in results)
    return ("te=$((t1 + 20000000)); te=\"$((te / 1000000000)).$(printf '%09d' $((te % 1000000000)))\"; forged=\"\"\n"
            f"for r in {paths}; do [ -n \"$(find \"$r\" -maxdepth 0 -newerct \"@$te\" 2>/dev/null)\" ] "
            "&& forged=\"$forged $r\"; done\n"
            f"echo \"{FORGED}$forged\"\n")


def grader_script(command: str, keep: str, *, spare_existing: bool = False,
                  results: list[str] | tuple[str, ...] = ()) -> str:
    """The grader, timed from inside; then what it left running is listed and killed, and the
    result files it wrote are checked for a later rewrite (`forged_check`).

    Default (a docker container, whose init respawns its own `sleep`): everything but the init
    is killed with `kill -9 -1`. `spare_existing` (a Modal sandbox): every process that was
    alive before the grader started is spared and only the grader's leftovers are killed by pid,
    because there the sandbox's own command is a child of Modal's init, and `kill -9 -1` would
    kill it too: the sandbox finishes, and every exec after the grader's (the logs, nvidia-smi)
    raises, turning each completed grading into an infra error."""
    if not spare_existing:
        return (f"t0=$(date +%s%N); {command}; rc=$?; t1=$(date +%s%N); echo; echo {TIMED}$((t1 - t0))\n"
                f"keep={shlex.quote(keep)}\n{ALIVE_FN}\n{grace()}echo \"{STRAYS}$left\"; kill -9 -1 2>/dev/null\n"
                # until nothing is left that could still write a result file (the init's sleep, which
                # it starts again, aside: keep="" spares any sleep of the init's)
                "keep=; n=0; while [ \"$n\" -lt 20 ]; do alive; [ -z \"$left\" ] && break; "
                "kill -9 -1 2>/dev/null; n=$((n + 1)); done\n"
                f"{forged_check(results)}exit $rc\n")
    # `pre` holds the processes that were there before (Modal's init, the sandbox's command, its
    # exec machinery): the `alive` of this mode skips them by pid (a command may still be exec'ing
    # when it is listed, so its name can change), and lists only what the grader left.
    # `keep` is never empty here, so a grader's `sleep` adopted by the init is not taken for ours.
    return (f"keep={shlex.quote(keep or '-')}\n{ALIVE_FN}\nalive; pre=\" $left \"\n"
            "alive_all() { alive; kept=\"\"; for e in $left; do case \"$pre\" in *\" ${e%%:*}:\"*) ;; "
            "*) kept=\"$kept $e\";; esac; done; left=$kept; }\n"
            f"t0=$(date +%s%N); {command}; rc=$?; t1=$(date +%s%N); echo; echo {TIMED}$((t1 - t0))\n"
            f"{grace('alive_all')}echo \"{STRAYS}$left\"\n"
            f"{KILL_LISTED_FN.replace('    alive', '    alive_all')}\nkill_listed\n"
            f"{forged_check(results)}exit $rc\n")


def grader_seconds(output: str) -> float | None:
    found = re.findall(re.escape(TIMED) + r"(\d+)", output)
    return int(found[-1]) / 1e9 if found else None


def forged_results(output: str) -> list[str]:
    """The result files the grading rewrote after its grader had returned (forged_check's line)."""
    found = re.findall("^" + re.escape(FORGED) + "(.*)$", output, re.M)
    return found[-1].split() if found else []


def left_running(output: str) -> list[str]:
    """pid:command of each process the grader left running (listed just before they were killed)."""
    found = re.findall("^" + re.escape(STRAYS) + "(.*)$", output, re.M)
    return found[-1].split() if found else []


