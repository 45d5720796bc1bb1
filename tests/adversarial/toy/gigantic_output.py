# Attack: flood stdout (the harness keeps the grader's output). Appended to a correct, fast kernel.
# Stopped by: max_output_mb -> reason "output_limit"; what is kept is cut to max_log_bytes.
import sys

line = "x" * 65535 + "\n"
while True:
    sys.stdout.write(line)
