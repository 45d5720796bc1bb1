"""`pesflow report`: a real run (scripted LLM server, toy package graded in the sandbox) into one
self-contained HTML page, read back as data, with files missing, and in a real headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from agent.readers.report import tree_layout, write_report
from agent.readers.run_view import load_run
from tests.conftest import needs_root, toy_tasks_root
from tests.llm_server import Reply, Request, ScriptedLLMServer

UNROLLED = ("def sum_squares(n):\n    total = 0\n    i = 0\n    while i + 1 < n:\n        total += i * i + (i + 1) * (i + 1)\n"
            "        i += 2\n    if i < n:\n        total += i * i\n    return total\n")
CLOSED = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
ARTIFACTS = Path("/tmp/pesflow-artifacts")


def engineer(req: Request) -> Reply:
    """Executor 1 improves its parent a step; executor 2 writes wrong code from the baseline, nothing otherwise."""
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        ids = re.findall(r"^## (r\d\d-c\d+):", user, re.M)
        return Reply(text=json.dumps({"children": {i: f"lesson on {i}: keep it exact" for i in ids},
                                      "memory": ["closed forms beat loops", "n*n is not a sum of squares"]}))
    if "You are the planner" in user:
        return Reply(text="Unroll the loop, then look for the closed form.")
    child = int(re.search(r"You are executor (\d+) of", user).group(1))
    parent = re.search(r"### toy/kernel.py\n```python\n(.*?)\n```", user, re.S).group(1)
    if child == 2:
        if "while" in parent:
            return Reply(text="I would rather not change a thing.")  # no code: a recorded failure
        return Reply(text="toy/kernel.py\n```python\ndef sum_squares(n):\n    return n * n\n```\n")  # wrong
    return Reply(text=f"toy/kernel.py\n```python\n{CLOSED if 'while' in parent else UNROLLED}```\n")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, cache_dir) -> Path:
    from agent.config import load_config
    from agent.search.session import start_run

    tmp = tmp_path_factory.mktemp("report-run")
    root = tmp / "tasks"
    toy_tasks_root(root)
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    try:
        with ScriptedLLMServer(engineer) as server:
            cfg = load_config(sets=["llm.default=openai:gpt-4o-mini", f"llm.base_url={server.openai_base_url}", "loop.rounds=3",
                                    "loop.children=2", f"run.out={tmp / 'traces'}", "run.quiet=true",
                                    f"evaluator.local.cache_dir={cache_dir}", "llm.backoff_base_sec=0.01",
                                    # the page's figures are counted on one answer a child
                                    "loop.fix_turns=0", "loop.resample_duplicates=0"])
            d, status = start_run(cfg, "kfc/toy-sum", [str(root)])
    finally:
        mp.undo()
    assert status == "finished"
    return d


def population(d: Path) -> list[dict]:
    return json.loads(sorted(d.glob("checkpoints/round-*"))[-1].joinpath("pesflow_state.json").read_text())["population"]["solutions"]


@needs_root
def test_the_page_holds_every_candidate_its_diff_verdict_and_costs(run_dir):
    pop = population(run_dir)
    data = load_run(run_dir)
    assert [c["id"] for c in data["candidates"]] == [s["id"] for s in pop] and len(pop) == 7
    by = {c["id"]: c for c in data["candidates"]}
    assert by["baseline"]["parent"] is None and all(c["parent"] for c in data["candidates"] if c["id"] != "baseline")
    kinds = {c["kind"] for c in data["candidates"]}
    assert {"improved", "hard_fail", "no_code"} <= kinds, kinds
    closed = next(c for c in data["candidates"] if c["speedup"] and c["speedup"] > 100)
    assert closed["best"] and data["best_id"] == closed["id"] and "+    return n * (n + 1)" in closed["diff"]
    assert closed["diff_source"] == "recorded" and closed["verdict"]["grader"] == "dev" and closed["lessons"].startswith("lesson on")
    assert all(c["diff"] for c in data["candidates"] if c["id"] != "baseline" and c["kind"] != "no_code")
    # the costs per role add up to the run's totals
    run = json.loads((run_dir / "run.json").read_text())
    roles = {r["role"]: r for r in data["costs"]["roles"]}
    assert {"planner", "executor", "summarizer"} <= set(roles) <= {"planner", "executor", "repair", "summarizer"}
    assert sum(r["input_tokens"] for r in roles.values()) == run["totals"]["input_tokens"]
    assert abs(sum(r["usd"] for r in roles.values()) - run["totals"]["usd"]) < 1e-6
    assert [b["speedup"] for b in data["best_by_round"]] == [b["speedup"] for b in run["best_by_round"]]
    out = write_report(run_dir, run_dir / "page.html")
    page = out.read_text()
    assert page.count('class="node ') == len(pop)
    # self-contained: nothing fetched, and no string of the data can close the script element
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page) and "@import" not in page
    blob = re.search(r'<script type="application/json" id="pesflow-data">(.*?)</script>', page, re.S).group(1)
    assert "</" not in blob and json.loads(blob)["best_id"] == closed["id"]


@needs_root
def test_missing_files_and_loongflow_checkpoints_still_make_a_page(run_dir, tmp_path):
    """An imported trace may have only LoongFlow's checkpoint files: no journal, no rounds/, no pesflow state."""
    d = tmp_path / "trace"
    shutil.copytree(run_dir, d)
    shutil.rmtree(d / "rounds")
    (d / "journal.jsonl").unlink()
    for p in d.glob("checkpoints/*/pesflow_state.json"):
        p.unlink()
    data = load_run(d)
    assert len(data["candidates"]) == len(population(run_dir))
    assert "journal.jsonl" in data["missing"] and "LoongFlow" in data["source"]
    closed = next(c for c in data["candidates"] if c["speedup"] and c["speedup"] > 100)
    assert closed["diff_source"] == "computed" and "+    return n * (n + 1)" in closed["diff"]
    # against its parent (the unrolled loop), not against the baseline (the plain for loop)
    assert "-    while i + 1 < n:" in closed["diff"] and "for i in range" not in closed["diff"]
    assert data["costs"]["roles"]  # from run.json's calls_by_role
    assert "Not found in the run directory" in write_report(d).read_text()


def test_an_empty_or_handmade_trace_is_a_page_not_a_crash(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "No candidates were found" in write_report(empty).read_text()
    lf = tmp_path / "lf" / "checkpoint-2"
    (lf / "solutions").mkdir(parents=True)
    (lf / "solutions" / "a.json").write_text(json.dumps({"solution_id": "a", "solution": "x = 1\n", "parent_id": "",
                                                         "island_id": 0, "iteration": 0, "score": 1.0, "evaluation": "fine"}))
    (lf / "solutions" / "b.json").write_text(json.dumps({"solution_id": "b", "solution": "x = 2\n", "parent_id": "a",
                                                         "island_id": 1, "iteration": 1, "score": 2.5, "summary": "better"}))
    data = load_run(tmp_path / "lf")
    b = {c["id"]: c for c in data["candidates"]}["b"]
    assert b["parent"] == "a" and b["speedup"] == 2.5 and b["best"] and "-x = 1\n+x = 2" in b["diff"]
    assert data["best_by_round"][-1] == {"round": 1, "best_id": "b", "speedup": 2.5}
    with pytest.raises(ValueError, match="not a directory"):
        load_run(tmp_path / "nope")


def test_tree_layout_centres_parents_and_survives_deep_chains():
    cands = [{"id": "r", "parent": None, "round": 0}, {"id": "a", "parent": "r", "round": 1}, {"id": "b", "parent": "r", "round": 1},
             {"id": "c", "parent": "a", "round": 2}]
    pos = tree_layout(cands)
    assert pos == {"c": (0.0, 2), "a": (0.0, 1), "b": (1.0, 1), "r": (0.5, 0)}
    chain = [{"id": f"n{i}", "parent": f"n{i - 1}" if i else None, "round": i} for i in range(3000)]
    assert tree_layout(chain)["n0"] == (0.0, 0)


def _chromium() -> tuple[str, str] | None:
    for browser in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(browser):
            driver = shutil.which("chromedriver")
            return (path, driver) if driver else None
    return None


@needs_root
@pytest.mark.skipif(_chromium() is None, reason="no chromium and chromedriver on this machine "
                    "(Debian: apt-get install chromium chromium-driver; .ci/run installs them)")
def test_the_page_in_headless_chromium(run_dir, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser, driver_path = _chromium()  # type: ignore[misc]
    page = write_report(run_dir, tmp_path / "report.html")
    pop = population(run_dir)
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1500,1200", f"--user-data-dir={tempfile.mkdtemp(dir=tmp_path)}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(options=opts, service=Service(driver_path))
    try:
        drv.set_page_load_timeout(30)
        drv.get(page.as_uri())
        WebDriverWait(drv, 10).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
        # the tree shows every candidate
        nodes = drv.find_elements(By.CSS_SELECTOR, "#tree .node")
        assert sorted(n.get_attribute("data-id") for n in nodes) == sorted(s["id"] for s in pop)
        # the final pick is shown first; clicking a node shows its diff
        best = json.loads((run_dir / "run.json").read_text())["best"]["id"]
        assert drv.find_element(By.ID, "detail-title").text == best
        failed = next(s for s in pop if s["status"] == "hard_fail" and "correctness_failed" in s["hard_fail_reasons"])
        drv.find_element(By.CSS_SELECTOR, f'#tree .node[data-id="{failed["id"]}"]').click()
        assert drv.find_element(By.ID, "detail-title").text == failed["id"]
        diff = drv.find_element(By.ID, "detail-diff").text
        assert "+    return n * n" in diff and "correctness_failed" in drv.find_element(By.ID, "detail-meta").text
        assert drv.find_elements(By.CSS_SELECTOR, f'#tree .node.selected[data-id="{failed["id"]}"]')
        drv.find_element(By.CSS_SELECTOR, f'#tree .node[data-id="{best}"]').click()
        assert "// 6" in drv.find_element(By.ID, "detail-diff").text
        # the parent link walks up the tree
        drv.find_element(By.CSS_SELECTOR, "#detail-meta a[data-go]").click()
        assert drv.find_element(By.ID, "detail-title").text != best
        # nothing was fetched, and nothing went wrong
        assert drv.execute_script("return performance.getEntriesByType('resource').length") == 0
        errors = [e for e in drv.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == [], errors
        drv.find_element(By.CSS_SELECTOR, f'#tree .node[data-id="{best}"]').click()
        height = drv.execute_script("return document.documentElement.scrollHeight")
        drv.set_window_size(1500, min(max(height + 200, 900), 6000))  # the window counts its own frame too
        shot = tmp_path / "report.png"
        assert drv.save_screenshot(str(shot)) and shot.stat().st_size > 20_000
    finally:
        drv.quit()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "report.png")
    shutil.copy(page, ARTIFACTS / "report.html")
