"""A search on a real benchmark package (fetched, graded unchanged) through `--backend ray` on a
local multi-node Ray cluster (a head and two worker nodes on this machine), and the same search
on the local backend: both must end with the same best and the same population (ids, parents,
code, status; the figures themselves are timings and vary run to run). Prints both and the
gradings each node did (run.json's utilization.nodes); exits 1 when they differ.

The scripted model (tests/llm_server.py, the real openai client over HTTP) answers executor 1
with the package's own reference and executor 2 with that reference broken at import, so the
search has exactly one right answer to find whatever the timings do.

    python3 benchmarks/ray_same_best.py --tasks-root /path/to/LLM-Infra-Bench-faibench/tasks \
        [--task kfc/wre-router-power-of-two-choices-loop16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evaluator.task import load_task  # noqa: E402
from tests.adversarial.reward_hacking.corpus import reference_files  # noqa: E402
from tests.llm_server import ScriptedLLMServer, scripted_search  # noqa: E402

KEYS = {"OPENAI_API_KEY": "sk-test-0123456789abcdefghij"}


def engineer(rel: str, right: str):
    broken = right.rstrip("\n") + "\n\nraise ImportError('broken on purpose')\n"
    return scripted_search(lambda n, _: f"{rel}\n```python\n{right if n == 1 else broken}```\n")


def search(args: argparse.Namespace, out: Path, cache: Path, extra: list[str], respond) -> Path:
    with ScriptedLLMServer(respond) as server:
        argv = [sys.executable, "-m", "agent.cli", "run", args.task, "--tasks-root", args.tasks_root, "--llm", "openai:test-model",
                "--rounds", str(args.rounds), "--children", "2", "--seed", "7", "--out", str(out), "--quiet",
                "--set", f"llm.base_url={server.openai_base_url}", "--set", f"evaluator.local.cache_dir={cache}",
                "--set", "llm.max_usd=null", *extra]
        p = subprocess.run(argv, cwd=REPO, env={**os.environ, **KEYS, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"the search failed (exit {p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    return Path(p.stdout.strip().splitlines()[-1].removeprefix("run: "))


def outcome(run_dir: Path) -> dict:
    run = json.loads((run_dir / "run.json").read_text())
    state = json.loads(sorted(run_dir.glob("checkpoints/round-*"))[-1].joinpath("pesflow_state.json").read_text())
    pop = [{k: s[k] for k in ("id", "parent_id", "content_hash", "status", "duplicate_of")} for s in state["population"]["solutions"]]
    return {"status": run["status"], "best": run["best"]["id"], "population": pop}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks-root", required=True)
    ap.add_argument("--task", default="kfc/wre-router-power-of-two-choices-loop16")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    task = load_task(args.task, [args.tasks_root])
    rel, right = next(iter(reference_files(task).items()))
    work = Path(tempfile.mkdtemp(prefix="ray-same-best-"))
    os.environ["PYTHONPATH"] = str(REPO)  # the nodes import the evaluator from this checkout (ship_code off)
    small = {"object_store_memory": 80 << 20}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **small})
    nodes = [cluster.add_node(num_cpus=2, **small) for _ in range(2)]
    cluster.wait_for_nodes()
    try:
        local = outcome(search(args, work / "local", work / "cache", [], engineer(rel, right)))
        ray_dir = search(args, work / "ray", work / "cache", [
            "--backend", "ray", "--set", f"evaluator.ray.address={cluster.address}", "--set", "evaluator.ray.ship_code=false",
            "--set", f"evaluator.ray.node_cache_dir={work / 'nodes'}", "--set", "evaluator.ray.cpus=1"], engineer(rel, right))
        on_ray = outcome(ray_dir)
        per_node = json.loads((ray_dir / "run.json").read_text())["utilization"].get("nodes")
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(f"{args.task} ({task.root}, official: {task.source.official}), {args.rounds} rounds x 2 children, seed 7")
    for name, o in (("local", local), ("ray", on_ray)):
        print(f"  {name:5s}: {o['status']}, best {o['best']}, population " + ", ".join(
            f"{s['id']}:{s['status']}" + (f"(={s['duplicate_of']})" if s["duplicate_of"] else "") for s in o["population"]))
    print(f"  ray nodes ({len(nodes)} workers): " + ", ".join(f"{k} {v['gradings']} gradings {v['seconds']:.1f} s" for k, v in (per_node or {}).items()))
    same = local == on_ray
    print(f"  same best and population: {same}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
