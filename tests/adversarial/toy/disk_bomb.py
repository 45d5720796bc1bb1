# Attack: fill the disk (the throwaway layer, /tmp and /var/tmp share one cap), then carry on as
# if nothing happened. Appended to a correct, fast kernel.
# Stopped by: the scratch tmpfs of disk_mb (at most half of memory_mb) -> reason "disk_quota".
import itertools

chunk = b"\0" * (1 << 20)
try:
    for i in itertools.count():
        with open(("/tmp", "/var/tmp", "/app/repo")[i % 3] + f"/fill-{i}", "wb") as f:
            for _ in range(16):
                f.write(chunk)
except OSError:
    pass  # full: pretend all is well
