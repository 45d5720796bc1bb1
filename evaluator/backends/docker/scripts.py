"""The shell scripts the docker backend's own execs run as root in a container (with a fixed
system PATH, never the image's), and readers of what they print: the reset between two
gradings, the listing of the writable paths (volumes, which the engine's list of changes does
not cover), the reference's stat of changed paths, and the container's limit counters.
"""

from __future__ import annotations

import re

from evaluator.backends.in_container import ALIVE_FN
from evaluator.trust.written import STARTUP_NAMES

# Runs as root in a container between two gradings (and once when it starts, with no
# operations). Operations come as arguments, so no path is ever split or re-parsed:
#   rm PATH | dir MODE UID GID PATH | etc PATH CONTENT | dev NAME, run NAME (a /dev, /run entry to keep)
# The container's limit counters: OOM kills, and forks the pids limit refused (cgroup v2, then
# v1), the trace a fork bomb leaves once it is killed.
COUNTERS_SCRIPT = r"""
for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
  if [ -r "$f" ]; then
    while read -r k v; do [ "$k" = oom_kill ] && echo "@@oom:$v"; done < "$f"
    break
  fi
done
for f in /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events; do
  if [ -r "$f" ]; then
    while read -r k v; do [ "$k" = max ] && echo "@@pidsmax:$v"; done < "$f"
    break
  fi
done
"""

RESET_SCRIPT = (ALIVE_FN + r"""
keep=""
i=0
while :; do
  kill -9 -1 2>/dev/null
  alive
  [ -z "$left" ] && break
  i=$((i+1)); [ "$i" -ge 30 ] && break
  sleep 0.1
done
echo "@@survivors:${left:- none}"
keep_dev="/"
keep_run="/"
while [ $# -gt 0 ]; do
  case "$1" in
    rm) rm -rf -- "$2" 2>/dev/null; shift 2 ;;
    dir) if [ -d "$5" ] && [ ! -L "$5" ]; then chmod "$2" -- "$5"; chown "$3:$4" -- "$5"; """
     r"""else rm -rf -- "$5"; echo "@@refill:$5"; fi; shift 5 ;;
    etc) printf '%s' "$3" > "$2" 2>/dev/null; shift 3 ;;
    dev) keep_dev="$keep_dev$2/"; shift 2 ;;
    run) keep_run="$keep_run$2/"; shift 2 ;;
    *) shift ;;
  esac
done
if [ "$keep_dev" != "/" ]; then
  for f in /dev/* /dev/.[!.]* /dev/..?*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    case "$keep_dev" in *"/${f#/dev/}/"*) ;; *) rm -rf -- "$f" 2>/dev/null ;; esac
  done
fi
rm -rf /dev/shm/* /dev/shm/.[!.]* /dev/shm/..?* /dev/mqueue/* 2>/dev/null
# the scratch tmpfs (not in the engine's list of changes): emptied; /run keeps what the engine put there
rm -rf /tmp/* /tmp/.[!.]* /tmp/..?* /var/tmp/* /var/tmp/.[!.]* /var/tmp/..?* 2>/dev/null
rm -rf /.pesflow-trust-out/* /.pesflow-trust-out/.[!.]* /.pesflow-trust-out/..?* 2>/dev/null
if [ "$keep_run" != "/" ]; then
  for f in /run/* /run/.[!.]* /run/..?*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    case "$keep_run" in *"/${f#/run/}/"*) ;; *) rm -rf -- "$f" 2>/dev/null ;; esac
  done
fi
for f in /run/* /run/.[!.]* /run/..?*; do [ -e "$f" ] || [ -L "$f" ] && echo "@@run:${f#/run/}"; done
command -v ipcrm >/dev/null 2>&1 && ipcrm --all >/dev/null 2>&1
for f in /dev/*; do echo "@@dev:${f#/dev/}"; done
""" + COUNTERS_SCRIPT + r"""
for f in /sys/fs/cgroup/memory.peak /sys/fs/cgroup/memory/memory.max_usage_in_bytes; do
  [ -r "$f" ] && { read -r v < "$f"; echo "@@peak:$v"; break; }
done
# the init's sleep, which the grader's own stray check must not count: the one the init started
# after the kills above (by its start time: a sleep they killed may not read as a zombie yet
# on a loaded machine, and the init's new one would then be taken for a stray)
read -r st < /proc/$$/stat; set -- ${st##*) }; mine=${20}
j=0
while [ "$j" -lt 50 ]; do
  for d in /proc/[0-9]*; do
    read -r st < "$d/stat" 2>/dev/null || continue
    comm=${st#*(}; comm=${comm%)*}; set -- ${st##*) }
    [ "$1" = Z ] && continue
    [ "$2" = 1 ] && [ "$comm" = sleep ] && [ "${20}" -ge "$mine" ] && { echo "@@keepalive:${d#/proc/}"; j=99; break; }
  done
  j=$((j+1)); [ "$j" -lt 50 ] && sleep 0.02
done
echo "@@reset-done"
""")


# The writable paths' entries (A) and those whose inode changed since the last reset (C: ctime,
# which nothing in the container can set back), NUL-separated; after a reset, the startup files
# in the scratch tmpfs (S), which the engine's list of changes leaves out and each reset empties
# (so all there is the grading's: trust/written.py); then the container's clock.
VOLUME_SCRIPT = r"""
since="$1"; shift
for w in "$@"; do
  [ -d "$w" ] || continue
  find "$w" -xdev -mindepth 1 -printf 'A %p\0'
  [ -n "$since" ] && find "$w" -xdev -newerct "@$since" -printf 'C %p\0'
done
[ -n "$since" ] && find /tmp /var/tmp /dev/shm -xdev -mindepth 1 """ + STARTUP_NAMES + r""" -printf 'S %p\0' 2>/dev/null
sleep 0.02
printf 'T %s\0' "$(date +%s.%N)"
"""

STAT_SCRIPT = r"""
for p in "$@"; do
  if [ -e "$p" ] || [ -L "$p" ]; then stat -c '%F|%a|%u|%g' -- "$p"; else echo missing; fi
done
"""


def _volume_listing(out: str) -> tuple[set[str], set[str], str, set[str]]:
    """VOLUME_SCRIPT's output: (every entry, entries changed since, the container's clock, the
    scratch's startup files)."""
    entries, changed, clock, scratch = set(), set(), "", set()
    for rec in out.split("\0"):
        kind, _, path = rec.partition(" ")
        if kind == "A":
            entries.add(path)
        elif kind == "C":
            changed.add(path)
        elif kind == "T":
            clock = path.strip()
        elif kind == "S":
            scratch.add(path)
    return entries, changed, clock, scratch


def _keepalive(out: str) -> str:
    found = re.findall(r"^@@keepalive:(\d+)", out, re.M)
    return found[-1] if found else ""


def _peak(out: str) -> int | None:
    found = re.findall(r"^@@peak:(\d+)", out, re.M)
    return int(found[-1]) if found else None


def _oom(out: str) -> int:
    found = re.findall(r"^@@oom:(\d+)", out, re.M)
    return int(found[-1]) if found else 0


def _pids_max(out: str) -> int:
    found = re.findall(r"^@@pidsmax:(\d+)", out, re.M)
    return int(found[-1]) if found else 0
