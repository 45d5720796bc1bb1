import json
import random
from collections import Counter

import pytest

import agent.rundir.store as population  # the atomic checkpoint writer lives with the run directory's
from agent.population.loongflow_format import loongflow_files
from agent.population.database import (
    Population,
    PopulationConfig,
    PopulationError,
    Solution,
)
from agent.population.sampling import diff_lines, feature_bin, normalized_fitness, select_parent

BASE = {"kernel.py": "".join(f"x{i} = {i}\n" for i in range(32)), "util.py": "def f():\n    return 1\n"}


def sol(id, speedup=None, *, island=0, round=1, parent="baseline", status="ok", files=None, **kw) -> Solution:
    files = files if files is not None else {**BASE, "kernel.py": BASE["kernel.py"] + f"# {id}\n"}
    return Solution(
        id=id, parent_id=parent, island=island, round=round, files=files,
        content_hash=kw.pop("content_hash", f"h-{id}"), status=status, speedup=speedup, **kw,
    )


def pop_with(speedups: dict[str, float], *, base_speedup=1.0, **cfg) -> Population:
    """A one-island population: the baseline plus one child per entry, all correct."""
    pop = Population(PopulationConfig(islands=cfg.pop("islands", 1), **cfg), BASE)
    pop.add(sol("baseline", base_speedup, round=0, parent=None, files=dict(BASE)))
    for i, (name, s) in enumerate(speedups.items()):
        pop.add(sol(name, s, round=i + 1))
    return pop


def picks(pop: Population, island: int, seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [pop.sample(island, rng)[0].id for _ in range(n)]


# ---------------------------------------------------------------- islands and failures


def test_island_0_is_a_real_island():
    pop = Population(PopulationConfig(islands=2, exploration_ratio=0, exploitation_ratio=1), BASE)
    pop.add(sol("baseline", 1.0, round=0, parent=None, files=dict(BASE)))
    pop.add(sol("r01-c0", 3.0, island=0))
    pop.add(sol("r02-c0", 5.0, island=1, round=2))
    assert [s.id for s in pop.members(0)] == ["baseline", "r01-c0"]
    assert [s.id for s in pop.members(1)] == ["baseline", "r02-c0"]
    parent, _ = pop.sample(0, random.Random(0))
    assert parent.id == "r01-c0"  # island 0's own best, not the global best of island 1
    assert pop.island_for_round(1) == 0 and pop.island_for_round(2) == 1 and pop.island_for_round(3) == 0
    with pytest.raises(PopulationError, match="round >= 1"):
        pop.island_for_round(0)
    with pytest.raises(PopulationError, match="islands are 0..1"):
        pop.sample(2, random.Random(0))


def test_failures_are_kept_but_never_parents_or_inspirations():
    pop = pop_with({"good1": 1.5, "good2": 2.0}, inspirations=3, exploration_ratio=0.5, exploitation_ratio=0.1)
    bad = [
        sol("hf", 99.0, status="hard_fail", lessons="wrong dtype"),
        sol("okhf", 99.0, hard_fail_reasons=["correctness_failed"]),
        sol("to", None, status="timeout"),
        sol("nc", None, status="no_code", files={}),
        sol("zero", 0.0),
    ]
    for s in bad:
        pop.add(s)
    assert {s.id for s in pop.failures()} == {"hf", "okhf", "to", "nc"}
    assert pop.get("hf").lessons == "wrong dtype"
    assert len(pop.all()) == 8
    rng = random.Random(1)
    seen = Counter()
    for _ in range(200):
        parent, insp = pop.sample(0, rng)
        assert parent.id not in {s.id for s in insp}
        seen.update([parent.id, *(s.id for s in insp)])
    assert not set(seen) & {s.id for s in bad}
    assert set(seen) == {"baseline", "good1", "good2"}


def test_no_correct_member_falls_back_to_baseline():
    pop = Population(PopulationConfig(islands=2), BASE)
    pop.add(sol("baseline", None, round=0, parent=None, files=dict(BASE)))  # no speedup: not a member
    pop.add(sol("r01-c0", None, status="hard_fail"))
    assert pop.sample(1, random.Random(0))[0].id == "baseline"
    empty = Population(PopulationConfig(), BASE)
    with pytest.raises(PopulationError, match="add the baseline"):
        empty.sample(0, random.Random(0))


# ---------------------------------------------------------------- selection


def test_normalization_is_log_min_max_and_scale_free():
    assert normalized_fitness([2.0, 2.0]) == [1.0, 1.0]
    assert normalized_fitness([1.0, 4.0, 2.0]) == pytest.approx([0.0, 1.0, 0.5])
    assert normalized_fitness([1000, 1001, 1002]) == pytest.approx(normalized_fitness([10, 10.01, 10.02]))


def test_boltzmann_keeps_the_runner_up_alive_beside_an_outlier():
    # Raw scores as Boltzmann input (exp(50/0.3) vs exp(1.1/0.3)) would never pick 1.1.
    pop = pop_with({"small": 1.1, "huge": 50.0}, exploration_ratio=0, exploitation_ratio=0)
    got = Counter(picks(pop, 0, seed=7, n=2000))
    assert got["small"] > 20  # expected share ~3.6%
    assert got["huge"] > 1600


def test_boltzmann_is_not_uniform_on_close_large_speedups():
    # Raw scores divided by their scale would make {1000, 1001, 1002} look uniform.
    pop = pop_with({"b": 1001.0, "c": 1002.0}, base_speedup=1000.0, exploration_ratio=0, exploitation_ratio=0)
    got = Counter(picks(pop, 0, seed=3, n=2000))
    assert got["c"] > 1400 and got["baseline"] < 150  # weights 1 : e^(0.5/0.3) : e^(1/0.3)


@pytest.mark.parametrize("speedups", [(1.0, 1.1, 50.0), (1000.0, 1001.0, 1002.0)])
def test_scaling_every_speedup_leaves_selection_unchanged(speedups):
    s0, s1, s2 = speedups
    a = pop_with({"b": s1, "c": s2}, base_speedup=s0)
    b = pop_with({"b": s1 * 100, "c": s2 * 100}, base_speedup=s0 * 100)
    pa, pb = picks(a, 0, seed=11, n=2000), picks(b, 0, seed=11, n=2000)
    assert pa == pb
    assert len(set(pa)) == 3


def test_exploration_and_exploitation_shares_match_the_config():
    rng = random.Random(5)
    fit = [1.0, 2.0, 3.0, 4.0]
    modes = Counter(
        select_parent(fit, rng, exploration_ratio=0.2, exploitation_ratio=0.3, temperature=0.3)[1]
        for _ in range(2000)
    )
    assert modes["explore"] / 2000 == pytest.approx(0.2, abs=0.03)
    assert modes["exploit"] / 2000 == pytest.approx(0.3, abs=0.03)
    assert modes["boltzmann"] / 2000 == pytest.approx(0.5, abs=0.03)
    # Seen from sample(): a near-zero temperature makes Boltzmann pick the best too, so
    # only exploration picks anything else, with share 0.2 * 3/4.
    pop = pop_with({"b": 2.0, "c": 3.0, "d": 4.0}, temperature=1e-3)
    got = Counter(picks(pop, 0, seed=9, n=2000))
    assert (2000 - got["d"]) / 2000 == pytest.approx(0.2 * 3 / 4, abs=0.03)
    # A huge temperature makes Boltzmann uniform: P(best) = 0.3 + 0.7 / 4.
    pop = pop_with({"b": 2.0, "c": 3.0, "d": 4.0}, temperature=1e6)
    got = Counter(picks(pop, 0, seed=9, n=2000))
    assert got["d"] / 2000 == pytest.approx(0.3 + 0.7 / 4, abs=0.03)


def test_same_seed_same_sequence_and_round_trip():
    pop = Population(PopulationConfig(islands=2, inspirations=2), BASE)
    pop.add(sol("baseline", 1.0, round=0, parent=None, files=dict(BASE)))
    for r in range(1, 9):
        files = {**BASE, "kernel.py": BASE["kernel.py"] * (1 + r % 3) + f"# {r}\n"}
        pop.add(sol(f"r{r:02d}", 1.0 + r / 3, island=pop.island_for_round(r), round=r, files=files))
    pop.add(sol("dead", None, status="timeout"))
    pop.migrate(4)

    def run(p, seed):
        rng = random.Random(seed)
        return [(par.id, [s.id for s in ins]) for par, ins in (p.sample(r % 2, rng) for r in range(50))]

    twin = Population.from_dict(json.loads(json.dumps(pop.to_dict())))
    assert run(pop, 42) == run(twin, 42)
    assert run(pop, 42) != run(pop, 43)
    # Round trip after use: the sample counts travel too, and the next samples agree.
    again = Population.from_dict(json.loads(json.dumps(pop.to_dict())))
    assert again.to_dict() == pop.to_dict()
    rng = random.Random(1)
    state = rng.getstate()
    first = [pop.sample(0, rng)[0].id for _ in range(20)]
    rng.setstate(state)
    assert [again.sample(0, rng)[0].id for _ in range(20)] == first
    with pytest.raises(PopulationError, match="not a pesflow population"):
        Population.from_dict({"format": "other"})
    with pytest.raises(PopulationError, match="lacks"):
        Population.from_dict({"format": pop.to_dict()["format"], "config": {}})


# ---------------------------------------------------------------- migration, cells, ranking


def test_migration_ring():
    pop = Population(PopulationConfig(islands=3, migration_interval=2), BASE)
    pop.add(sol("baseline", 1.0, round=0, parent=None, files=dict(BASE)))
    for isl, s in enumerate([4.0, 3.0, 2.0]):
        pop.add(sol(f"a{isl}", s, island=isl, round=isl + 1))
        pop.add(sol(f"w{isl}", 1.5, island=isl, round=isl + 1))
    assert pop.migrate(1) == []
    moved = pop.migrate(2)
    # Chosen before anyone moved: a0 lands on island 1 but does not hop on to island 2.
    assert moved == [("a0", 0, 1), ("a1", 1, 2), ("a2", 2, 0)]
    assert "a2" in {s.id for s in pop.members(0)} and "a0" in {s.id for s in pop.members(1)}
    assert pop.get("a2").island == 2  # its birth island is unchanged
    # The migrant now competes: island 1's best is the newcomer.
    cfg = {**pop.config.model_dump(), "exploration_ratio": 0, "exploitation_ratio": 1}
    exploit = Population.from_dict({**pop.to_dict(), "config": cfg})
    assert exploit.sample(1, random.Random(0))[0].id == "a0"
    # Next time a best already on the next island stays put and the runner-up goes.
    assert pop.migrate(4) == [("a2", 0, 1), ("a0", 1, 2), ("a1", 2, 0)]
    assert pop.migrate(4) == []  # a round migrates once: a resumed run may ask again
    assert pop.migrate(6) == [("w0", 0, 1), ("w1", 1, 2), ("w2", 2, 0)]
    never = Population(PopulationConfig(islands=2, migration_interval=0), BASE)
    never.add(sol("baseline", 1.0, round=0, parent=None, files=dict(BASE)))
    never.add(sol("x", 2.0))
    assert never.migrate(4) == [] and never.migrate(0) == []


def test_map_elites_keeps_the_best_per_cell():
    pop = Population(PopulationConfig(islands=1, max_members_per_island=3), BASE)
    pop.add(sol("baseline", 1.0, round=0, parent=None, files=dict(BASE)))
    pop.add(sol("a", 2.0))  # each adds one comment line: one cell
    pop.add(sol("b", 3.0))  # same cell, better
    pop.add(sol("c", 2.5))  # same cell, worse
    big = {**BASE, "kernel.py": BASE["kernel.py"] * 3}  # 3x the lines, many changed: another cell
    pop.add(sol("d", 1.2, files=big))
    cell_a, cell_d = pop.cell_of(pop.get("a")), pop.cell_of(pop.get("d"))
    assert cell_a == pop.cell_of(pop.get("b")) == pop.cell_of(pop.get("c")) != cell_d
    elites = {k: s.id for k, s in pop.elites(0).items()}
    assert elites[cell_a] == "b" and elites[cell_d] == "d"
    # Cap 3: the worst leave the member list (never the baseline), not the archive.
    assert {s.id for s in pop.members(0)} == {"baseline", "b", "c"}
    assert "d" in {s.id for s in pop.elites(0).values()} and "d" in pop
    assert pop.get("a").features == {"code_lines": 35.0, "diff_lines": 1.0}
    assert pop.get("d").features["diff_lines"] == diff_lines(BASE, big) == 64.0


def test_feature_bins_fixed_log_scale():
    # L0 = 200: code_lines bins at 0.71x, 1x, 1.41x; diff_lines with u = 12.5.
    assert [feature_bin("code_lines", v, 200, 4) for v in (100, 150, 200, 250, 300, 1000)] == [0, 1, 2, 2, 3, 3]
    assert [feature_bin("diff_lines", v, 200, 4) for v in (0, 12, 13, 37, 38, 88, 10_000)] == [0, 0, 1, 1, 2, 3, 3]
    assert feature_bin("code_lines", 5000, 200, 1) == 0


def test_best_top_and_duplicates():
    pop = pop_with({"a": 2.0, "b": 3.0, "c": 3.0})
    pop.add(sol("dup", 3.0, duplicate_of="b", content_hash="h-b"))
    pop.add(sol("f", None, status="hard_fail"))
    assert pop.best().id == "b"  # tie with c: the earlier one
    assert [s.id for s in pop.top(3)] == ["b", "c", "a"]
    assert [s.id for s in pop.top(10)] == ["b", "c", "a", "baseline"]
    assert pop.by_hash("h-b").id == "b"
    assert pop.by_hash("h-f").id == "f"  # a graded failure is still graded code
    assert pop.by_hash("nope") is None
    pop2 = Population(PopulationConfig(), BASE)
    pop2.add(sol("baseline", 1.0, round=0, parent=None, files=dict(BASE)))
    pop2.add(sol("later", 2.0, duplicate_of="baseline", content_hash="same"))
    assert pop2.by_hash("same") is None  # only duplicates carry this hash
    assert "later" not in {s.id for s in pop2.members(0)}
    assert Population(PopulationConfig(), BASE).best() is None


def test_bad_input_is_refused_with_the_fix():
    pop = pop_with({"a": 2.0})
    with pytest.raises(PopulationError, match="already in the population"):
        pop.add(sol("a", 2.0))
    with pytest.raises(PopulationError, match="add the parent first"):
        pop.add(sol("x", 2.0, parent="ghost"))
    with pytest.raises(PopulationError, match="does not exist"):
        pop.add(sol("y", 2.0, island=5))
    with pytest.raises(KeyError, match="unknown solution id"):
        pop.get("ghost")
    with pytest.raises(ValueError, match="not one of"):
        sol("z", 1.0, status="weird")
    with pytest.raises(ValueError, match="names a file"):
        sol("../evil", 1.0)
    with pytest.raises(ValueError, match="must be <= 1"):
        PopulationConfig(exploration_ratio=0.8, exploitation_ratio=0.5)
    with pytest.raises(ValueError, match="unknown feature"):
        PopulationConfig(features=["loc"])
    with pytest.raises(ValueError, match="extra"):
        PopulationConfig(island=3)


# ---------------------------------------------------------------- LoongFlow checkpoint

FIELDS = {
    "solution_id", "solution", "generate_plan", "parent_id", "island_id", "iteration", "timestamp",
    "generation", "sample_cnt", "sample_weight", "score", "evaluation", "summary", "metadata",
}


def checkpoint_pop() -> Population:
    pop = pop_with({"r01-c0": 2.5}, islands=2)
    pop.add(sol("r01-c1", None, status="hard_fail", hard_fail_reasons=["correctness_failed"],
                lessons="off by one", plan="unroll"))
    pop.sample(0, random.Random(0))
    return pop


def test_checkpoint_layout_and_field_names(tmp_path):
    pop = checkpoint_pop()
    dest = tmp_path / "checkpoints" / "round-1"
    write_checkpoint(pop, dest, iteration=1, extra_metadata={"run_id": "abc", "rng_state": [1, 2]})
    assert sorted(p.name for p in dest.iterdir()) == ["best_solution.json", "metadata.json", "solutions"]
    sols = {p.stem: json.loads(p.read_text()) for p in (dest / "solutions").iterdir()}
    assert set(sols) == {"baseline", "r01-c0", "r01-c1"}
    for d in sols.values():
        assert set(d) == FIELDS
    good, bad = sols["r01-c0"], sols["r01-c1"]
    assert good["score"] == 2.5 and good["island_id"] == 0 and good["parent_id"] == "baseline"
    assert good["generation"] == 1 and sols["baseline"]["parent_id"] == "" and sols["baseline"]["generation"] == 0
    assert good["metadata"]["files"] == pop.get("r01-c0").files
    assert "# ==== kernel.py ====" in good["solution"] and "# ==== util.py ====" in good["solution"]
    assert bad["score"] == 0.0 and bad["summary"] == "off by one" and bad["generate_plan"] == "unroll"
    ev = json.loads(bad["evaluation"])
    assert ev["status"] == "hard_fail" and ev["hard_fail_reasons"] == ["correctness_failed"]
    assert set(ev) >= {"status", "speedup", "reward", "hard_fail_reasons", "tests"}
    assert bad["metadata"]["evaluation"] == ev
    best = json.loads((dest / "best_solution.json").read_text())
    assert best["solution_id"] == "r01-c0" == pop.best().id
    meta = json.loads((dest / "metadata.json").read_text())
    assert meta["iteration"] == 1 and meta["best_solution_id"] == "r01-c0" and meta["num_islands"] == 2
    assert meta["islands"] == [["baseline", "r01-c0"], ["baseline"]]
    assert meta["counts"]["failures"] == 1 and meta["total_generated_solutions"] == 3
    assert meta["run_id"] == "abc" and meta["rng_state"] == [1, 2]
    assert sum(d["sample_cnt"] for d in sols.values()) == 1
    with pytest.raises(PopulationError, match="reuses checkpoint keys"):
        write_checkpoint(pop, dest, iteration=1, extra_metadata={"islands": 1})


def _crash_on_write(monkeypatch, after: int):
    real, calls = population._write_json, []

    def flaky(path, obj):
        calls.append(path)
        if len(calls) > after:
            raise OSError("disk full (simulated)")
        real(path, obj)

    monkeypatch.setattr(population, "_write_json", flaky)
    return calls


def test_checkpoint_crash_leaves_nothing_under_the_final_name(tmp_path, monkeypatch):
    pop = checkpoint_pop()
    dest = tmp_path / "round-1"
    calls = _crash_on_write(monkeypatch, after=2)
    with pytest.raises(OSError, match="simulated"):
        write_checkpoint(pop, dest, iteration=1, extra_metadata={})
    assert len(calls) == 3  # it did get midway
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []  # the half-written temp dir is gone too


def test_checkpoint_crash_keeps_the_previous_one_then_rewrite_replaces_it(tmp_path, monkeypatch):
    pop = checkpoint_pop()
    dest = tmp_path / "latest"
    write_checkpoint(pop, dest, iteration=1, extra_metadata={})
    before = {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    pop.add(sol("r02-c0", 4.0, island=1, round=2))
    _crash_on_write(monkeypatch, after=1)
    with pytest.raises(OSError):
        write_checkpoint(pop, dest, iteration=2, extra_metadata={})
    assert {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["latest"]
    monkeypatch.undo()
    write_checkpoint(pop, dest, iteration=2, extra_metadata={})
    assert json.loads((dest / "metadata.json").read_text())["iteration"] == 2
    assert (dest / "solutions" / "r02-c0.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["latest"]


def write_checkpoint(pop, dest, *, iteration, extra_metadata):
    """A population's LoongFlow checkpoint, written whole or not at all (agent/rundir/store.py)."""
    population.write_dir_atomically(dest, loongflow_files(pop, iteration=iteration, extra_metadata=extra_metadata))
