"""What each backend needs beyond pesflow's core, and the one line that says how to get it.

The container backends' SDKs are extras of the package (pyproject.toml): a backend chosen without
its SDK is bad input of the machine's set-up, said before anything runs (exit 2), never a
traceback from deep inside the backend.
"""

from __future__ import annotations

import importlib

# backend -> (the module it imports, the extra that installs it)
NEEDS = {"docker": ("docker", "docker"), "modal": ("modal", "modal"), "ray": ("ray", "ray")}


class MissingExtra(Exception):
    pass


def require_backend(backend: str) -> None:
    if backend not in NEEDS:
        return
    module, extra = NEEDS[backend]
    try:
        importlib.import_module(module)
    except ImportError as e:
        more = " then `modal token new`," if backend == "modal" else ""
        raise MissingExtra(f"--backend {backend} needs the {module} SDK ({type(e).__name__}: {e}); install it with "
                           f"pip install -e '.[{extra}]' (in pesflow's checkout and venv),{more} or pick another "
                           "--backend") from None
