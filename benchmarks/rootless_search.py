"""The README's two commands for the main job, run as an ordinary user (no root, no daemon), on a
real benchmark package graded unchanged: a clean clone of this checkout in the user's home, the
README's install line (a venv, `pip install -e '.[tasks]'` from PyPI), then `./run_task.sh` on
kfc/wre-router-power-of-two-choices-loop16 of the benchmark's own checkout (a copy in the home
too, its origin the official URL), the model a scripted one (tests/llm_server.py, the real openai
client over HTTP on 127.0.0.1) that answers executor 1 with the package's reference and executor
2 with it broken at import. Prints how long each step took, the run's status and best, and each
grading's sandbox (`environment.sandbox`: rootless). Run as root (it makes the user):

    python3 benchmarks/rootless_search.py --benchmark /path/to/LLM-Infra-Bench-faibench [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import pwd
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evaluator.task import load_task  # noqa: E402
from tests.adversarial.reward_hacking.corpus import reference_files  # noqa: E402
from tests.llm_server import ScriptedLLMServer  # noqa: E402
from tests.rootless_user import User, as_user_argv  # noqa: E402
from benchmarks.ray_same_best import engineer  # noqa: E402

NAME = "pesflow-researcher"


def user_account() -> User:
    try:
        pw = pwd.getpwnam(NAME)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", NAME], check=True)
        pw = pwd.getpwnam(NAME)
    return User(NAME, pw.pw_uid, pw.pw_gid, Path(pw.pw_dir))


def as_user(user: User, line: str, timeout: float = 1800) -> tuple[subprocess.CompletedProcess, float]:
    """`line` in bash as the user, in its home, with a login's clean environment."""
    argv = as_user_argv(user, ["bash", "-c", line])
    argv = [a for a in argv if not a.startswith("PYTHONPATH=")]  # a new user's environment has none
    t0 = time.monotonic()
    r = subprocess.run(argv, cwd=str(user.home), capture_output=True, text=True, timeout=timeout)
    return r, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", required=True, help="a checkout of the public benchmark (its git folder is cloned)")
    ap.add_argument("--task", default="kfc/wre-router-power-of-two-choices-loop16")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    user = user_account()
    home = user.home
    for d in ("pesflow", "faibench"):
        subprocess.run(["rm", "-rf", str(home / d)], check=True)
    subprocess.run(["git", "clone", "-q", str(REPO), str(home / "pesflow")], check=True)
    # a copy, git folder and all (the mirror holds no blobs of its largest files: a clone cannot check out)
    subprocess.run(["cp", "-a", args.benchmark, str(home / "faibench")], check=True)
    commit = subprocess.run(["git", "-C", args.benchmark, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(home)], check=True)

    readme = (REPO / "README.md").read_text()
    install = next(ln for ln in readme.splitlines() if ln.startswith("python3 -m venv .venv") and "[tasks]" in ln)
    install = install.split(" && OPENAI_API_KEY=")[0]  # the line's install half; its search half is run below
    r, t_install = as_user(user, f"cd ~/pesflow && {install}")
    if r.returncode != 0:
        raise SystemExit(f"the README's install failed as {NAME} (exit {r.returncode}): {r.stderr.strip().splitlines()[-3:]}")
    print(f"as {NAME} (uid {user.uid}): install ({install}): {t_install:.0f} s")

    task = load_task(args.task, [args.benchmark + "/tasks"])
    rel, right = next(iter(reference_files(task).items()))
    with ScriptedLLMServer(engineer(rel, right)) as server:
        line = (f"cd ~/pesflow && . .venv/bin/activate && OPENAI_API_KEY=sk-test-0123456789abcdefghij ./run_task.sh {shlex.quote(args.task)} "
                f"--llm openai:test-model --rounds {args.rounds} --children 2 --seed 7 --tasks-root ~/faibench/tasks --quiet "
                f"--set llm.base_url={server.openai_base_url} --set llm.max_usd=null")
        r, t_run = as_user(user, line)
    if r.returncode != 0:
        raise SystemExit(f"the search failed as {NAME} (exit {r.returncode}): {r.stderr.strip().splitlines()[-5:]}")
    run_dir = Path(r.stdout.strip().splitlines()[-1].removeprefix("run: "))
    run_dir = run_dir if run_dir.is_absolute() else home / "pesflow" / run_dir
    run = json.loads((run_dir / "run.json").read_text())
    sandboxes: dict = {}
    for v in run_dir.glob("**/verdict.json"):
        env = json.loads(v.read_text()).get("environment") or {}
        sandboxes[env.get("sandbox")] = sandboxes.get(env.get("sandbox"), 0) + 1
    print(f"  search ({args.rounds} rounds x 2 children, ./run_task.sh): {t_run:.0f} s, status {run['status']}, "
          f"best {run['best']['id']} (speedup {run['best'].get('speedup')}), run dir {run_dir}")
    print(f"  gradings by sandbox: {sandboxes}; task {task.name} at {commit[:7]} (official: {task.source.official})")


if __name__ == "__main__":
    main()
