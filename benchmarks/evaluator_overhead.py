"""What grading costs beyond the grader's own run, per bundled task, on this machine.

For each task: preparing once (cold, from an empty cache), then N warm gradings of the
noop candidate with the hidden grader. Per candidate it splits the wall time into the
grader's own run (timed inside the sandbox) and pesflow's overhead (everything else:
namespaces, layers, applying the candidate, copying logs). It also prints how many
candidates an hour that gives, warm, against preparing before each one.

    python3 benchmarks/evaluator_overhead.py [--repeats 5] [--tasks kfc/... ...] [--install-steps auto|skip]

With --backend docker (an engine at DOCKER_HOST; podman's: tools/podman_setup.sh): preparing is
the image build from the base image (the task's image and the engine's dangling build layers
are removed first, unless --keep-image), per-candidate overhead is measured warm (one container
reused and reset between candidates) and cold (a new container per candidate), and candidates
per hour are measured over a batch of noop gradings with 1 and with 2 workers.

    python3 benchmarks/evaluator_overhead.py --backend docker [--repeats 5] [--batch 8] [--keep-image]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from evaluator.config import DockerConfig, EvaluatorConfig, LocalConfig
from evaluator.evaluation import Evaluator
from evaluator.parallel import grade_all

BUNDLED = [
    "kfc/wre-router-power-of-two-choices-loop16",
    "kfc/wro-sbert-paraphrase-mining-loop16",
    "lh/wro-vllm-v1-priority-request-queue",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tasks", nargs="*", default=BUNDLED)
    ap.add_argument("--install-steps", default="auto", choices=["auto", "skip", "require"])
    ap.add_argument("--grader", default="hidden", choices=["dev", "hidden"])
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--batch", type=int, default=8, help="docker: noop gradings per throughput measurement")
    ap.add_argument("--keep-image", action="store_true", help="docker: time prepare with the image already built")
    args = ap.parse_args()
    if args.backend == "docker":
        return docker_main(args)
    with tempfile.TemporaryDirectory(prefix="pesflow-bench-") as tmp:
        cfg = EvaluatorConfig(local=LocalConfig(cache_dir=str(Path(tmp) / "cache"), install_steps=args.install_steps))
        ev = Evaluator(cfg, log_root=Path(tmp) / "logs")
        print(f"{'task':44} {'prepare':>8} {'mode':>8} {'grader':>7} {'overhead':>8} {'warm/h':>7} {'cold/h':>7} {'ratio':>6} {'machinery':>9}")
        for name in args.tasks:
            task = ev.task(name)
            t0 = time.monotonic()
            prepared = ev.prepare(task)
            prepare_s = time.monotonic() - t0
            assert not prepared.cached
            # noop: a full grading (correctness + timing); negative: a candidate that fails fast,
            # as many LLM proposals do.
            for mode in ("noop", "negative"):
                walls, graders = [], []
                for _ in range(args.repeats):
                    v = ev.evaluate(task, mode=mode, grader=args.grader)
                    if v.grader_seconds is None:
                        raise SystemExit(f"{name}: {v.status.value}: {v.message}")
                    walls.append(v.seconds)
                    graders.append(v.grader_seconds)
                wall, grader = statistics.median(walls), statistics.median(graders)
                overhead = statistics.median(w - g for w, g in zip(walls, graders))
                warm, cold = 3600 / wall, 3600 / (wall + prepare_s)
                machinery = (prepare_s + overhead) / overhead  # candidates/hour of pesflow's own work, warm vs cold
                print(f"{name:44} {prepare_s:8.2f} {mode:>8} {grader:7.3f} {overhead:8.3f} {warm:7.0f} {cold:7.0f} "
                      f"{warm / cold:5.1f}x {machinery:8.0f}x")
        print(f"(seconds; median of {args.repeats} warm gradings per mode, {args.grader} grader. overhead = wall - the "
              "grader's own run, timed inside the sandbox. ratio = candidates/hour warm vs preparing before each; "
              "machinery = the same ratio counting only pesflow's own time)")


def _median_split(ev: Evaluator, task, mode: str, grader: str, repeats: int) -> tuple[float, float]:  # noqa: ANN001
    """(median wall, median overhead = wall - the grader's own run) of `repeats` gradings."""
    walls, overheads = [], []
    for _ in range(repeats):
        v = ev.evaluate(task, mode=mode, grader=grader)
        if v.grader_seconds is None:
            raise SystemExit(f"{task.name}: {v.status.value}: {v.message}")
        walls.append(v.seconds)
        overheads.append(v.seconds - v.grader_seconds)
    return statistics.median(walls), statistics.median(overheads)


def _drop_image(ev: Evaluator, task) -> None:  # noqa: ANN001
    """The task's image and the engine's dangling layers (its build cache) removed: a cold build."""
    from docker.errors import APIError, NotFound

    backend = ev.backend.inner
    api = backend.api()
    for tag in (backend.image_tag(task), task.toml.environment.docker_image):
        try:
            if tag:
                api.remove_image(tag, force=True)
        except (NotFound, APIError):
            pass
    api.prune_images(filters={"dangling": True})


def docker_main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="pesflow-bench-") as tmp:
        def evaluator(name: str, **kw: object) -> Evaluator:
            workers = kw.pop("workers", None)
            cfg = EvaluatorConfig(backend="docker", workers=workers, docker=DockerConfig(cache_dir=str(Path(tmp) / "cache"), **kw))
            return Evaluator(cfg, log_root=Path(tmp) / "logs" / name)

        print(f"{'task':40} {'prepare':>8} {'mode':>8} {'grader':>7} {'warm':>6} {'cold':>6} {'1 worker/h':>10} {'2 workers/h':>11}")
        for name in args.tasks:
            warm_ev, cold_ev = evaluator("warm"), evaluator("cold", warm_containers=False)
            task = warm_ev.task(name)
            if not args.keep_image:
                _drop_image(warm_ev, task)
            t0 = time.monotonic()
            warm_ev.prepare(task)
            prepare_s = time.monotonic() - t0
            warm_ev.evaluate(task, mode="noop", grader=args.grader)  # the warm container exists from here on
            cold_ev.prepare(task)
            rates = {}
            for workers in (1, 2):
                ev = evaluator(f"w{workers}", workers=workers)
                ev.prepare(task)
                grade_all(lambda _: ev.evaluate(task, mode="noop", grader=args.grader), range(workers), workers)  # warm up
                t0 = time.monotonic()
                grade_all(lambda _: ev.evaluate(task, mode="noop", grader=args.grader), range(args.batch), workers)
                rates[workers] = 3600 * args.batch / (time.monotonic() - t0)
                ev.close()
            for mode in ("noop", "negative"):
                wall, warm = _median_split(warm_ev, task, mode, args.grader, args.repeats)
                _, cold = _median_split(cold_ev, task, mode, args.grader, args.repeats)
                grader = wall - warm
                r1, r2 = (f"{rates[1]:.0f}", f"{rates[2]:.0f}") if mode == "noop" else ("-", "-")
                print(f"{name:40} {prepare_s:8.2f} {mode:>8} {grader:7.3f} {warm:6.3f} {cold:6.3f} {r1:>10} {r2:>11}")
            warm_ev.close()
            cold_ev.close()
        print(f"(seconds; docker backend at {warm_ev.backend.inner._base_url}; median of {args.repeats} gradings per mode, "
              f"{args.grader} grader. prepare = image build{' (image kept)' if args.keep_image else ' from the base image'}. "
              "warm/cold = per-candidate overhead (wall - the grader's own run) in a reused, reset container / a new one. "
              f"N workers/h = noop candidates per hour over a batch of {args.batch} graded N at a time)")


if __name__ == "__main__":
    main()
