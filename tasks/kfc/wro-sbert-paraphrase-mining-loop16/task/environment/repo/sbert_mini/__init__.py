"""sbert_mini: numpy-only utilities for working with sentence embeddings."""

__version__ = "0.3.1"

__all__ = ["__version__"]
