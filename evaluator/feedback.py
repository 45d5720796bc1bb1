"""What a grading can tell the model that wrote the candidate, read from the grading's own products.

Two kinds, one owner:
- the package's loop feedback: the lines its environment/loop/sanitize_feedback.py prints to a
  solver after a dev submission (FORMAT.md, "The feedback loop inside a session"), run in the
  dev grading's sandbox right after the package's dev engine, with the submission count and the
  best-so-far the search keeps written where the package's submit.sh writes them. Nothing of the
  engine's products is changed: the step only adds /logs/loop/{count,best.json,feedback.txt}.
- the candidate's own diagnostics: its exceptions (frames in its scope files kept, the others cut
  to one line a run) and compiler errors that name its files, from the grader's output.
What reaches a prompt of either is still screened by the leak guard (agent/llm/leak_guard.py).
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

from evaluator.dev_details import DEV_PRODUCTS, dev_details

FEEDBACK_FILE = "logs/loop/feedback.txt"  # under a grading's log folder (the sandbox's /logs/loop/feedback.txt)
FEEDBACK_CHARS = 4000
# The search's count and best-so-far, as the grading's environment carries them in
COUNT_ENV, BEST_ENV = "PESFLOW_LOOP_COUNT", "PESFLOW_LOOP_BEST"

# submit.sh's bookkeeping between the engine and the sanitizer, for one submission: an infra
# failure of the engine (rc 3 or its marker) is not counted; else the count is this submission's
# and best.json keeps the best correctness-passing dev reward, strictly greater (as submit.sh).
_BOOKKEEPING = r"""
import json, os, sys
from pathlib import Path
L = Path('/logs/loop'); D = L / 'dev'
def read(p, d):
    try:
        return json.loads(p.read_text())
    except Exception:
        return d
k = int(os.environ.get('PESFLOW_LOOP_COUNT') or 1)
try:
    best = json.loads(os.environ.get('PESFLOW_LOOP_BEST') or 'null')
except Exception:
    best = None
harness = sys.argv[1] == '3' or (D / 'harness_error.txt').exists()
L.mkdir(parents=True, exist_ok=True)
(L / 'count').write_text('%d\n' % (k - 1 if harness else k))
if not harness:
    state, reward = read(D / 'verifier_state.json', {}), read(D / 'reward.json', {})
    r, s = float(reward.get('reward') or 0.0), float(reward.get('speedup') or 0.0)
    if bool(state.get('correctness_ok')) and (not best or r > float(best.get('reward') or -1.0)):
        best = {'submission': k, 'reward': r, 'speedup': s, 'tree': ''}
if best:
    (L / 'best.json').write_text(json.dumps(best, indent=2, sort_keys=True) + '\n')
"""


def loop_env(loop: dict | None) -> dict[str, str]:
    """A search's submission count and best-so-far as the grading's environment carries them."""
    if not loop:
        return {}
    return {COUNT_ENV: str(int(loop.get("count") or 1)), BEST_ENV: json.dumps(loop.get("best"), sort_keys=True)}


def with_loop_feedback(engine: str) -> str:
    """The dev engine's shell line followed by the package's own feedback step (where the image
    has /opt/loop/sanitize_feedback.py), the engine's exit status kept. The sanitizer is called as
    every package's submit.sh calls it, with no arguments (it reads /logs/loop); one that fails
    so called leaves no feedback."""
    book = _BOOKKEEPING.replace("'", "'\"'\"'")
    return (f"{engine}; rc=$?; if [ -f /opt/loop/sanitize_feedback.py ]; then "
            f"py=$(command -v python3 || echo /usr/bin/python3); "
            f"\"$py\" -c '{book}' \"$rc\" >/dev/null 2>&1; "
            f"\"$py\" /opt/loop/sanitize_feedback.py > /logs/loop/.feedback 2>/dev/null "
            f"&& mv /logs/loop/.feedback /logs/loop/feedback.txt; fi; exit $rc")


def loop_feedback(log_dir: Path) -> str | None:
    """The package's loop feedback of a dev grading, as its sanitizer printed it; None when the
    package has none (or it printed nothing)."""
    p = Path(log_dir) / FEEDBACK_FILE
    try:
        if p.is_symlink() or not p.is_file():
            return None
        text = p.read_text(errors="replace")[:FEEDBACK_CHARS].strip("\n")
    except OSError:
        return None
    return text or None


# ---------------------------------------------------------------- the candidate's diagnostics
def dev_output(log_dir: Path, limit: int = 1 << 20) -> str:
    """What a dev grading printed: the grader's output, then the logs its engine wrote (an engine
    that sends the candidate's output to a file of its own, *.log or *.out), the last `limit` bytes of each."""
    texts = []
    d = Path(log_dir)
    # .out: a verifier's per-stage output
    logs = [sorted({*(d / w).glob("*.log"), *(d / w).glob("*.out")}) for w in DEV_PRODUCTS]
    for p in [d / "grader_output.log", *logs]:
        for f in (p if isinstance(p, list) else [p]):
            try:
                if not f.is_symlink() and f.is_file():
                    texts.append(f.read_text(errors="replace")[-limit:])
            except OSError:
                continue
    return "\n".join(texts)


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.*))?$')
_COMPILER = re.compile(r"^(?P<file>[^\s:()]+?)(?::(?P<line>\d+)(?::\d+)?|\((?P<line2>\d+)\))"
                       r":?\s*(?:fatal )?error\b[: ]\s*(?P<msg>.*)$")
_CUT = re.compile(r"^\s*\.\.\. \d+ frame\(s\) outside the candidate's files$")
MAX_LINES = 40
MAX_CHARS = 3000


def _in_scope(path: str, scope: list[str]) -> bool:
    p = path.replace("\\", "/")
    for s in scope:
        if "*" in s or "?" in s:
            if fnmatch.fnmatch(p, "*/" + s) or fnmatch.fnmatch(p, s):
                return True
        elif p == s or p.endswith("/" + s):
            return True
    return False


def _traceback(lines: list[str], i: int, scope: list[str]) -> tuple[list[str], int]:
    """The traceback starting at line i: (what is kept of it, the index after it). Kept only where
    a frame is in the scope; the exception's text only where the last frame is the candidate's or
    outside the package's tests and verifier (a message raised there may quote them)."""
    out, frames, outside, last_path = [lines[i].rstrip()], 0, 0, ""
    j = i + 1
    while j < len(lines):
        m = _FRAME.match(lines[j])
        if m:
            last_path = m.group(1)
            code = (lines[j + 1].strip() if j + 1 < len(lines) and not _FRAME.match(lines[j + 1])
                    and lines[j + 1].startswith("    ") else "")
            step = 2 if code else 1
            if _in_scope(m.group(1), scope):
                if outside:
                    out.append(f"  ... {outside} frame(s) outside the candidate's files")
                    outside = 0
                frames += 1
                out.append(lines[j].rstrip())
                if code:
                    out.append("    " + code)
            else:
                outside += 1
            j += step
            continue
        if lines[j].strip() and (lines[j].startswith((" ", "\t")) or lines[j].strip().startswith(("^", "~"))):
            j += 1  # a frame's extra lines (carets, locals)
            continue
        break
    if outside:
        out.append(f"  ... {outside} frame(s) outside the candidate's files")
    said = [lines[j].rstrip()] if j < len(lines) and lines[j].strip() else []
    k = j + 1
    while said and k < len(lines) and k <= j + 3 and lines[k].startswith((" ", "\t")) and lines[k].strip():
        said.append(lines[k].rstrip())  # a message's own further lines (indented)
        k += 1
    quoted = "/tests/" in last_path or "/verifier" in last_path or "/loop/" in last_path
    if said:
        if quoted and not _in_scope(last_path, scope):
            out.append(said[0].split(":", 1)[0] + ": (its message withheld: raised in the grader's own files)")
        else:
            out += [s[:300] for s in said]
    return (out if frames else []), k


def candidate_diagnostics(text: str, scope: list[str]) -> list[str]:
    """The candidate's own errors in a grader's output: each traceback that passes through its
    scope files, and each compiler error that names one of them (with the two lines after it),
    once each, at most MAX_LINES lines and MAX_CHARS characters."""
    lines = text.splitlines()
    blocks: list[list[str]] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("Traceback (most recent call last)"):
            kept, i = _traceback(lines, i, scope)
            if kept:
                blocks.append(kept)
            continue
        m = _COMPILER.match(ln.strip())
        if m and _in_scope(m.group("file"), scope):
            blocks.append([ln.strip()[:300]] + [x.rstrip()[:300] for x in lines[i + 1:i + 3] if x.strip()])
            i += 3
            continue
        i += 1
    out: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for n, b in enumerate(blocks):
        key = _actionable(b)
        if key in seen:
            continue
        seen.add(key)
        if len(out) + len(b) > MAX_LINES or sum(map(len, out)) + sum(map(len, b)) > MAX_CHARS:
            more = len({_actionable(x) for x in blocks[n:]} - (seen - {key}))
            out.append(f"... ({more} more not shown)")
            break
        out += b
    return out


def _actionable(block: list[str]) -> tuple[str, ...]:
    """What of a kept block the candidate can act on: its own frames and the message, without the
    count of frames cut (the same error reached through more or fewer of the grader's frames)."""
    return tuple(ln.strip()
                 for ln in block if not _CUT.match(ln) and not ln.startswith("Traceback (most recent call last)"))


def said_to_the_model(log_dir: Path, grader: str, scope: list[str]) -> tuple[str | None, list[str], list[str]]:
    """What a dev grading can tell the model: the package's loop feedback,
    the candidate's own errors in the engine's output, the engine's failed checks and workloads."""
    if grader != "dev":  # what the hidden grader says is not for the model: its gates and counts only
        return None, [], []
    return loop_feedback(log_dir), candidate_diagnostics(dev_output(log_dir), scope), dev_details(log_dir)
