# Attack: allocate and touch memory until something breaks. Appended to a correct, fast kernel.
# Stopped by: the memory cgroup (the task's memory_mb) -> reason "out_of_memory".
hog = []
while True:
    hog.append(b"x" * (32 << 20))
