"""Scheduler queues.

Kept import-free on purpose: the queue modules are imported lazily by
``request_queue.create_request_queue`` so that importing the interface never
imports a concrete queue implementation.
"""
