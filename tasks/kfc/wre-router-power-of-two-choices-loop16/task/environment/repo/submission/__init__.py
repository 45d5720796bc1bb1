"""p2c-router: power-of-two-choices request routing.

The router lives in :mod:`submission.kernel`; input checking lives in
:mod:`submission.contract`. Nothing is imported eagerly here so that the
helper modules can be used on their own.
"""

__all__ = ["contract", "kernel", "traffic"]
