# Attack: never return. Appended to a correct, fast toy kernel; runs at import.
# Stopped by: the wall-clock limit on the whole process tree -> status timeout, reason "timeout".
while True:
    pass
