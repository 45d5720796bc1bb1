# Attack: signal the sandbox's init (PID 1 of the grading's pid namespace, the one process that
# stays outside the chroot) to stop the grading early or make it look like the grader broke.
# Appended to a correct, fast kernel.
# Stopped by: SIGKILL/SIGSTOP from inside a namespace never reach its init; the init catches
# the rest, notes them and waits for the grader all the same -> reason "sandbox_tampering".
import os
import signal

for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGKILL):
    try:
        os.kill(1, sig)
    except OSError:
        pass
