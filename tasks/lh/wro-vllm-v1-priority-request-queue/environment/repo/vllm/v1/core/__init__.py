"""Engine-core pieces: only the scheduler's waiting queues are kept here."""
