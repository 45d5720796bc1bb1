"""The request object the V1 scheduler moves between its queues."""

from __future__ import annotations

import enum
import time
from typing import Optional


class RequestStatus(enum.IntEnum):
    """Life cycle of a request inside the scheduler."""

    WAITING = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()

    @staticmethod
    def is_finished(status: "RequestStatus") -> bool:
        return status >= RequestStatus.FINISHED_STOPPED


class Request:
    """One generation request.

    Only three fields matter to the waiting queues:

    * ``request_id``   -- a unique string chosen by the client / front end;
    * ``priority``     -- an ``int``; a LOWER value is served EARLIER (it may be
      negative);
    * ``arrival_time`` -- a ``float`` timestamp; an EARLIER arrival is served
      earlier among requests of equal priority.

    Requests compare and hash by identity (no ``__eq__``/``__hash__``/``__lt__``
    override): two distinct ``Request`` objects are never equal, even with the
    same id.
    """

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: Optional[list[int]] = None,
        max_tokens: int = 16,
        arrival_time: Optional[float] = None,
        priority: int = 0,
    ) -> None:
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids or [])
        self.max_tokens = max_tokens
        self.arrival_time = time.time() if arrival_time is None else arrival_time
        self.priority = priority
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_preemptions = 0
        self.output_token_ids: list[int] = []

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    def is_finished(self) -> bool:
        return RequestStatus.is_finished(self.status)

    def __repr__(self) -> str:
        return (
            f"Request(id={self.request_id!r}, priority={self.priority}, "
            f"arrival_time={self.arrival_time!r}, status={self.status.name})"
        )
