# Attack: stop the clock, so the candidate's calls look instant.
# Stopped by: the scan -> "forbidden_pattern:timer_access", "forbidden_pattern:time_monkeypatch";
# the harness bound its clock before importing anything of the candidate anyway.
import time

time.perf_counter = lambda: 0.0
time.perf_counter_ns = lambda: 0
