"""vllm-wro: an excerpt of a vLLM-V1-style scheduler core (waiting queues only)."""

__version__ = "0.1.0+wro"

__all__ = ["__version__"]
