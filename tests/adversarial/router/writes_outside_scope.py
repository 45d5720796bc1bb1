# Attack: change a file outside the scope at run time (the input contract, so that a
# shortcut passes), after the repository gates have looked.
# Stopped by: the runtime guard (writes outside /tmp are blocked and recorded) ->
# "forbidden_runtime:writes_outside_scope".
import os

try:
    with open(os.path.join(os.path.dirname(__file__), "contract.py"), "a") as fh:
        fh.write("\n# relaxed\n")
except OSError:
    pass
