"""A toy admission loop showing how the scheduler drives its waiting queue.

Not part of the hot path that is benchmarked; kept as usage documentation.
"""

from __future__ import annotations

from vllm.v1.core.sched.request_queue import (
    RequestQueue,
    SchedulingPolicy,
    create_request_queue,
)
from vllm.v1.request import Request, RequestStatus


class MiniScheduler:
    """Admits waiting requests into a fixed number of running slots."""

    def __init__(self, max_running: int, policy: SchedulingPolicy = SchedulingPolicy.PRIORITY) -> None:
        self.max_running = max_running
        self.waiting: RequestQueue = create_request_queue(policy)
        self.running: list[Request] = []

    def add_request(self, request: Request) -> None:
        request.status = RequestStatus.WAITING
        self.waiting.add_request(request)

    def abort_requests(self, requests: list[Request]) -> None:
        aborted = {id(r) for r in requests}
        self.running = [r for r in self.running if id(r) not in aborted]
        self.waiting.remove_requests(requests)
        for request in requests:
            request.status = RequestStatus.FINISHED_ABORTED

    def preempt_one(self) -> Request | None:
        """Move the lowest-ranked running request back to the waiting queue."""
        if not self.running:
            return None
        victim = max(self.running, key=lambda r: (r.priority, r.arrival_time))
        self.running.remove(victim)
        victim.status = RequestStatus.PREEMPTED
        victim.num_preemptions += 1
        self.waiting.prepend_request(victim)
        return victim

    def schedule(self) -> list[Request]:
        """Admit waiting requests while slots are free; return the admitted ones."""
        admitted = []
        while self.waiting and len(self.running) < self.max_running:
            request = self.waiting.pop_request()
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            admitted.append(request)
        return admitted
