"""The official Φ-Bench checkout: fetched at a pinned commit, and every package's source named.

`pesflow tasks fetch` clones the benchmark's public repository into pesflow's cache at a
pinned commit and records where (`<cache>/benchmark.json`); task names then resolve there
after `--tasks-root` and PESFLOW_TASKS_PATH, before the bundled packages. The commands that
resolve a catalog name do the same on first use (`first_use`, benchmark.fetch_on_first_use);
a failure there is remembered (`<cache>/benchmark-fetch-failed.json`) for
benchmark.fetch_retry_hours, so that offline machines and the test suite pay for it once.
Every verdict and run.json carries a package's source: the root it was found in, the repository and commit it
comes from, and whether it is the official package (a clean checkout of the benchmark's
repository) or not (pesflow's bundled re-creation, a modified checkout, any other folder).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

CACHE_HOME_ENV = "PESFLOW_CACHE_HOME"  # where benchmark.json lives (default ~/.cache/pesflow)
BUNDLED = Path(__file__).resolve().parent.parent / "tasks"


class FetchError(Exception):
    """The benchmark could not be fetched: one line naming the cause and the fix."""


class PackageSource(BaseModel):
    root: str  # the tasks root the package was found in
    repo: str | None  # the repository it comes from (None: not a git checkout)
    commit: str | None
    official: bool  # a clean checkout of the official benchmark (not pesflow's re-creation)
    content_hash: str
    note: str = ""  # why it is not official, for people


def cache_home() -> Path:
    return Path(os.environ.get(CACHE_HOME_ENV) or "~/.cache/pesflow").expanduser()


def pointer_path() -> Path:
    return cache_home() / "benchmark.json"


def failed_path() -> Path:
    return cache_home() / "benchmark-fetch-failed.json"


def fetched() -> dict | None:
    """What `pesflow tasks fetch` recorded (dir, url, commit), if its checkout is still there."""
    try:
        rec = json.loads(pointer_path().read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and (Path(rec.get("dir", "")) / "tasks").is_dir() else None


def fetched_root() -> Path | None:
    rec = fetched()
    return Path(rec["dir"]) / "tasks" if rec else None


# git never asks for a password (a private or misspelt URL would wait on the terminal), and a
# transfer that stalls for 60 s is given up rather than waited on for the whole timeout.
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_HTTP_LOW_SPEED_LIMIT": "1000", "GIT_HTTP_LOW_SPEED_TIME": "60"}


def _git(*args: str, cwd: Path | None = None, timeout: float = 600) -> str:
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **GIT_ENV}, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise FetchError("git is not installed; install it (apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise FetchError(f"git {args[0]} took longer than {timeout:g} s: no network? check it and "
                         "benchmark.url") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise FetchError(f"git {args[0]} failed: {last}")
    return r.stdout.strip()


def fetch(url: str, ref: str, dest: Path) -> dict:
    """Clone (or update) `url` into `dest` and check out `ref` (a commit, tag or branch), detached;
    record it as the benchmark later commands use. Returns the record."""
    dest = dest.expanduser().resolve()
    if (dest / ".git").is_dir():
        _git("remote", "set-url", "origin", url, cwd=dest)
        _git("fetch", "--quiet", "origin", cwd=dest)
    elif dest.exists() and any(dest.iterdir()):
        raise FetchError(f"{dest} exists and is not a git checkout; pass another --dir or remove it")
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git("clone", "--quiet", "--no-checkout", url, str(dest))
    try:
        _git("checkout", "--quiet", "--detach", ref, cwd=dest)
    except FetchError:
        _git("checkout", "--quiet", "--detach", f"origin/{ref}", cwd=dest)
    commit = _git("rev-parse", "HEAD", cwd=dest)
    if not (dest / "tasks").is_dir():
        raise FetchError(f"{url} at {commit[:12]} has no tasks/ folder: not the Φ-Bench repository? fix benchmark.url")
    rec = {"dir": str(dest), "url": url, "ref": ref, "commit": commit,
           "fetched": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    pointer_path().parent.mkdir(parents=True, exist_ok=True)
    tmp = pointer_path().with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    tmp.replace(pointer_path())
    failed_path().unlink(missing_ok=True)  # fetched now: no failure to remember
    source_of.cache_clear()
    return rec


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def fetch_failure() -> dict | None:
    """The last failed first-use fetch ({url, ref, why, tried, retry_after}) while it is
    remembered, i.e. before its retry_after."""
    try:
        rec = json.loads(failed_path().read_text())
        until = datetime.fromisoformat(rec["retry_after"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return rec if until > _now() else None


def fetch_note() -> str | None:
    """Why the benchmark's packages are not here, while a failed fetch is remembered: a clause for
    the line that names a bundled re-creation (`say_source`)."""
    rec = fetch_failure()
    if rec is None:
        return None
    return (f"fetching the benchmark failed at {rec.get('tried')} ({rec.get('why')}); not tried again before "
            f"{rec['retry_after']} (benchmark.fetch_retry_hours); `pesflow tasks fetch` tries now")


def _remember_failure(url: str, ref: str, why: str, retry_hours: float) -> None:
    now = _now()
    rec = {"url": url, "ref": ref, "why": why, "tried": now.isoformat(),
           "retry_after": (now + timedelta(hours=retry_hours)).isoformat()}
    with contextlib.suppress(OSError):  # a cache that cannot be written only means trying again next time
        failed_path().parent.mkdir(parents=True, exist_ok=True)
        tmp = failed_path().with_suffix(".tmp")
        tmp.write_text(json.dumps(rec, indent=1))
        tmp.replace(failed_path())


@contextlib.contextmanager
def _fetch_lock():
    """One first-use fetch at a time per cache (a baselines matrix, two shells); the others wait
    for it, then find its checkout (or its remembered failure)."""
    try:
        cache_home().mkdir(parents=True, exist_ok=True)
        fd = os.open(cache_home() / "benchmark.lock", os.O_CREAT | os.O_RDWR, 0o644)
    except OSError:
        yield  # no writable cache: fetch unlocked
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def first_use(url: str, ref: str, dest: Path, timeout: float, retry_hours: float) -> dict | None:
    """Fetch the pinned benchmark the first time a command needs it (as `pesflow tasks fetch`):
    its record, or None where it cannot, the failure remembered for `retry_hours` (a failure of
    the same url and ref remembered is not tried again). The repository must answer within
    `timeout` seconds (git ls-remote) before the clone starts, so that no network costs little."""
    with _fetch_lock():
        if (rec := fetched()) is not None:
            return rec
        fail = fetch_failure()  # remembered until its retry_after, set by benchmark.fetch_retry_hours when it failed
        if fail is not None and (fail.get("url"), fail.get("ref")) == (url, ref):
            return None
        try:
            _git("ls-remote", url, "HEAD", timeout=timeout)
            # said once it answered, as the clone may take a while; unreachable, the fallback's line says it all
            print(f"pesflow: fetching the pinned benchmark ({url} at {ref[:12]}) into {dest.expanduser()}, once "
                  "(benchmark.fetch_on_first_use)", file=sys.stderr, flush=True)
            return fetch(url, ref, dest)
        except FetchError as e:
            _remember_failure(url, ref, str(e), retry_hours)
            return None


def _norm_url(url: str | None) -> str:
    """github.com/owner/name for the usual spellings (https, ssh, .git); a local path as itself."""
    if not url:
        return ""
    u = url.strip().rstrip("/")
    u = re.sub(r"\.git$", "", u)
    u = re.sub(r"^(https?://|ssh://|git://)", "", u)
    u = re.sub(r"^git@([^:]+):", r"\1/", u)
    u = re.sub(r"^[^@/]+@", "", u)
    return os.path.abspath(u) if u.startswith(("/", ".")) else u.lower()


@lru_cache(maxsize=256)
def source_of(package_root: Path, tasks_root: Path, content_hash: str, official_url: str) -> PackageSource:
    """Where a package comes from. Official: a clean checkout of `official_url` (or of what
    `pesflow tasks fetch` fetched); pesflow's bundled packages never are."""
    base = {"root": str(tasks_root), "content_hash": content_hash}
    if package_root.is_relative_to(BUNDLED):
        commit = _try_git("rev-parse", "HEAD", cwd=BUNDLED)
        return PackageSource(**base, repo="pesflow (bundled re-creation)", commit=commit, official=False,
                             note="pesflow's own re-creation of the task, not the benchmark's package")
    top = _try_git("rev-parse", "--show-toplevel", cwd=package_root)
    if top is None:
        return PackageSource(**base, repo=None, commit=None, official=False, note="not a git checkout")
    url = _try_git("config", "--get", "remote.origin.url", cwd=Path(top))
    commit = _try_git("rev-parse", "HEAD", cwd=Path(top))
    rec = fetched()
    wanted = {_norm_url(official_url)} | ({_norm_url(rec["url"])} if rec else set())
    is_official_repo = bool(url) and _norm_url(url) in wanted
    dirty = _try_git("status", "--porcelain", "--", str(package_root), cwd=Path(top))
    if not is_official_repo:
        return PackageSource(**base, repo=url, commit=commit, official=False,
                             note="not a checkout of the benchmark's repository")
    if dirty:
        return PackageSource(**base, repo=url, commit=commit, official=False,
                             note="the checkout's copy of the package is modified")
    return PackageSource(**base, repo=url, commit=commit, official=True)


def _try_git(*args: str, cwd: Path) -> str | None:
    try:
        return _git(*args, cwd=cwd, timeout=30)
    except FetchError:
        return None


def say_source(name: str, root: Path, source: PackageSource) -> None:
    """The one line (stderr) a command says when a task name resolved to something not official."""
    if source.official:
        return
    hint = ""
    if "bundled" in (source.repo or ""):
        hint = f"; {fetch_note() or '`pesflow tasks fetch` gets the official package'}"
    print(f"pesflow: {name} is {source.note or 'not the official package'} ({root}){hint}", file=sys.stderr)
