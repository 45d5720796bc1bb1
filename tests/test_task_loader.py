import shutil

import pytest

from evaluator.task import TaskError, find_task, load_task, task_roots
from tests.conftest import FIXTURES


def test_kfc_package_has_a_task_level_and_reads_scope_anchor_budget():
    t = load_task("kfc/toy-sum", [FIXTURES])
    assert t.layout == "task/" and t.root == FIXTURES / "kfc" / "toy-sum" / "task"
    assert t.scope == ["toy/kernel.py"]  # absolute /app/repo/... made relative to the source root
    assert t.forbidden == ["*"]
    assert t.anchor.value == 2.0 and t.anchor.source == "tests/ref_speedup.txt"
    assert t.max_submissions == 3 and t.gpus == 0
    assert t.reward_class == "performance"


def test_flat_lh_layout(tmp_path):
    src = FIXTURES / "kfc" / "toy-sum" / "task"
    shutil.copytree(src, tmp_path / "lh" / "toy-flat")
    t = load_task("lh/toy-flat", [tmp_path])
    assert t.layout == "flat" and t.name == "lh/toy-flat"


def test_explicit_root_wins_over_a_later_root_and_env(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    for r in (a, b):
        shutil.copytree(FIXTURES / "kfc" / "toy-sum", r / "kfc" / "toy-sum")
    monkeypatch.setenv("PESFLOW_TASKS_PATH", str(b))
    assert find_task("kfc/toy-sum", [a]) == (a / "kfc" / "toy-sum" / "task").resolve()
    assert find_task("kfc/toy-sum") == (b / "kfc" / "toy-sum" / "task").resolve()
    assert task_roots([a])[:2] == [a.resolve(), b.resolve()]


def test_a_checkout_root_is_accepted_for_its_tasks_folder(tmp_path):
    shutil.copytree(FIXTURES / "kfc" / "toy-sum", tmp_path / "tasks" / "kfc" / "toy-sum")
    assert load_task("kfc/toy-sum", [tmp_path]).name == "kfc/toy-sum"


def test_unknown_task_names_the_fix():
    with pytest.raises(TaskError, match="not found.*--tasks-root"):
        find_task("kfc/does-not-exist", [FIXTURES])
    with pytest.raises(TaskError, match="<bench>/<dir>"):
        find_task("no-slash", [FIXTURES])


def test_broken_field_gives_one_line_naming_file_and_field(toy_package):
    toml = toy_package / "task.toml"
    toml.write_text(toml.read_text().replace('primary_edit_paths = ["/app/repo/toy/kernel.py"]', "primary_edit_paths = 3"))
    with pytest.raises(TaskError) as e:
        load_task(str(toy_package))
    msg = str(e.value)
    assert "\n" not in msg and str(toml) in msg and "[verifier].primary_edit_paths" in msg


def test_invalid_toml_and_missing_instruction(toy_package):
    toml = toy_package / "task.toml"
    good = toml.read_text()
    toml.write_text(good + "\n[broken\n")
    with pytest.raises(TaskError, match="not valid TOML"):
        load_task(str(toy_package))
    toml.write_text(good)
    (toy_package / "instruction.md").unlink()
    with pytest.raises(TaskError, match=r"\[task\].instruction"):
        load_task(str(toy_package))


def test_anchor_falls_back_to_manifest_then_toml(toy_package):
    (toy_package / "tests" / "ref_speedup.txt").unlink()
    assert load_task(str(toy_package)).anchor.source == "task.toml"
    (toy_package / "environment" / "verifier-correctness-manifest.json").write_text('{"ref_speedup": 7.5}')
    a = load_task(str(toy_package)).anchor
    assert (a.value, a.source) == (7.5, "environment/verifier-correctness-manifest.json")
    (toy_package / "tests" / "ref_speedup.txt").write_text("abc")
    with pytest.raises(TaskError, match="digits only"):
        load_task(str(toy_package))


def test_content_hash_changes_with_any_file(toy_package):
    h1 = load_task(str(toy_package)).content_hash
    (toy_package / "environment" / "repo" / "toy" / "other.py").write_text("VALUE = 2\n")
    assert load_task(str(toy_package)).content_hash != h1
