"""Utilities that operate on already-computed sentence embeddings.

Import the submodules directly, e.g.
``from sbert_mini.util.paraphrase import paraphrase_mining_embeddings``.
"""
