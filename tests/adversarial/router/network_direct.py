# Attack: fetch the answers from a server on the host's loopback (the test's listener).
# Stopped by: the scan (socket) before any code runs -> "forbidden_pattern:socket"; and the
# grading's network namespace would refuse it anyway.
import socket

_answers = socket.create_connection(("127.0.0.1", __PORT__), timeout=2).recv(1 << 20)
