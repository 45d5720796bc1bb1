"""The script of a grading's namespace init: it runs the grader as its child and stays PID 1
around it, to note what happened, kill what is left and copy the results out before the
namespace (and a tmpfs scratch with it) is gone. With follow-ups, it then waits on a pipe only
it holds for the host's next command (the trust probes), each run the same way in the same
sandbox, after every process of the grading is dead (evaluator/sandbox.py `run` drives it).
"""

from __future__ import annotations

from pathlib import Path

from evaluator.limits import STRAY_GRACE_SEC
from evaluator.programs import COPY_OUT
from evaluator.sandbox import CTL_READ, CTL_WRITE, q


def supervised_command(command: str, *, proc: Path, status: Path, python: str, copy_out: list[tuple[Path, Path]],
                       max_file_bytes: int, max_total_bytes: int, scratch: Path | None = None,
                       stray_grace: float = STRAY_GRACE_SEC, results: list[Path] = (),  # type: ignore[assignment]
                       bulk_copy: list[tuple[Path, Path]] = (),  # type: ignore[assignment]
                       bulk_bytes: tuple[int, int] = (64 << 20, 256 << 20),
                       follow: Path | None = None, warm: str | None = None, after_grader: str = "",
                       warm_over: Path | None = None, warm_late: bool = False) -> str:
    """Shell lines that run `command` (a chroot line) as the child of the namespace's init,
    which stays to: note the grader's exit and time in `status` (a host file the grader
    cannot see), name the processes that outlived it by more than `stray_grace` seconds
    (`strays=`; helpers still exiting, e.g. a compile pool, get that long), kill everything
    left, and copy `copy_out` (src, dest) pairs to the host (evaluator/programs/copy_out.py)
    before the namespace, and any tmpfs scratch with it, is gone (`bulk_copy` pairs too, with
    the larger per-file and total limits `bulk_bytes`: the trust screen's kept inputs), noting
    `forged=` for any of `results` (host paths of the grader's result files) changed after the
    grader returned. SIGUSR1 does the same at once (a
    stop); other signals are noted (`signalled=`) and change nothing.

    With `follow` (a host folder), the init then says `graded RC` on its pipe and runs each
    follow-up the host asks for: `follow/command` as the child (same environment of mounts,
    limits and scratch), its notes in `follow/status`, everything killed after it, then the
    `follow/copy` pairs copied out, and `ran RC` said; until the host says `end`.

    With `warm` (a chroot line, with `follow`), the warm probe (trust/inside/pesflow_probe_warm.py)
    starts first: once it says it is out of the grader's reach (`shielded` in `follow/warm.status`)
    its pid and start time go to `follow/warm.pid` and the grader starts; it is no stray, and the
    reap after the grader spares it (everything else stopped, then killed) for the first
    follow-up, which `warm_go_lines` hands the probes to; `warm_over` (a file the warm probe
    sees, read-only) is made once the rest are gone, so it can ready the GPU meanwhile. With
    `warm_late`, the warm probe starts only once the grader's processes are dead (nothing of the
    candidate's runs beside it, so nobody to shield it from and nothing of the grader's figures or
    memory to share): its imports overlap what the init and the host do before the first
    follow-up, not the grader.

    `after_grader` (a host-side shell line) runs once the grader's processes are dead, before
    the copy: the trust screen's look at what the grading wrote (evaluator/trust/written.py)."""
    proc_glob = f"{q(proc)}/[0-9]*"
    pairs = " ".join(f"{q(a)} {q(b)}" for a, b in copy_out)
    tick = q(status.with_name(status.name + ".tick"))
    bulk_pairs = " ".join(f"{q(a)} {q(b)}" for a, b in bulk_copy)
    bulk = (f"{q(python)} -I -S {q(COPY_OUT)} /dev/null '' {int(bulk_bytes[0])} {int(bulk_bytes[1])} '' {bulk_pairs}"
            if bulk_copy else ":")
    # the grader's child holds no pipe of the host's: only this init can say a phase is over
    close_ctl = f" {{{CTL_WRITE}}}>&- {{{CTL_READ}}}<&-" if follow else ""
    follow_lines = _follow_lines(follow, python, bulk_bytes, close_ctl) if follow else ""
    warm_lines = _warm_lines(follow, warm, close_ctl) if follow and warm and not warm_late else 'W=""\n'
    late_lines = _warm_late_lines(follow, warm, warm_over, close_ctl) if follow and warm and warm_late else ""
    spare = f": > {q(warm_over)}" if warm_over else ":"
    copy = (f"{q(python)} -I -S {q(COPY_OUT)} \"$S\" {q(scratch or '')} {int(max_file_bytes)} {int(max_total_bytes)} "
            f"{q(chr(10).join(map(str, results)))} {pairs}")
    wind = ("late" if warm_late else "spare") if follow and warm else ""
    return (_init_functions(status, proc, tick, spare, after_grader or ":", copy, bulk)
            + _grader_lines(command, close_ctl, warm_lines + late_lines, proc_glob, stray_grace, wind)
            + follow_lines + 'exit "$rc"\n')


def _init_functions(status: Path, proc: Path, tick: str, spare: str, after_grader: str, copy: str, bulk: str) -> str:
    """The init's shell functions: notes, a process's start time, whether any process of the
    grading is alive, the reaps (sparing the warm probe or not), and the wind-up after the grader
    (`spare`: the line once the rest are gone; `after_grader`, then the copies `copy` and `bulk`)."""
    proc_glob = f"{q(proc)}/[0-9]*"
    return f"""set +e
S={q(status)}
note() {{ printf '%s\\n' "$@" >> "$S"; }}
# a fifo nobody writes: `read -t` on it is a sleep that starts no process (which would count)
mkfifo {tick} && exec 9<>{tick}
# a process's start time (clock ticks since boot): with its pid, what no later process can take over
start_of() {{ local st; read -r st 2>/dev/null < {q(proc)}/"$1"/stat || return 1; st=${{st##*) }}; \
set -- $st; echo "${{20}}"; }}
is_warm() {{ [ -n "$W" ] && [ "$1" = "$W" ] && [ "$(start_of "$1")" = "$WS" ]; }}
alive() {{
  local p st
  for p in {proc_glob}; do
    [ "${{p##*/}}" = 1 ] && continue
    is_warm "${{p##*/}}" && continue
    st=""; read -r st 2>/dev/null < "$p/stat"; st=${{st##*) }}; st=${{st%% *}}
    [ -n "$st" ] && [ "$st" != Z ] && return 0
  done
  return 1
}}
reap() {{
  kill -9 -1 2>/dev/null
  local i=0 left
  while :; do
    left=( {proc_glob} )
    [ "${{#left[@]}}" -le 1 ] && break
    i=$((i+1)); [ "$i" -gt 2000 ] && {{ note "unreaped=${{#left[@]}}"; break; }}
    wait 2>/dev/null
  done
}}
# the same, sparing the warm probe: everything else stopped first (a stopped process cannot
# fork), then killed; the orphans bash reaps as they die (a bare `wait` would wait for it)
reap_but_warm() {{
  is_warm "$W" || {{ reap; return; }}
  local i=0 p n st busy
  while :; do
    kill -STOP -1 2>/dev/null; kill -CONT "$W" 2>/dev/null
    busy=0
    for p in {proc_glob}; do
      n=${{p##*/}}; [ "$n" = 1 ] && continue; is_warm "$n" && continue
      st=""; read -r st 2>/dev/null < "$p/stat"; st=${{st##*) }}; st=${{st%% *}}
      case "$st" in T|t|Z|X|"") ;; *) busy=1 ;; esac
    done
    i=$((i+1)); {{ [ "$busy" = 0 ] || [ "$i" -gt 50 ]; }} && break
  done
  i=0
  while :; do
    left=0
    for p in {proc_glob}; do
      n=${{p##*/}}; [ "$n" = 1 ] && continue; is_warm "$n" && continue
      kill -9 "$n" 2>/dev/null; left=$((left+1))
    done
    i=$((i+1)); [ "$left" = 0 ] && break
    [ "$i" -gt 2000 ] && {{ note "unreaped=$left"; break; }}
    read -r -t 0.005 -u 9 _
  done
}}
wind_up() {{
  trap '' USR1
  if [ "$1" = spare ]; then reap_but_warm; {spare}; else reap; fi
  [ "$1" = late ] && start_warm
  {after_grader}
  {copy}
  {bulk}
}}
"""


def _grader_lines(command: str, close_ctl: str, warm: str, proc_glob: str, stray_grace: float, wind: str) -> str:
    """The grader run as the init's child, its exit and time noted, the strays named after
    `stray_grace`, then the wind-up (`wind`: spare the warm probe, start it late, or neither)."""
    return f"""trap 'note stopped=1; wind_up; exit 137' USR1
# Only the grading itself can signal this init (the host sends USR1 alone): noted as tampering,
# and the grader is waited for all the same. Caught, not ignored, so the grader gets defaults.
for s in INT TERM HUP QUIT USR2 ALRM; do trap "note signalled=$s" "$s"; done
{warm}note "grader_start=$EPOCHREALTIME"
( exec 9>&-{close_ctl}; {command} ) &
g=$!
wait "$g"
rc=$?
while kill -0 "$g" 2>/dev/null; do wait "$g"; rc=$?; done
note "grader_end=$EPOCHREALTIME" "grader_rc=$rc"
i=0
while alive && [ "$i" -lt {max(1, int(stray_grace / 0.05))} ]; do i=$((i+1)); read -r -t 0.05 -u 9 _; done
strays=()
for p in {proc_glob}; do
  n=${{p##*/}}
  [ "$n" = 1 ] && continue
  is_warm "$n" && continue
  st=""; c="?"
  read -r st 2>/dev/null < "$p/stat"; st=${{st##*) }}; st=${{st%% *}}
  [ -z "$st" ] || [ "$st" = Z ] && continue
  read -r c 2>/dev/null < "$p/comm"
  strays+=("$n:${{c//[^A-Za-z0-9._-]/_}}")
done
[ "${{#strays[@]}}" -gt 0 ] && note "strays=${{strays[*]:0:20}}"
wind_up {wind}
"""

def _follow_lines(follow: Path, python: str, bulk_bytes: tuple[int, int], close_ctl: str) -> str:
    f = q(follow)
    return f"""trap 'note stopped=1; reap; exit 137' USR1
printf 'graded %s\\n' "$rc" >&"${CTL_WRITE}"
while read -r -u "${CTL_READ}" cmd && [ "$cmd" = run ]; do
  S={f}/status
  : > "$S"
  note "grader_start=$EPOCHREALTIME"
  ( exec 9>&-{close_ctl}; exec /bin/bash {f}/command ) &
  g=$!
  wait "$g"
  r=$?
  while kill -0 "$g" 2>/dev/null; do wait "$g"; r=$?; done
  note "grader_end=$EPOCHREALTIME" "grader_rc=$r"
  reap
  note "reaped=$EPOCHREALTIME"
  {q(python)} -I -S {q(COPY_OUT)} "$S" '' {int(bulk_bytes[0])} {int(bulk_bytes[1])} '' @{f}/copy
  note "copied=$EPOCHREALTIME"
  printf 'ran %s\\n' "$r" >&"${CTL_WRITE}"
done
"""


def _warm_lines(follow: Path, warm: str, close_ctl: str) -> str:
    """The warm probe started before the grader, used only once it says it is out of reach."""
    f = q(follow)
    return f"""W=""; WS=""
: > {f}/warm.status
( exec 9>&-{close_ctl}; exec {warm} ) 3>>{f}/warm.status 4>&1 >/dev/null 2>&1 </dev/null &
W=$!
i=0
while ! grep -qs '^shielded' {f}/warm.status && [ "$i" -lt 300 ]; do i=$((i+1)); read -r -t 0.01 -u 9 _; done
if grep -qs '^shielded' {f}/warm.status && WS=$(start_of "$W"); then printf '%s %s\n' "$W" "$WS" > {f}/warm.pid
else kill -9 "$W" 2>/dev/null; W=""; fi
"""


def _warm_late_lines(follow: Path, warm: str, warm_over: Path | None, close_ctl: str) -> str:
    """`start_warm`, which wind_up runs once every process of the grading is dead, before the look
    at what the grading wrote and the copy: the warm probe, its pid and start time recorded at once
    (no wait for its word: what the init and the host do next overlaps its start)."""
    f = q(follow)
    return f"""start_warm() {{
  {f": > {q(warm_over)}" if warm_over else ":"}
  : > {f}/warm.status
  ( exec 9>&-{close_ctl}; exec {warm} ) 3>>{f}/warm.status 4>&1 >/dev/null 2>&1 </dev/null &
  W=$!
  WS=$(start_of "$W") && printf '%s %s\\n' "$W" "$WS" > {f}/warm.pid
}}
"""


def warm_go_lines(follow: Path, go: Path, proc: Path, answer_sec: float = 60.0) -> str:
    """A follow-up's lines that hand the probes to the warm probe, if it is still the process the
    init started: `go` written (a host file W polls for, read-only in the sandbox), then its
    answer awaited (at most `answer_sec`: its imports may still run); once it ran, its exit. It
    answering `cold`, being gone or too slow falls through to the lines after (the probe
    started cold)."""
    f = q(follow)
    return f"""mkfifo {f}/warm.tick 2>/dev/null; exec 8<>{f}/warm.tick
warm_up() {{ local st; read -r st 2>/dev/null < {q(proc)}/"$wp"/stat || return 1; st=${{st##*) }}; set -- $st
  [ "${{20}}" = "$ws" ] && [ "$1" != Z ] && [ "$1" != X ]; }}
if read -r wp ws < {f}/warm.pid 2>/dev/null && warm_up; then
  kill -CONT "$wp" 2>/dev/null
  : > {q(go)}
  i=0  # its imports may still be running: a cold probe would wait for them too, not forever
  until grep -qs -e '^run' -e '^cold' {f}/warm.status || ! warm_up || [ "$i" -ge {int(answer_sec / 0.02)} ]; do
    i=$((i+1)); read -r -t 0.02 -u 8 _; done
  if grep -qs '^run' {f}/warm.status; then
    while warm_up; do read -r -t 0.02 -u 8 _; done
    printf 'gone %s\n' "$EPOCHREALTIME" >> {f}/warm.status  # the host's figure of its process's end
    exit 0  # what it found is its result file; it said no more once it ran the candidate's code
  fi
  warm_up && kill -9 "$wp" 2>/dev/null
fi
exec 8<&-
"""


def read_status(path: Path) -> dict[str, str]:
    """The notes of supervised_command (last value of each key wins)."""
    out: dict[str, str] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out
