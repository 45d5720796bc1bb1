"""What a person watching a run sees: a live table per round on a terminal, plain lines otherwise."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table


def best_shown(best: Any) -> str:
    """The best's figure as a person reads it: its speedup over the baseline, else the dev engine's own
    figure named by its kind (evaluator/scoring.py: a dev engine whose baseline scores 0 gives no
    speedup, e.g. `0.94 dev vs_oracle`, the reference's time over the candidate's), never a bare dash."""
    if best is None:
        return "none yet"
    if best.speedup:
        return f"{best.speedup:.3f}x"
    if getattr(best, "dev_figure", None) is not None:
        return f"{best.dev_figure:.4g} dev {best.dev_kind or 'figure'}"
    return "no figure"


def best_entry(k: int, best: Any) -> dict[str, Any]:
    """A round's line of best_by_round: its speedup, and the dev figure where there is no speedup."""
    entry: dict[str, Any] = {"round": k, "best_id": best.id if best else None,
                             "speedup": best.speedup if best else None}
    if best is not None and (getattr(best, "profile", None) or {}).get("roofline") is not None:
        entry["roofline"] = best.profile["roofline"]  # its dominant kernel's share of a ceiling (loop.roofline_stop)
    if best is not None and not best.speedup and getattr(best, "dev_figure", None) is not None:
        entry["dev"] = {"value": best.dev_figure, "kind": best.dev_kind}
    return entry


class Progress:
    def __init__(self, quiet: bool = False, console: Console | None = None, task: str = "", rounds: int = 0):
        self.console = console or Console()
        self.live_mode = not quiet and self.console.is_terminal
        self.task, self.rounds = task, rounds
        self.rows: list[tuple[str, ...]] = []
        self.status = ""
        self.note = ""  # utilization, shown under the table
        self.started = time.monotonic()
        self.live: Live | None = None
        if self.live_mode:
            self.live = Live(self._table(), console=self.console, refresh_per_second=4, transient=False)
            self.live.start()

    def _table(self) -> Table:
        caption = f"{self.status}\n{self.note}" if self.note else self.status
        t = Table(title=f"pesflow · {self.task} · {self.rounds} rounds", caption=caption, expand=False)
        for col in ("round", "proposed", "graded", "failed", "best", "speedup", "tokens", "USD", "elapsed"):
            t.add_column(col, justify="right" if col not in ("best",) else "left")
        for r in self.rows:
            t.add_row(*r)
        return t

    def phase(self, k: int, what: str) -> None:
        self.status = f"round {k}: {what} · {time.monotonic() - self.started:.0f}s"
        if self.live:
            self.live.update(self._table())

    def round_done(self, k: int, *, proposed: int, graded: int, failed: int, best: Any, totals: dict[str, Any],
                   note: str = "") -> None:
        """`note`: how busy the graders and the model are (agent/search/utilization.py one_line)."""
        tokens = totals.get("input_tokens", 0) + totals.get("output_tokens", 0)
        row = (str(k), str(proposed), str(graded), str(failed), best.id if best else "none yet",
               best_shown(best) if best else "", f"{tokens}", f"{totals.get('usd', 0):.4f}",
               f"{totals.get('elapsed_seconds', 0):.0f}s")
        self.rows.append(row)
        if note:
            self.note = note
        if self.live:
            self.live.update(self._table())
        else:
            best_part = f"best {row[4]} {row[5]}" if best else "best none yet"
            self.console.print(f"round {row[0]}: proposed {row[1]}, graded {row[2]}, failed {row[3]}; {best_part}; "
                               f"tokens {row[6]}; USD {row[7]}; {row[8]}" + (f"; {note}" if note else ""),
                               highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.live:
            self.status = f"done in {time.monotonic() - self.started:.0f}s"
            self.live.update(self._table())
            self.live.stop()
            self.live = None
