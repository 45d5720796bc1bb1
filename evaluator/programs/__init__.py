"""Programs pesflow runs as scripts, by path, in a child interpreter: stdlib only, importing
nothing of pesflow's (some run with `python -I -S` on the stand-in python, outside pesflow's
environment). Each file's docstring says who runs it, where, and its arguments; their paths are
spelled here once."""

from __future__ import annotations

from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent
COPY_OUT = PROGRAMS / "copy_out.py"  # a local grading's init: the copy-out after the grader
WRITTEN_SCAN = PROGRAMS / "written_scan.py"  # a local grading's init: what the grading wrote
MEASURE_CEILINGS = PROGRAMS / "measure_ceilings.py"  # evaluator/ceilings.py: the machine's ceilings
