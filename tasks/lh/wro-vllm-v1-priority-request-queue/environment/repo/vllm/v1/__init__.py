"""V1 engine core excerpt."""
