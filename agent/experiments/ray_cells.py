"""`pesflow baselines CONFIG --ray [ADDRESS]`: the matrix's cells as Ray tasks (issue 21, item 4).

A cell is one search (or one noop/oracle grading) on one node, asking Ray for the GPUs its
package needs (num_gpus = task.toml's gpus) and one CPU. The package travels once (one object
in Ray's store, unpacked once per node by content hash); the node runs the cell exactly as
`pesflow baselines` would here (agent/experiments/matrix.run_cell, with the node's own
evaluator backend) into a scratch directory, and the cell's run directory comes back as a tar
into DIR/cells/ as soon as it finishes. A driver that is killed loses only the cells in
flight (Ray ends the tasks of a driver that is gone); run again, the finished cells are kept.
A cell lost with its node is run again elsewhere (Ray's task retries), from scratch, as the
matrix does with an unfinished cell.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from evaluator.backends import archive
from evaluator.backends.ray_backend import RayBackend, node as node_side, package_rel
from evaluator.config import EvaluatorConfig, RayConfig

AGENT = str(Path(__file__).resolve().parents[1])


def _run_cell_on_node(base: dict[str, Any], bc: dict[str, Any], cell: tuple[str, str, int], rel: str, content_hash: str,
                      package: bytes, node_cache_dir: str, runner: Callable[..., str]) -> bytes:
    """On the node: the package unpacked once (by hash), the cell run into scratch by `runner`
    (agent/experiments/matrix.run_cell_of_data), its run directory as a tar."""
    pkg = node_side.locked_unpacked(EvaluatorConfig(ray=RayConfig(node_cache_dir=node_cache_dir)), content_hash,
                                    package)
    with tempfile.TemporaryDirectory(prefix="pesflow-cell-") as tmp:
        out = Path(tmp)
        return node_side.archive_dir(out / runner(base, bc, cell, out, [str(pkg)]))


def run_cells(base: Any, bc: Any, cells: list[Any], tasks: dict[str, Any], out: Path, address: str,
              on_done: Callable[[Any, str | None], None], runner: Callable[..., str]) -> None:
    """Every cell as a Ray task; `on_done(cell, error)` as each one's run directory is back in place."""
    backend = RayBackend(EvaluatorConfig(backend="ray", ray=base.evaluator.ray.model_copy(update={"address": address})))
    backend.connect(modules=(AGENT,))
    import ray  # optional (.[ray]); connect() said so in one line when it is missing

    remote = ray.remote(_run_cell_on_node)
    packages: dict[str, Any] = {}
    refs: dict[Any, Any] = {}
    base_d, bc_d = base.model_dump(mode="json"), bc.model_dump(mode="json")
    base_d["evaluator"]["backend"] = base.evaluator.ray.node_backend  # a cell grades on its node, not through Ray again
    for cell in cells:
        task = tasks[cell.task]
        if task.content_hash not in packages:
            packages[task.content_hash] = ray.put(node_side.package_tar(task.root, package_rel(task)))
        refs[remote.options(num_cpus=1, num_gpus=task.gpus, max_retries=base.evaluator.ray.node_retries).remote(
            base_d, bc_d, (cell.task, cell.method, cell.seed), package_rel(task), task.content_hash,
            packages[task.content_hash], base.evaluator.ray.node_cache_dir, runner)] = cell
    try:
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            cell = refs.pop(done[0])
            try:
                data = ray.get(done[0])
            except Exception as e:  # the cell's own failure, raised on its node: this cell only
                on_done(cell, " ".join(f"{type(e).__name__}: {e}".split())[:300])
                continue
            d = out / cell.rel
            shutil.rmtree(d, ignore_errors=True)
            archive.extract_regular(io.BytesIO(data), d, limit=1 << 34)
            on_done(cell, None)
    finally:
        for ref in refs:  # interrupted: nothing left running for a driver that stops
            ray.cancel(ref, force=True)
