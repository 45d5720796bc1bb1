"""A scripted "engineer model" that fixes only what it is shown, searching real CPU packages of
the benchmark with today's defaults and with the new ones, side by side (issue 49, item 2).

The model is tests/llm_server.py's ScriptedLLMServer (the real openai SDK talks to it). Per
package it knows a ladder of versions of the scope file(s), all built from the package's own
reference (solution/: its oracle patch applied to the baseline, or its whole-file oracle):

    raise      the reference with one name misspelt: it raises (a NameError naming that name)
    wrong      the reference with an off-by-one or a dropped term: a wrong answer, no exception
    reference  the package's reference, unchanged

and answers like an engineer who acts only on evidence in front of it:

- executor: its first answer to a plan is a broken rung, `raise` for executors 1, 3, ...,
  `wrong` for 2, 4, ..., made a new program each time (a line numbering the try, so it is graded);
  it writes the reference ONLY when the prompt it is given (fenced code cut out) shows the
  evidence of ITS OWN rung's failure, one of EVIDENCE's rules below: the traceback naming its
  misspelt name, or a wrong-answer description (a mismatch figure, the dev engine's failed case
  with its message). `correctness_failed` or a package's generic sentence is not evidence. A
  follow-up (a fix turn, or a duplicate sent back) keeps the rung of the answer it quotes; one
  that quotes the reference, or is told its correct code is not faster, has nothing better to
  offer and answers the reference again; one shown no evidence tries its broken rung again.
- planner: a plan; where its prompt (recent failures, memory, the parent's verdict) shows
  evidence, the plan quotes each evidence line (so an executor reading the plan sees it too).
- summarizer: a lesson per child quoting the evidence its verdict shows (else its first line),
  the memory kept plus those evidence lines (prompts/summarizer.md's JSON).

Each evidence rule is (name, rung it cures, regex); a regex may use {name}, the raise rung's
misspelt name. The rules' hit counts (per role) are printed: which evidence reached which
prompt. When pesflow's prompt wording changes, edit EVIDENCE.

The model is priced (gpt-4o-mini's row of configs/prices.yaml, served under that name), so USD
is counted. Per package two searches, in turn on this machine:

    old  today's defaults, named explicitly (OLD_SETTINGS, or --old-settings)
    new  no settings at all (configs/default.yaml as it is in the tree)

both with --rounds, --children (default: the config's), the dev grader, evaluator.trust as
configured, --seed. Read from the run directory: calls/gradings/USD until the best (where the
final best was first graded), the totals, the best's dev speedup (figure) and its hidden score.

    python3 benchmarks/engineer_model.py --tasks-root /work/bench/faibench/tasks [--rounds 6] \
        [--task kfc/NAME ...] [--old-settings loop.fix_turns=0,loop.patience=null,...] \
        [--out benchmarks/results/engineer-model-DATE.md] [--check]

--check grades each rung once under the dev grader and prints what the model would see of it
(and which evidence rule matches), without a search.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.config import load_config  # noqa: E402
from agent.search.session import start_run  # noqa: E402
from tests.adversarial.reward_hacking.corpus import reference_files  # noqa: E402
from tests.llm_server import Reply, Request, ScriptedLLMServer, variant_line  # noqa: E402

MODEL = "gpt-4o-mini"  # a priced row of configs/prices.yaml: the scripted model costs what it would
DEFAULT_TASKS = ("kfc/compile-cache-key-canonicalize", "kfc/wre-router-power-of-two-choices-loop16",
                 "kfc/fusion-dag-normalization-idiom-collapse")
# today's defaults, named so that they hold when configs/default.yaml changes (--old-settings adds)
OLD_SETTINGS = ("loop.fix_turns=0", "loop.patience=null", "loop.roofline_stop=null",
                "loop.history_rows=0", "loop.resample_duplicates=0")  # the last two: off on main, absent there


# ---------------------------------------------------------------- the ladder per package
@dataclass(frozen=True)
class Break:
    """One edit of the reference: `old` (found exactly once in `path`) becomes `new`."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Ladder:
    raise_: Break  # a misspelt name: a NameError naming `name`
    name: str
    wrong: Break  # an off-by-one or a dropped term: a wrong answer without an exception
    wrong_what: str


LADDERS: dict[str, Ladder] = {
    "kfc/compile-cache-key-canonicalize": Ladder(
        raise_=Break("identity_key.py", "operands = [_norm_operand(o) for o", "operands = [_norm_operands(o) for o"),
        name="_norm_operands",
        wrong=Break("identity_key.py", 'canon = {"op": op, "operands": operands, "flags": norm_flags}',
                    'canon = {"op": op, "operands": operands}'),
        wrong_what="the flags dropped from the identity (different flags merged)"),
    "kfc/wre-router-power-of-two-choices-loop16": Ladder(
        raise_=Break("submission/kernel.py", "        load[c] += 1", "        lod[c] += 1"),
        name="lod",
        wrong=Break("submission/kernel.py", "if load[a] <= load[b]:", "if load[a] < load[b]:"),
        wrong_what="ties broken towards the second candidate (<= read as <)"),
    "kfc/fusion-dag-normalization-idiom-collapse": Ladder(
        raise_=Break("dag_fusion.py", "    _normalize(nodes, external)\n", "    _normalise(nodes, external)\n"),
        name="_normalise",
        wrong=Break("dag_fusion.py", '"inputs": [rec["x"], rec["weight"], rec["bias"]],', '"inputs": [rec["x"], rec["bias"], rec["weight"]],'),
        wrong_what="the fused node's weight and bias swapped"),
}


def apply_break(files: dict[str, str], b: Break) -> dict[str, str]:
    text = files[b.path]
    if text.count(b.old) != 1:
        raise ValueError(f"{b.path}: {b.old!r} occurs {text.count(b.old)} times in the reference, not once")
    return {**files, b.path: text.replace(b.old, b.new)}


def rungs(task_name: str, reference: dict[str, str]) -> dict[str, dict[str, str]]:
    lad = LADDERS[task_name]
    return {"raise": apply_break(reference, lad.raise_), "wrong": apply_break(reference, lad.wrong), "reference": reference}


# ---------------------------------------------------------------- the evidence an engineer acts on
@dataclass(frozen=True)
class Rule:
    name: str
    cures: str  # the rung whose failure this evidence shows ("raise" or "wrong")
    regex: str  # may hold {name}: the raise rung's misspelt name


# Evidence regex -> fix (the fix is always the reference; the rule says which rung it cures).
# Read on the prompt with its fenced code cut out, so the broken code itself is never evidence.
EVIDENCE: tuple[Rule, ...] = (
    Rule("traceback: NameError naming the misspelt name", "raise", r"NameError: name '{name}' is not defined"),
    Rule("mismatch: max abs err", "wrong", r"max(?:imum)?[ _]abs(?:olute)?[ _]err"),
    Rule("mismatch: first differing index", "wrong", r"first differing (?:index|element|position)"),
    Rule("mismatch: share of elements off", "wrong", r"share of (?:the )?elements off"),
    Rule("mismatch: expected vs got", "wrong", r"expected\b.{0,200}\b(?:got|but got|actual)\b"),
    # the dev engine's failed check or cases with a message of their own saying the answer was
    # wrong: not a gate's name alone ("hidden_correctness_failed"), not an exception (the raise
    # rung's evidence), not a message of another kind ("not_implemented: implement ...")
    Rule("dev engine: failed check/cases saying the answer is wrong", "wrong",
         r"(?m)^[\s>*-]*(?:r\d\d-c\d+(?:-f\d+)?: )?failed (?:check|cases?) [^:\n]+: (?!\s*\w+\s*$)"
         r"(?![^\n]*\b(?!Assertion)\w+(?:Error|Exception): )"
         r"[^\n]*(?:AssertionError|\bwrong\b|differ|mismatch|incorrect|not equal|does not match|expected)[^\n]*$"),
    Rule("mismatch: a value differs (a vs b)", "wrong", r"differs?:? [-+\w.]+ vs [-+\w.]+"),
)

CUT = "... (cut)"  # agent/search/roles.py fit(): a fenced diff cut short ends with this line, unclosed
# the task's own text (instruction.md and the machine, prompts/head.md) is never evidence of a failure
TASK_TEXT = re.compile(r"^# The task\n.*?(?=^# What may change)", re.S | re.M)
# nor is the parent's grading (the executor's "# The parent's grading", the planner's "Grader's
# verdict on the parent"): a failing baseline's message says nothing of the model's own code
PARENT_GRADING = (re.compile(r"^# The parent's grading.*?(?=^# )", re.S | re.M),
                  re.compile(r"^Grader's verdict on the parent:.*?(?=^Lessons on it:)", re.S | re.M))


def bare(text: str) -> str:
    text = TASK_TEXT.sub("", text)
    for section in PARENT_GRADING:
        text = section.sub("", text)
    return unfenced(text)


def unfenced(text: str) -> str:
    """The text without its fenced blocks (code, diffs), line by line: a block opens at a line
    starting with ``` and closes at a line that is ``` or at a cut block's CUT line."""
    out, inside = [], False
    for line in text.splitlines():
        if inside:
            inside = not (line.strip() == "```" or line.strip() == CUT)
        elif line.startswith("```"):
            inside = True
        else:
            out.append(line)
    return "\n".join(out)


def evidence(text: str, name: str, cures: str | None = None) -> list[tuple[str, str]]:
    """(rule name, the line that matched) for each rule whose regex matches `text` outside fenced
    code; only rules curing `cures` when given."""
    text = bare(text)
    found = []
    for rule in EVIDENCE:
        if cures is not None and rule.cures != cures:
            continue
        m = re.search(rule.regex.replace("{name}", re.escape(name)), text)
        if m:
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            found.append((rule.name, text[start:end if end >= 0 else None].strip()[:300]))
    return found


# How a follow-up prompt of the same executor reads (agent/search/roles.py fix, resample, repair):
# its previous answer quoted after FOLLOW_UP, then a fix turn (FIX_TURN), a duplicate sent back
# (RESAMPLE) or a repair (edits that did not apply, or changed nothing).
FOLLOW_UP = "# Your previous answer\n"
FIX_TURN = r"Your code (?:was graded|is, but for its spelling)"
NOT_FASTER = r"and it is not (?:faster|better)"
RESAMPLE = r"the same program as|would not be graded again"  # prompts/duplicate.md; else a repair (prompts/repair.md)


class Engineer:
    """The scripted model of one search (a responder for ScriptedLLMServer)."""

    def __init__(self, task_name: str, ladder: dict[str, dict[str, str]]):
        self.name = LADDERS[task_name].name
        self.ladder = ladder
        self.lock = threading.Lock()
        self.hits: Counter[tuple[str, str]] = Counter()  # (role, rule) -> prompts it matched
        self.answers: Counter[tuple[str, str]] = Counter()  # (executor|fix, rung answered)
        self.examples: dict[str, str] = {}  # rule -> the first line it matched
        self.tries = 0  # broken answers so far: each is made a new program (graded, as a fresh attempt would be)

    def _count(self, role: str, found: list[tuple[str, str]]) -> None:
        with self.lock:
            for rule, line in found:
                self.hits[(role, rule)] += 1
                self.examples.setdefault(rule, line)

    def __call__(self, req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            return Reply(text=self.summarize(user))
        if "You are the planner" in user:
            return Reply(text=self.plan(user))
        return Reply(text=self.execute(user))

    # -- roles
    def plan(self, user: str) -> str:
        found = evidence(user, self.name)
        self._count("planner", found)
        text = ("Replace the parent's approach by a canonical, single-pass form of the computation (the "
                "task's instruction says what is equivalent); keep every contract exact.")
        if found:  # each evidence line as the grader printed it (indented, so it reads as it did there)
            text += "\nWhat failed before, as the graders said it (do not repeat it):\n" + \
                "\n".join(f"    {line}" for line in dict.fromkeys(line for _, line in found))
        return text

    def execute(self, user: str) -> str:
        k = re.search(r"You are executor (\d+) of", user)
        child = int(k.group(1)) - 1 if k else 0
        rung = "raise" if child % 2 == 0 else "wrong"  # the slot's rung: alternate by child
        role = "executor"
        _, sep, turn = user.rpartition(FOLLOW_UP)
        if not sep:
            turn = ""
        else:  # a fix turn or a duplicate sent back: it continues the answer it quotes
            role = "fix" if re.search(FIX_TURN, turn) else "resample" if re.search(RESAMPLE, turn) else "repair"
            rung = next((r for r in ("raise", "wrong") if self._is(turn, r)), "reference")
        found = evidence(user, self.name, cures=rung) if rung != "reference" else []
        self._count(role, found)
        if found:
            return self.answer(role, "reference", user)
        if rung == "reference" or re.search(NOT_FASTER, turn):
            return self.answer(role, "reference", user)  # correct already: nothing better on the ladder
        return self.answer(role, rung, user)

    def _is(self, answer: str, rung: str) -> bool:
        """Whether a quoted answer is that rung: it holds every line the rung has and the reference has not."""
        lines = _distinct_lines(self.ladder[rung], self.ladder["reference"])
        return bool(lines) and all(line in answer for line in lines)

    def answer(self, role: str, rung: str, user: str) -> str:
        with self.lock:
            self.answers[(role, rung)] += 1
            self.tries += rung != "reference"
            n = self.tries
        files = self.ladder[rung]
        return "".join(f"{path}\n```\n{code.rstrip()}\n{'' if rung == 'reference' else variant_line(path, n) + chr(10)}```\n"
                       for path, code in files.items()) + \
            "Rewrote it in the canonical single-pass form."

    def summarize(self, user: str) -> str:
        children = re.split(r"^## (r\d\d-c\d+(?:-f\d+)?):", user, flags=re.M)
        lessons, new = {}, []
        for cid, body in zip(children[1::2], children[2::2]):
            body = body.split("# The search's memory so far")[0]
            found = evidence(body, self.name)
            self._count("summarizer", found)
            if found:
                lessons[cid] = "; ".join(line for _, line in found)
                new += [f"{cid}: {line}" for _, line in found]
            else:
                lessons[cid] = (unfenced(body).strip().splitlines() or ["graded"])[0][:200]
        mem_sec = re.search(r"# The search's memory so far.*?\n(.*?)\n# Your answer", user, re.S)
        memory = [ln[2:] for ln in (mem_sec.group(1).splitlines() if mem_sec else []) if ln.startswith("- ")]
        for item in new:
            if not any(item.split(": ", 1)[1] in m for m in memory):
                memory.append(item)
        memory = memory[-12:] or ["the canonical single-pass form is the goal"]
        return json.dumps({"children": lessons, "memory": memory})


def _distinct_lines(text: dict[str, str] | str, reference: dict[str, str]) -> list[str]:
    """Lines of a rung that the reference does not have (how a graded code is told to be that rung)."""
    ref = set("\n".join(reference.values()).splitlines())
    src = text if isinstance(text, str) else "\n".join(text.values())
    return [ln for ln in src.splitlines() if ln.strip() and ln not in ref]


# ---------------------------------------------------------------- --check: what each rung's grading shows
def check(tasks_root: str, tasks: list[str], cache: Path) -> None:
    from agent.search.fixes import solution_from
    from agent.search.prompts import verdict_text
    from agent.search.protocol import ENGINEER
    from evaluator.candidate import CandidateSource
    from evaluator.config import EvaluatorConfig, LocalConfig
    from evaluator.evaluation import Evaluator

    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache))), tasks_roots=[tasks_root],
                   log_root=Path(tempfile.mkdtemp(prefix="pesflow-engineer-check-")))
    try:
        for name in tasks:
            task = ev.task(name)
            ladder = rungs(name, reference_files(task))
            for rung, files in ladder.items():
                t0 = time.monotonic()
                v = ev.evaluate(task, candidate=CandidateSource(files=files), grader="dev", loop={"count": 1, "best": None})
                shown = verdict_text(solution_from(v, id="r01-c0", parent_id=None, round=1, island=0, files=files, content_hash="x"), ENGINEER)
                print(f"== {name} {rung}: {v.status.value} speedup={v.speedup} dev={v.dev and v.dev.value} "
                      f"({time.monotonic() - t0:.1f} s)")
                print(shown)
                print("evidence:", evidence(shown, LADDERS[name].name) or "none")
    finally:
        ev.close()


# ---------------------------------------------------------------- what a run directory says
def measure(run_dir: Path) -> dict:
    """Calls, dev gradings (the children's: verdict label '') and USD until the final best was
    first graded, the totals, and the best's dev figure and hidden score."""
    run = json.loads((run_dir / "run.json").read_text())
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines() if ln.strip()]
    best = run.get("best") or {}
    h = best.get("content_hash")
    calls = gradings = 0
    usd = 0.0
    until = None
    for e in events:
        d = e["data"]
        if e["kind"] == "llm_call":
            calls += 1
            usd += float(d.get("cost_usd") or 0)
        elif e["kind"] == "verdict" and d.get("label") == "" and d.get("grader") == "dev" and not d.get("reused"):
            gradings += 1
            if until is None and d.get("content_hash") == h:
                until = (calls, gradings, usd)
        elif e["kind"] == "verdict" and d.get("label") == "baseline" and until is None and d.get("content_hash") == h:
            until = (0, 0, 0.0)
    totals = run.get("totals") or {}
    dev = best.get("dev_speedup")
    if dev is None:  # a dev engine's own figure where there is no speedup (vs_oracle ...)
        found = [b for b in run.get("best_by_round") or [] if b.get("best_id") == best.get("id")]
        dev = found[-1].get("speedup") if found else None
        dev = dev if dev is not None else (found[-1].get("dev") or {}).get("value") if found else None
    hidden = best.get("reward") if best.get("grader") == "hidden" else None
    ids = {d.get("id") for e in events if e["kind"] == "candidate" for d in [e["data"]]}
    return {"status": run.get("status"), "stopped_by": run.get("stopped_by"), "rounds": run.get("rounds_done"),
            "best_id": best.get("id"), "best_dev": dev, "hidden_reward": hidden,
            "hidden_speedup": best.get("speedup") if best.get("grader") == "hidden" else None,
            "calls_until": until[0] if until else None, "gradings_until": until[1] if until else None,
            "usd_until": until[2] if until else None, "calls": totals.get("llm_calls"), "gradings": gradings,
            "usd": totals.get("usd"), "fix_turns": sum(1 for i in ids if i and "-f" in i),
            "elapsed": totals.get("elapsed_seconds")}


def fmt(x, spec: str = "") -> str:
    return "-" if x is None else format(x, spec)


# ---------------------------------------------------------------- the searches
def search(tasks_root: str, task: str, out: Path, cache: Path, model: Engineer, sets: list[str]) -> tuple[Path, str, int]:
    with ScriptedLLMServer(model) as server:
        items = [f"llm.default=openai:{MODEL}", f"llm.base_url={server.openai_base_url}", f"run.out={out}", "run.quiet=true",
                 f"evaluator.local.cache_dir={cache}", "llm.timeout_sec=60"] + sets
        run_dir, status = start_run(load_config(sets=items), task, [tasks_root])
        if server.errors:
            raise RuntimeError(f"the scripted model raised: {server.errors[:3]}")
        return run_dir, status, len(server.requests)


def report(args, rows, hits, examples, answers, old, common, seconds) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else platform.processor()
    out = [f"# The engineer model: today's defaults and the new ones, side by side ({datetime.date.today().isoformat()})", "",
           f"`python3 {shlex.join(['benchmarks/engineer_model.py', *sys.argv[1:]])}` at {commit}"
           f"{' (the tree had uncommitted changes of other files: ' + str(len(dirty.splitlines())) + ' tracked files modified)' if dirty else ''}, "
           f"{platform.node() and 'this machine'}: {os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}; "
           f"the public benchmark's packages graded unchanged, one search at a time; {seconds / 60:.1f} min in all.", "",
           f"Every search: {', '.join(common)}; the scripted model served as openai:{MODEL} (priced by configs/prices.yaml). "
           f"old: {', '.join(old) or '(nothing)'}; new: no settings (configs/default.yaml as the tree has it).", "",
           "\"until the best\": LLM calls (all roles), the children's dev gradings (journal verdicts, label '') and USD "
           "spent, in journal order, until the final best was first graded. best dev: its dev speedup (the dev "
           "engine's own figure where it has none: vs_oracle); hidden: its reward (speedup) from the final pick's "
           "hidden grading.", "",
           "| package | defaults | stopped by | rounds | best | best dev | hidden reward (speedup) | calls until best | "
           "gradings until best | USD until best | calls | gradings | fix turns | USD | wall s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['task']} | {r['defaults']} | {r['stopped_by']} | {r['rounds']} | {r['best_id']} | {fmt(r['best_dev'], '.4g')} | "
                   f"{fmt(r['hidden_reward'], '.3g')} ({fmt(r['hidden_speedup'], '.4g')}) | {fmt(r['calls_until'])} | "
                   f"{fmt(r['gradings_until'])} | {fmt(r['usd_until'], '.4f')} | {fmt(r['calls'])} | {r['gradings']} | "
                   f"{r['fix_turns']} | {fmt(r['usd'], '.4f')} | {r['wall']:.0f} |")
    out += ["", "What the model is: its ladder (benchmarks/engineer_model.py LADDERS) tops at the package's reference, "
            "so once the reference is found every later answer is the reference again (a duplicate, or \"no change\" "
            "when it is the parent: a repair call, no grading): the columns until the best are the comparison, the "
            "totals after it are the cost of rounds with nothing left to find (what patience stops). Each broken "
            "answer is a new program (graded); the planner quotes the evidence it sees, so with fix turns off the "
            "fix reaches an executor through the plan, once the failing round is summarized (pipeline_depth 2: "
            "round 2 is written before round 1 is graded).", "",
            "## Which evidence the model acted on", "",
            "Prompts each rule of EVIDENCE matched (fenced code and the task's own text cut out), per role: the "
            "executor's first answer, its fix turns, the planner (which quotes what it saw in its plan), the "
            "summarizer (per child section). A rule absent here matched nothing.", "",
            "| package | defaults | role | rule | prompts |", "|---|---|---|---|---|"]
    out += [f"| {t} | {w} | {role} | {rule} | {n} |" for t, w, role, rule, n in hits] or ["| - | - | - | (no rule matched) | 0 |"]
    out += ["", "Answers by role and rung (`reference`: the fix, or the top rung again):", ""]
    out += [f"- {t} {w}: " + ", ".join(f"{role} {rung} {n}" for (role, rung), n in a.items()) for t, w, a in answers]
    out += ["", "The first line each rule matched, per package:", ""]
    out += [f"- {t}, {rule}: `{line}`" for (t, rule), line in sorted(examples.items())]
    never = [r.name for r in EVIDENCE if r.name not in {rule for _, rule in examples}]
    out += ["", "Rules that matched nothing: " + ("; ".join(never) if never else "none") + ".", ""]
    return "\n".join(out)


def main() -> int:
    os.environ.setdefault("OPENAI_API_KEY", "sk-scripted-server-needs-no-key")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks-root", required=True)
    ap.add_argument("--task", action="append", default=[])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--children", type=int, default=None, help="loop.children (default: the config's)")
    ap.add_argument("--old-settings", default=",".join(OLD_SETTINGS),
                    help="comma-separated key=value settings naming today's defaults (the 'old' searches)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting for every search")
    ap.add_argument("--out", default=None, help="the Markdown results file (default: print only)")
    ap.add_argument("--work", default=None, help="where run directories go (default: a new temporary folder)")
    args = ap.parse_args()
    cache = Path(tempfile.gettempdir()) / "pesflow-bench-cache"
    tasks = args.task or list(DEFAULT_TASKS)
    if args.check:
        check(args.tasks_root, tasks, cache)
        return 0
    common = [f"loop.rounds={args.rounds}", f"loop.seed={args.seed}", "evaluator.grader=dev", *args.set]
    if args.children is not None:
        common.append(f"loop.children={args.children}")
    old, unknown = [], []
    for kv in (kv.strip() for kv in args.old_settings.split(",")):
        try:
            load_config(sets=[kv]) if kv else None
        except Exception:  # a key this tree does not have: nothing to turn off
            unknown.append(kv)
            continue
        old += [kv] if kv else []
    if unknown:
        print(f"old settings this tree does not know (left out): {', '.join(unknown)}", file=sys.stderr)
    work = Path(args.work or tempfile.mkdtemp(prefix="pesflow-engineer-"))
    from evaluator.config import EvaluatorConfig, LocalConfig
    from evaluator.evaluation import Evaluator
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache))), tasks_roots=[args.tasks_root],
                   log_root=Path(tempfile.mkdtemp(prefix="pesflow-engineer-ref-")))
    ladders = {t: rungs(t, reference_files(ev.task(t))) for t in tasks}
    ev.close()
    rows, hits, examples, answers = [], [], {}, []
    t_all = time.monotonic()
    for t in tasks:
        for which, sets in (("old", old), ("new", [])):
            model = Engineer(t, ladders[t])
            t0 = time.monotonic()
            run_dir, status, _ = search(args.tasks_root, t, work / which, cache, model, common + sets)
            m = {"task": t, "defaults": which, "wall": time.monotonic() - t0, "run_dir": str(run_dir), **measure(run_dir)}
            rows.append(m)
            hits += [(t, which, role, rule, n) for (role, rule), n in sorted(model.hits.items())]
            answers.append((t, which, dict(sorted(model.answers.items()))))
            for rule, line in model.examples.items():
                examples.setdefault((t, rule), line)
            print(f"{t} {which}: {m['status']} ({m['stopped_by']}), best {m['best_id']} dev {m['best_dev']}, "
                  f"{m['calls']} calls, {m['gradings']} gradings, {m['wall']:.0f} s; {run_dir}", flush=True)
    text = report(args, rows, hits, examples, answers, old, common, time.monotonic() - t_all)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
