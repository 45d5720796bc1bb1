"""The population's pure functions: the two features a cell is made of, their fixed log2 bins,
fitness normalization and the parent draw (agent/population/database.py's docstring gives the
rules). No state: the caller passes the RNG."""

from __future__ import annotations

import difflib
import math
import random
from typing import Sequence

FEATURES = ("code_lines", "diff_lines")


def code_lines(files: dict[str, str]) -> int:
    return sum(len(text.splitlines()) for text in files.values())


def diff_lines(baseline: dict[str, str], files: dict[str, str]) -> int:
    """Lines added plus lines removed, file by file, as a diff stat counts them."""
    total = 0
    for path in sorted(set(baseline) | set(files)):
        a = baseline.get(path, "").splitlines()
        b = files.get(path, "").splitlines()
        if a == b:
            continue
        ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        total += sum((i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")
    return total


def feature_bin(name: str, value: float, baseline_lines: int, bins: int) -> int:
    """The bin of one feature value on the fixed log2 scale described in the module docstring."""
    l0 = max(baseline_lines, 1)
    if name == "code_lines":
        b = bins // 2 + math.floor(2 * math.log2(max(value, 1) / l0))
    elif name == "diff_lines":
        b = math.floor(math.log2(1 + max(value, 0) / max(1.0, l0 / 16)))
    else:
        raise ValueError(f"unknown feature {name!r}; use one of {list(FEATURES)}")
    return min(max(b, 0), bins - 1)


def normalized_fitness(fitness: Sequence[float]) -> list[float]:
    """Min-max of log(fitness) into [0, 1]; all equal -> all 1.0. Scale-free by construction."""
    logs = [math.log(f) for f in fitness]
    lo, hi = min(logs), max(logs)
    if hi - lo <= 1e-12:
        return [1.0] * len(logs)
    return [(x - lo) / (hi - lo) for x in logs]


def select_parent(
    fitness: Sequence[float],
    rng: random.Random,
    *,
    exploration_ratio: float,
    exploitation_ratio: float,
    temperature: float,
) -> tuple[int, str]:
    """Index of the chosen parent and how: "explore", "exploit" or "boltzmann".

    Ties for the best go to the lowest index (callers order by addition).
    """
    if not fitness:
        raise ValueError("select_parent needs at least one candidate")
    u = rng.random()
    if u < exploration_ratio:
        return rng.randrange(len(fitness)), "explore"
    if u < exploration_ratio + exploitation_ratio:
        return max(range(len(fitness)), key=lambda i: (fitness[i], -i)), "exploit"
    norm = normalized_fitness(fitness)
    # Shifted by the max so a small temperature cannot overflow; the ratios are unchanged.
    weights = [math.exp((n - 1.0) / temperature) for n in norm]
    return rng.choices(range(len(fitness)), weights=weights)[0], "boltzmann"


def concatenated(files: dict[str, str]) -> str:
    return "\n".join(f"# ==== {path} ====\n{files[path]}" for path in sorted(files))
