"""prefill-attn: causal attention for the prefill phase of an inference service."""

SUPPORTED_HEAD_DIMS = (32, 64, 128)
