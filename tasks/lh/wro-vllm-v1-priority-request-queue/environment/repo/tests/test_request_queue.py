"""Small unit tests of the waiting queues (python -m unittest discover -s tests)."""

import unittest

from vllm.v1.core.sched.mini_scheduler import MiniScheduler
from vllm.v1.core.sched.request_queue import SchedulingPolicy, create_request_queue
from vllm.v1.request import Request


def _req(rid, priority=0, arrival=0.0):
    return Request(rid, arrival_time=arrival, priority=priority)


class PriorityQueueTest(unittest.TestCase):
    def setUp(self):
        self.q = create_request_queue(SchedulingPolicy.PRIORITY)

    def test_order_by_priority_then_arrival(self):
        a, b, c = _req("a", 1, 2.0), _req("b", 0, 5.0), _req("c", 1, 1.0)
        for r in (a, b, c):
            self.q.add_request(r)
        self.assertEqual([r.request_id for r in self.q], ["b", "c", "a"])
        self.assertIs(self.q.pop_request(), b)
        self.assertIs(self.q.peek_request(), c)
        self.assertEqual(len(self.q), 2)

    def test_ties_are_fifo_and_prepend_goes_first(self):
        reqs = [_req(f"r{i}") for i in range(4)]
        for r in reqs[:3]:
            self.q.add_request(r)
        self.q.prepend_request(reqs[3])
        order = [self.q.pop_request().request_id for _ in range(4)]
        self.assertEqual(order, ["r3", "r0", "r1", "r2"])

    def test_errors(self):
        with self.assertRaises(IndexError):
            self.q.pop_request()
        with self.assertRaises(IndexError):
            self.q.peek_request()
        with self.assertRaises(ValueError):
            self.q.remove_request(_req("ghost"))

    def test_remove(self):
        reqs = [_req(f"r{i}", i % 2, float(i)) for i in range(6)]
        for r in reqs:
            self.q.add_request(r)
        self.q.remove_request(reqs[0])
        self.q.remove_requests(r for r in (reqs[1], reqs[0], _req("x")))
        self.assertEqual([r.request_id for r in self.q], ["r2", "r4", "r3", "r5"])
        self.assertTrue(self.q)


class MiniSchedulerTest(unittest.TestCase):
    def test_admit_and_preempt(self):
        s = MiniScheduler(max_running=2)
        reqs = [_req(f"r{i}", priority=i % 3, arrival=float(i)) for i in range(5)]
        for r in reqs:
            s.add_request(r)
        admitted = s.schedule()
        self.assertEqual([r.request_id for r in admitted], ["r0", "r3"])
        victim = s.preempt_one()
        self.assertIs(victim, reqs[3])
        self.assertIs(s.waiting.peek_request(), reqs[3])


if __name__ == "__main__":
    unittest.main()
