"""Invariants of the committed tasks/catalog.json (built by tools/build_catalog.py).

Self-contained: needs only this repository, not the shared/ seed files.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CATALOG = REPO_ROOT / "tasks" / "catalog.json"

EXPECTED_BY_BENCH = {"kfc": 55, "lh": 20, "e2e": 10}

# sha256[:16] of the lower-cased, whitespace-collapsed first sentence of every summary in
# the benchmark's fai_bench_task_catalog.json (v2). Our descriptions must not equal any.
SEED_FIRST_SENTENCE_HASHES = frozenset({
    "0105c6cf3027b75c", "05650a20251ff8cd", "06b560be61ca33af", "0824c3d3495e8863",
    "0c6520bbd97051f5", "10ccbe0d41d5ccbf", "123b6f104c415546", "13eab5c3f019ba26",
    "170ced39f942caa0", "1ff3f4d649263bfc", "220b8dfce3988529", "238919812b9e7d1e",
    "23973d873ec9d732", "2622a0b2e9fb6367", "26943fdc31f47643", "2f40fd1c95c50992",
    "2ff98d7a0408a0c2", "30aa3c78a0344b27", "315fa14ee6ce1a9a", "385f9338c2df9c16",
    "3fab4c9299c1d79f", "417ef77c2bd5c41e", "42742354a7a3ba91", "433e0e5a0f2c98f4",
    "4435a705d2a3bf6b", "47b70f8f21b8a084", "47e43e1f0296b5e1", "4d132139c0b3ea46",
    "50a2367371cfc47a", "52bd903e8de130f5", "52e85ef7be960cf5", "53460db302d322fe",
    "5835124b0a10a155", "5d3f94b866ac3ae0", "5ed86d335fd4f91e", "60959a3e82006189",
    "6205fdb756ce3fbe", "68d8d5f2712ef9ad", "6906173e6b801909", "6b9c9cc6690b1fa2",
    "6ec47db2e84a0e2a", "796edd3f4fe2714b", "7b58101f3d7323de", "7b9c6de88da0f77d",
    "7ba9d571e2774e0a", "874f511db83b4f12", "8acdb725a9ae7fac", "8cf4aa01fcbf1bd2",
    "908879cddd4c06ce", "93172e0ef3aabf3a", "94f289bfc56efd04", "951d790992675584",
    "964a2e22cef6f3de", "a1497e553c88e00e", "a4f67b83bd11e5d4", "a76f6aff529e3f1b",
    "a7a062b8466864f7", "a82731a1b408883b", "a8b65fb137ba9d4d", "b1c394d868ab88f8",
    "b1f9597a84c37dfa", "b3b4417e8f8f9819", "b7ccc8e970ec9f34", "be90f9525f6ac64a",
    "c0258bcf80774015", "c0621f2fcb7edebf", "c2dafbff1e9dce5e", "c4169407328bede0",
    "ce8c41f3507928d9", "ce9caf08e6fa2eaf", "cfe51b9619335698", "d62b2db982c5e6c8",
    "da0b19f0177bff2e", "dc480acec2b169ff", "de157bb3bcd2761a", "e63cd181b6340396",
    "e809c47e96d48d85", "ec001185c44487fc", "eeff835eec9aab86", "ef90d0a21bfd6135",
    "f0fc5bef392cc05d", "f1b2e81fb79ce93c", "f22912a120dec88b", "f46808decdbec919",
    "f75f4dce3c8cfc6c",
})


def _fingerprint(text: str) -> str:
    return hashlib.sha256(" ".join(text.lower().split()).encode("utf-8")).hexdigest()[:16]


def _first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(?:\s|$)", text.strip(), re.DOTALL)
    return (match.group(1) if match else text).strip()


@pytest.fixture(scope="module")
def catalog() -> dict[str, Any]:
    with CATALOG.open(encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def tasks(catalog: dict[str, Any]) -> list[dict[str, Any]]:
    return catalog["tasks"]


def test_header(catalog: dict[str, Any], tasks: list[dict[str, Any]]) -> None:
    assert catalog["schema"] == "pesflow_task_catalog_v1"
    assert catalog["task_count"] == len(tasks) == 85


def test_counts_by_bench(tasks: list[dict[str, Any]]) -> None:
    assert Counter(t["bench"] for t in tasks) == EXPECTED_BY_BENCH


def test_names_unique_and_sorted(tasks: list[dict[str, Any]]) -> None:
    names = [t["name"] for t in tasks]
    assert len(set(names)) == len(names)
    assert all(t["name"] == f"{t['bench']}/{t['dir']}" for t in tasks)
    assert [(t["bench"], t["dir"]) for t in tasks] == sorted((t["bench"], t["dir"]) for t in tasks)


def test_package_roots_follow_layout(tasks: list[dict[str, Any]]) -> None:
    for t in tasks:
        flat = t["bench"] == "lh"
        assert t["layout"] == ("flat" if flat else "task/"), t["name"]
        suffix = "" if flat else "/task"
        assert t["package_root"] == f"tasks/{t['bench']}/{t['dir']}{suffix}", t["name"]


def test_descriptions(tasks: list[dict[str, Any]]) -> None:
    descriptions = [t["description"] for t in tasks]
    assert all(isinstance(d, str) and d.strip() for d in descriptions)
    assert len(set(descriptions)) == len(descriptions), "descriptions must be unique"
    for t in tasks:
        d = t["description"]
        assert "\n" not in d and len(d) <= 140, t["name"]
        for candidate in (d, _first_sentence(d)):
            assert _fingerprint(candidate) not in SEED_FIRST_SENTENCE_HASHES, (
                f"{t['name']}: description repeats a benchmark summary sentence")


def test_field_values(tasks: list[dict[str, Any]]) -> None:
    for t in tasks:
        assert t["reward_class"] in {"performance", "implementation"}, t["name"]
        assert t["anchor_hardware"] in {"NVIDIA H20", "CPU lane", None}, t["name"]
        assert isinstance(t["scope"], list), t["name"]
        assert isinstance(t["bundled"], bool), t["name"]
        # implementation tasks are pass/fail and carry no speedup anchor
        assert (t["ref_speedup"] is None) == (t["reward_class"] == "implementation"), t["name"]


def test_bundled_flags_match_disk(tasks: list[dict[str, Any]]) -> None:
    for t in tasks:
        on_disk = (REPO_ROOT / t["package_root"] / "task.toml").is_file()
        assert t["bundled"] == on_disk, f"{t['name']}: bundled={t['bundled']} but package on disk={on_disk}"


def test_every_package_on_disk_is_cataloged_as_bundled(tasks: list[dict[str, Any]]) -> None:
    bundled_roots = {t["package_root"] for t in tasks if t["bundled"]}
    tasks_dir = REPO_ROOT / "tasks"
    found = list(tasks_dir.glob("*/*/task.toml")) + list(tasks_dir.glob("*/*/task/task.toml"))
    for toml in found:
        root = toml.parent.relative_to(REPO_ROOT).as_posix()
        assert root in bundled_roots, f"{root}/task.toml exists but no catalog task is bundled there"
