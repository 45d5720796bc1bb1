"""Every LLM call of a run goes through here: leak screen, journal, budget, replay. (Totals are
counted from the journal: agent/rundir/schema.py journal_totals.)

Each prompt is screened (agent/llm/leak_guard.py): a line that carries hidden-grader material is
withheld, the call goes ahead without it, and a `withheld` event names what and why. Every
answer, served or paid, is the model's own text from then on.

A call that has been made before (same role, request hash and occurrence) is served from the
journal of the run being resumed or replayed instead of the network: never paid twice.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from agent.busy import Busy
from agent.rundir.journal import Journal
from agent.rundir.schema import Event
from agent.llm import LLMClient, LLMError, LLMRequest, Message
from agent.llm.bandit import ModelBandit
from agent.llm.leak_guard import LeakGuard, Screened
from agent.llm.types import FATAL_KINDS


CAP_RAISED_LATER = "budget_raised_later"
_NO_BANDIT = ModelBandit([])  # a model no bandit chooses: its calls and credits count nowhere


class BudgetExhausted(Exception):
    """The run's USD cap is reached: no new call is made and the run ends cleanly.

    In a replay, the refusal the cap made in the original run comes again at the same call;
    `raised_later`: the original was then resumed with a higher cap and went on, so the replay
    records the round as the capped one was and goes on too (its `stop` says which)."""

    def __init__(self, message: str, raised_later: bool = False):
        super().__init__(message)
        self.raised_later = raised_later

    @property
    def stop(self) -> str:
        return CAP_RAISED_LATER if self.raised_later else "budget_exhausted"


class ModelUnreachable(Exception):
    """An error no retry can cure (no key, a key refused, no such model, a request rejected): the
    search stops at once, its run directory resumable once the cause is fixed."""


@dataclass
class Outcome:
    text: str | None  # None when the call failed
    error: str | None = None
    error_kind: str | None = None
    replayed: bool = False
    sent: str = ""  # the user prompt as sent, after the leak screen (what the readable copies keep)


class Recorded:
    """Answers of an earlier run, served by (tag, request hash) in the order they were given: the
    tag ("r3/c1") tells apart identical prompts of different rounds."""

    def __init__(self, events: list[dict[str, Any]]):
        self._answers: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        self.refused: dict[tuple[str, str], bool] = {}  # calls the USD cap refused -> the run resumed after
        for e in events:
            d = e["data"]
            if e["kind"] == "llm_call" and d.get("text") is not None and not d.get("replayed"):
                self._answers[(d.get("tag", ""), d["request_hash"])].append(d)
            elif e["kind"] == "llm_call" and d.get("error_kind") == "budget":
                self.refused[(d.get("tag", ""), d["request_hash"])] = False
            elif e["kind"] == "resume":
                self.refused = dict.fromkeys(self.refused, True)
        self._served: dict[tuple[str, str], int] = defaultdict(int)
        self._lock = threading.Lock()

    def take(self, tag: str, request_hash: str) -> dict[str, Any] | None:
        key = (tag, request_hash)
        with self._lock:
            n = self._served[key]
            answers = self._answers.get(key, [])
            if n < len(answers):
                self._served[key] += 1
                return answers[n]
            return None


class Gateway:
    def __init__(self, clients: dict[str, LLMClient], journal: Journal, guard: LeakGuard,
                 max_tokens: int = 4096, temperature: float | None = None, top_p: float | None = None,
                 recorded: Recorded | None = None, offline: bool = False,
                 learned: list[str] = (),  # type: ignore[assignment]
                 models: dict[str, list[str]] | None = None, explore: float = 1.0,
                 history: list[dict[str, Any]] = ()):  # type: ignore[assignment]
        self.clients = clients
        # a role with several models: its bandit, rebuilt from the run's journal (a resume goes on from it)
        self.bandits = {role: ModelBandit(list(specs), explore) for role, specs in (models or {}).items()}
        self._chosen: dict[str, str] = {}  # tag -> the model that answered it
        self._recorded_choice: dict[str, list[str]] = defaultdict(list)  # tag -> the record's choices, in order
        self._credited: set[str] = set()
        for e in history:
            d = e["data"]
            if e["kind"] == Event.model_choice:
                self._recorded_choice[d["tag"]].append(d["model"])
                if (d.get("reason") or {}).get("rule") != "recorded":  # a choice made then, not one served again
                    self._bandit_of(d["model"], d.get("role", "")).chosen(d["model"])
            elif e["kind"] == Event.model_credit and d["tag"] not in self._credited:
                self._credited.add(d["tag"])
                self._bandit_of(d["model"], d.get("role", "")).credit(d["model"], float(d["gain"]))
            elif e["kind"] == Event.llm_call and not d.get("replayed") and d.get("text") is not None:
                spec = f"{d['provider']}:{d['model']}"
                self._bandit_of(spec, d.get("role", "")).paid(spec, float(d.get("cost_usd") or 0))
        self.journal = journal
        self.guard = guard
        for text in learned:  # a resumed run: the answers before its checkpoint were the model's own
            guard.learn(text)
        self._lock = threading.Lock()
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.recorded = recorded
        self.offline = offline  # replay: a call that was not recorded fails instead of going out
        self.busy = Busy()  # time spent waiting on the model (run.json's llm_busy_share)
        self.closing = False  # the search stops: proposals still in flight make no new call
        self.answered = False  # a live call of this process came back (see the connection rule below)

    def client_for(self, role: str, tag: str = "") -> LLMClient:
        """The role's model; where the role has several, the one its bandit chooses for this call
        (a repair goes to the model whose answer it repairs; a replay takes the record's choice)."""
        key = "executor" if role == "repair" else role
        bandit = self.bandits.get(key)
        if bandit is None:
            return self.clients.get(role) or self.clients["default"]
        if role == "repair":
            spec = self._chosen.get(tag.split("/repair")[0]) or bandit.models[0]
        else:
            with self._lock:
                recorded = self._recorded_choice.get(tag)
                if recorded:
                    spec, why = recorded.pop(0), {"rule": "recorded"}
                else:
                    spec, why = bandit.choose()
                    bandit.chosen(spec)
                self._chosen[tag] = spec
                # journaled in the order chosen: the reasons read in turn tell how the bandit's numbers moved
                self.journal.append(Event.model_choice, role=key, tag=tag, model=spec, reason=why)
        return self.clients[f"model:{spec}"]

    def credit(self, tag: str, gain: float) -> None:
        """What the child of the call `tag` earned (agent/llm/bandit.py gain), for the model that wrote it."""
        spec = self._chosen.get(tag)
        if spec is None or tag in self._credited:
            return
        self._credited.add(tag)
        role = "planner" if tag.endswith("/plan") else "executor"
        self._bandit_of(spec, role).credit(spec, gain)
        self.journal.append(Event.model_credit, role=role, tag=tag, model=spec, gain=round(gain, 4))

    def _bandit_of(self, spec: str, role: str) -> ModelBandit:
        b = self.bandits.get("executor" if role == "repair" else role)
        return b if b is not None and spec in b.arms else _NO_BANDIT

    def call(self, role: str, system: str, user: str, tag: str) -> Outcome:
        """`user`'s parts (agent/search/prompts.py Prompt), where it has them: each part but the
        last ends a prefix that stays the same from call to call, so its end is a prompt-cache
        breakpoint. Parts are screened apart: each ends a line, so the screen, which reads
        lines, sees the same lines."""
        if self.closing:
            return Outcome(None, "the search is stopping; call not made", "stopped")
        client = self.client_for(role, tag)
        parts = list(getattr(user, "parts", None) or [user])
        with self._lock:
            system_s, screened = self.guard.screen(system), [self.guard.screen(p) for p in parts]
        text = "".join(s.text for s in screened)
        ends = [sum(len(s.text) for s in screened[: i + 1]) for i in range(len(screened) - 1)]
        request = LLMRequest(role=role, messages=[Message(role="system", content=system_s.text),
                                                  Message(role="user", content=text,
                                                          breaks=sorted({b for b in ends if 0 < b < len(text)}))],
                             max_tokens=self.max_tokens, temperature=self.temperature, top_p=self.top_p, tag=tag)
        user_s = Screened(text, [w for s in screened for w in s.withheld])
        rhash = request.request_hash(client.provider, client.model)
        base = {"role": role, "tag": tag, "provider": client.provider, "model": client.model, "request_hash": rhash}
        if system_s.withheld or user_s.withheld:
            self.journal.append(Event.withheld, role=role, tag=tag, request_hash=rhash,
                                items=system_s.withheld + user_s.withheld)
        outcome = self._send(client, request, base)
        outcome.sent = user_s.text
        with self._lock:
            self.guard.learn(outcome.text)
        return outcome

    def _send(self, client: LLMClient, request: LLMRequest, base: dict[str, Any]) -> Outcome:
        tag, rhash = base["tag"], base["request_hash"]
        recorded = self.recorded.take(tag, rhash) if self.recorded else None
        if recorded is not None:
            self.journal.append(Event.llm_call, **base,
                                messages=[m.model_dump(exclude_defaults=True) for m in request.messages],
                                text=recorded["text"], usage=recorded.get("usage"), cost_usd=0.0, latency_s=0.0,
                                attempts=0, replayed=True)
            return Outcome(recorded["text"], replayed=True)
        if self.offline and self.recorded and (tag, rhash) in self.recorded.refused:
            msg = "the USD cap refused this call in the run being replayed"
            self.journal.append(Event.llm_call, **base, text=None, error=msg, error_kind="budget")
            raise BudgetExhausted(msg, raised_later=self.recorded.refused[(tag, rhash)])
        if self.offline:
            msg = "not recorded in the trace being replayed (replay makes no network call)"
            self.journal.append(Event.llm_call, **base, text=None, error=msg, error_kind="not_recorded")
            return Outcome(None, msg, "not_recorded")
        try:
            with self.busy.running():
                result = client.complete(request)
        except LLMError as e:
            self.journal.append(Event.llm_call, **base,
                                messages=[m.model_dump(exclude_defaults=True) for m in request.messages], text=None,
                                error=str(e), error_kind=e.kind, attempts=e.attempts)
            if e.kind == "budget":
                raise BudgetExhausted(str(e)) from None
            if e.kind in FATAL_KINDS:
                raise ModelUnreachable(str(e)) from None
            if e.kind == "connection" and not self.answered:
                # never reached at all, every retry spent: a wrong address or no network, which no
                # later call cures; going on would fill every round with failures (exit 0)
                raise ModelUnreachable(f"{e}; it has not answered once: check the server's address "
                                       "(OPENAI_BASE_URL or --set llm.base_url) and the network") from None
            return Outcome(None, str(e), e.kind)
        self.answered = True
        self._bandit_of(f"{client.provider}:{client.model}", request.role).paid(f"{client.provider}:{client.model}",
                                                                                result.cost_usd)
        self.journal.append(Event.llm_call, **base,
                            messages=[m.model_dump(exclude_defaults=True) for m in request.messages], text=result.text,
                            usage=result.usage.model_dump(), cost_usd=result.cost_usd, priced=result.priced,
                            latency_s=round(result.latency_s, 4), attempts=result.attempts,
                            finish_reason=result.finish_reason)
        return Outcome(result.text)
