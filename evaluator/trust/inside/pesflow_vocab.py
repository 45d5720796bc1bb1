"""The trust screen's vocabularies, written once for the host's static read of a candidate's
code (evaluator/trust/static.py) and the runtime guard inside the grading (pesflow_guard_active.py,
pesflow_guard_watch.py), which loads this file from beside itself. Standard library only.

The two screens look at different things, so each vocabulary says which one reads it and why
they differ: the static read sees a name written in the source (any case, any prefix, the screen's
own variables too), the guard sees a variable actually read or a file actually opened.
"""

# The grader's mode variables, by name (a variable the grading's environment names is one too:
# the guard config's mode_vars). The guard: a read of one by the candidate's code.
GRADER_VAR_READ = r"^KERNELBENCH_(?!DEVICE$)|_MODE$|VERIFY|GRADER|ORACLE|NEGATIVE|PYTEST_CURRENT_TEST"
# The static read: such a name written in the candidate's source, whole (pesflow's own included),
# any case; the switches in HONEST_VAR_PREFIXES excepted.
GRADER_VAR_WRITTEN = (r"KERNELBENCH_\w*|\w*_MODE|\w*VERIFY\w*|\w*GRADER\w*|\w*ORACLE\w*|\w*NEGATIVE\w*|"
                      r"PYTEST_CURRENT_TEST|PESFLOW\w*")
# device selection and the libraries' own switches (TRITON_CACHE_MODE is Triton's, not the grader's)
HONEST_VAR_PREFIXES = tuple("KERNELBENCH_DEVICE TRITON_ CUDA_ TORCH PYTORCH_ OMP_ MKL_ NCCL_ NVIDIA_".split())

# Files that tell which pass runs or hold the grader's answers. The guard: a file the candidate's
# code opened (its process's argv and environment, the hidden tests, the verifier's state, the
# package's loop, pesflow's own config).
GRADER_PATH_OPENED = (r"^/proc/(self|thread-self|\d+)/(task/\d+/)?(cmdline|environ)$|^/tests(/|$)|^/logs/verifier(/|$)"
                      r"|^/opt/loop(/|$)|^/\.pesflow-trust")
# The static read: such a path written in the source (any process's, its exe and cwd too, any of /logs).
GRADER_PATH_WRITTEN = r"^/proc/[^/]+/(cmdline|environ|exe|cwd)|^/tests(/|$)|^/logs/|^/opt/loop(/|$)|^/opt/verifier"
