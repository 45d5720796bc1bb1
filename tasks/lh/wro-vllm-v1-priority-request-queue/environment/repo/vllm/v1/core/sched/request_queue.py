"""Waiting-queue interface of the V1 scheduler and its FCFS implementation."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator

from vllm.v1.request import Request


class SchedulingPolicy(enum.Enum):
    FCFS = "fcfs"
    PRIORITY = "priority"


class RequestQueue(ABC):
    """What the scheduler needs from a waiting queue.

    A given ``Request`` object is in a queue at most once at a time; callers
    never add a request that is already queued (they may add it again after it
    was popped or removed).
    """

    @abstractmethod
    def add_request(self, request: Request) -> None:
        """Enqueue ``request`` according to the queue's policy."""

    @abstractmethod
    def pop_request(self) -> Request:
        """Remove and return the next request. ``IndexError`` if empty."""

    @abstractmethod
    def peek_request(self) -> Request:
        """Return the next request without removing it. ``IndexError`` if empty."""

    @abstractmethod
    def prepend_request(self, request: Request) -> None:
        """Put a request back at the front of the queue (e.g. after preemption)."""

    @abstractmethod
    def remove_request(self, request: Request) -> None:
        """Remove one specific queued request. ``ValueError`` if it is not queued."""

    @abstractmethod
    def remove_requests(self, requests: Iterable[Request]) -> None:
        """Remove every queued request among ``requests``; others are ignored."""

    @abstractmethod
    def __bool__(self) -> bool:
        """True if at least one request is queued."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of queued requests."""

    @abstractmethod
    def __iter__(self) -> Iterator[Request]:
        """Yield the queued requests in the order they would be popped."""


class FCFSRequestQueue(deque, RequestQueue):
    """First-come-first-served queue: a plain deque."""

    def add_request(self, request: Request) -> None:
        self.append(request)

    def pop_request(self) -> Request:
        if not self:
            raise IndexError("pop from an empty request queue")
        return self.popleft()

    def peek_request(self) -> Request:
        if not self:
            raise IndexError("peek into an empty request queue")
        return self[0]

    def prepend_request(self, request: Request) -> None:
        self.appendleft(request)

    def remove_request(self, request: Request) -> None:
        for idx, queued in enumerate(self):
            if queued is request:
                del self[idx]
                return
        raise ValueError(f"request {request.request_id!r} is not in the queue")

    def remove_requests(self, requests: Iterable[Request]) -> None:
        doomed = {id(r) for r in requests}
        kept = [r for r in self if id(r) not in doomed]
        self.clear()
        self.extend(kept)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __len__(self) -> int:
        return deque.__len__(self)

    def __iter__(self) -> Iterator[Request]:
        return deque.__iter__(self)


def create_request_queue(policy: SchedulingPolicy) -> RequestQueue:
    """Build the waiting queue for a scheduling policy."""
    if policy == SchedulingPolicy.FCFS:
        return FCFSRequestQueue()
    if policy == SchedulingPolicy.PRIORITY:
        # Imported here so that importing this module never imports the
        # concrete priority queue.
        from vllm.v1.core.sched.wro_priority_request_queue import (
            PriorityRequestQueue,
        )

        return PriorityRequestQueue()
    raise ValueError(f"unknown scheduling policy: {policy!r}")
