"""Modules the grading planted for the grader's later interpreters (inside/pesflow_guard_planted.py),
run for real: the candidate's kernel writes a file during the grading, then the harness starts
another interpreter as a grader's shell line would (`python3 -c "import json ..."` in the
repository folder), where no candidate code runs and the guard proper never comes on."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from evaluator.trust.instrument import INSIDE
from tests.test_trust_guard import families, guarded

# the kernel's line that plants something, then the harness's later interpreter (its current
# folder the repository, '' first on its path) imports what it imports
LATER = """
import os, subprocess, sys
sys.path.insert(0, {pkg!r})
import submission.kernel as k
k.entry(3)
c = os.environ["PESFLOW_TRUST_TEST_CONFIG"]  # the config's marshal copy, as a grading has it: the guard reads it without json
import json, marshal
with open(c[:-5] + ".marshal", "wb") as f:
    marshal.dump(json.load(open(c)), f)
# the guard loaded before '' is on the path, as site loads it in a grading
later = "import sys; p = sys.path.pop(0); import pesflow_guard; sys.path.insert(0, p)\\n" + os.environ["LATER_IMPORT"]
r = subprocess.run([sys.executable, "-c", later], cwd={pkg!r},
                   capture_output=True, text=True, timeout=60)
assert r.returncode == 0, r.stderr
os._exit(0)
"""

SHADOW_SRC = "X = 1"  # what a planted json would run

PLANTED = {
    # (the kernel's planting lines, what the later interpreter imports, a finding expected)
    "json_by_a_shell": (f"subprocess.run(['/bin/sh', '-c', 'printf \"{SHADOW_SRC}\" > \"$0\"/json.py', REPO])",
                        "import json", True),
    "json_package_by_python": ("os.makedirs(REPO + '/json', exist_ok=True); open(REPO + '/json/__init__.py', 'w').write('X = 1\\n')",
                               "import json", True),
    "json_bytecode_alone": ("import py_compile, tempfile; s = tempfile.mktemp(suffix='.py'); open(s, 'w').write('X = 1\\n'); "
                            "py_compile.compile(s, cfile=REPO + '/json.pyc')", "import json", True),
    "installed_package_name": ("open(REPO + '/numpy.py', 'w').write('X = 1\\n')", "import numpy", True),
    # a name the image has nothing for, asked for by the harness or a library (an optional import:
    # the standard library's copy asks for `org`, torch for `opt_einsum`)
    "optional_import_by_a_shell": ("subprocess.run(['/bin/sh', '-c', 'mkdir -p \"$0\"/fastjit_opt && : > \"$0\"/fastjit_opt/__init__.py', REPO])",
                                   "try:\n    import fastjit_opt\nexcept ImportError:\n    pass", True),
    "optional_import_extension": ("import shutil, _testcapi; shutil.copy(_testcapi.__file__, REPO + '/fastext_opt' + _testcapi.__file__.rsplit('_testcapi', 1)[1])",
                                  "try:\n    import fastext_opt\nexcept ImportError:\n    pass", True),
    # a site folder the grading can write (the user's, under HOME): not passed over as the image's
    "optional_import_from_a_writable_site_folder": (
        "d = REPO + '/home/.local/lib/python3/site-packages/fastjit_opt'; os.makedirs(d); open(d + '/__init__.py', 'w').write('X = 1\\n')",
        "import sys; sys.path.append('home/.local/lib/python3/site-packages')\ntry:\n    import fastjit_opt\nexcept ImportError:\n    pass",
        True),
    # honest: a module of its own name (a JIT's) that the candidate's code imports (in a later
    # process too) or a library loads from where it wrote it; the image's module with the cache the
    # import system writes
    "own_module_by_its_code": ("open(REPO + '/gen_kernel_7f3a.py', 'w').write('X = 1\\n')",
                               "import submission.kernel as k; assert k.gen() == 1", False),
    "jit_module_by_location": ("import os; os.makedirs(REPO + '/../jitcache', exist_ok=True); "
                               "open(REPO + '/../jitcache/jit_7f3a.py', 'w').write('X = 1\\n')",
                               "import importlib.util as u; s = u.spec_from_file_location('jit_7f3a', '../jitcache/jit_7f3a.py'); "
                               "m = u.module_from_spec(s); s.loader.exec_module(m); assert m.X == 1", False),
    # pesflow's probe replays the candidate's calls: the modules its inputs name are the candidate's
    "imported_by_the_probe": ("open(REPO + '/gen_kernel_7f3a.py', 'w').write('X = 1\\n')",
                              "exec(compile('import gen_kernel_7f3a', '/.pesflow-trust/pesflow_probe_inputs.py', 'exec'))", False),
    "loaded_under_another_name": ("open(REPO + '/tile_planner_x.py', 'w').write('X = 1\\n')",
                                  "import importlib.util as u; s = u.spec_from_file_location('candidate_tp', 'tile_planner_x.py'); "
                                  "m = u.module_from_spec(s); s.loader.exec_module(m); assert m.X == 1", False),
    "copy_of_the_candidates_file": ("import shutil; shutil.copy(__file__, REPO + '/kernel_copy.py')", "import kernel_copy", False),
    "image_module_cache_by_import": ("import submission.helpers", "import submission.helpers", False),
    # a submodule planted in a package of the image (the repository's, which the harness imports
    # from the writable source tree): a folder with an __init__ or an extension beside the image's
    # .py wins the package's search; a name the package asks for optionally; bytecode alone; an
    # __init__ that makes a namespace folder of the repository a package of the grading's code
    "submodule_package_beside_an_image_module": (
        "os.makedirs(REPO + '/submission/helpers'); open(REPO + '/submission/helpers/__init__.py', 'w').write('OFFSET = 99\\n')",
        "import submission.helpers as h; assert h.OFFSET == 99", True),
    "optional_submodule_by_a_shell": ("subprocess.run(['/bin/sh', '-c', 'echo X = 1 > \"$0\"/submission/_fast_opt.py', REPO])",
                                      "try:\n    import submission._fast_opt\nexcept ImportError:\n    pass", True),
    "submodule_extension_beside_an_image_module": (
        "import shutil, _testcapi; shutil.copy(_testcapi.__file__, REPO + '/submission/helpers' + _testcapi.__file__.rsplit('_testcapi', 1)[1])",
        "try:\n    import submission.helpers\nexcept ImportError:\n    pass", True),
    "submodule_bytecode_alone": ("import py_compile, tempfile; s = tempfile.mktemp(suffix='.py'); open(s, 'w').write('X = 1\\n'); "
                                 "py_compile.compile(s, cfile=REPO + '/submission/_fast_opt.pyc')",
                                 "try:\n    import submission._fast_opt\nexcept ImportError:\n    pass", True),
    "namespace_folder_made_a_package": ("open(REPO + '/nsimg/core/__init__.py', 'w').write('X = 1\\n')",
                                        "import nsimg.core.queue", True),
    # honest: the candidate's own generated submodule, imported by its code (a later process too) or
    # by pesflow's probe; a package the grading wrote (a JIT's) importing its own parts; a copy of
    # the candidate's file beside it
    "own_submodule_by_its_code": ("open(REPO + '/submission/gen_kernel_9f3a.py', 'w').write('X = 1\\n')",
                                  "import submission.kernel as k; assert k.gen_sub() == 1", False),
    "submodule_imported_by_the_probe": ("open(REPO + '/submission/gen_kernel_9f3a.py', 'w').write('X = 1\\n')",
                                        "exec(compile('import submission.gen_kernel_9f3a', '/.pesflow-trust/pesflow_probe_inputs.py', 'exec'))",
                                        False),
    "jit_package_imports_its_own_submodule": (
        "d = REPO + '/../jitcache/jitpkg'; os.makedirs(d); open(d + '/__init__.py', 'w').write('from . import k1\\n'); "
        "open(d + '/k1.py', 'w').write('X = 1\\n')",
        "import importlib.util as u, sys; s = u.spec_from_file_location('jitpkg', '../jitcache/jitpkg/__init__.py', "
        "submodule_search_locations=['../jitcache/jitpkg']); m = u.module_from_spec(s); sys.modules['jitpkg'] = m; "
        "s.loader.exec_module(m); assert m.k1.X == 1", False),
    "copy_of_the_candidates_file_in_its_package": ("import shutil; shutil.copy(__file__, REPO + '/submission/kernel_copy.py')",
                                                   "import submission.kernel_copy", False),
}
IMAGE = {"nsimg/core/queue.py": "Q = 1\n"}  # a namespace folder of the repository (no __init__), as a stub tree has


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_module_the_grading_planted_in_place_of_the_images_is_named_in_a_later_interpreter(tmp_path, case):
    plant, later, expected = PLANTED[case]
    kernel = ("import os, subprocess, sys\nREPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
              f"def entry(x):\n    {plant}\n    return x\n"
              "def gen():\n    import gen_kernel_7f3a\n    return gen_kernel_7f3a.X\n"
              "def gen_sub():\n    import submission.gen_kernel_9f3a as g\n    return g.X\n")
    found = families(guarded(tmp_path, kernel, LATER, limits={"started": "now"}, env={"LATER_IMPORT": later}, image=IMAGE))
    named = [e for e in found.get("harness_patched", []) if "a file the grading wrote" in e or "bytecode cache" in e]
    assert bool(named) == expected, found
    if expected:
        imported, ran = re.findall(r"import ([\w.]+)", later)[-1], re.search(r"module ([\w.]+) ran", named[0]).group(1)
        assert (imported + ".").startswith(ran + "."), named  # the module imported, or the package of it that ran planted code


def test_the_bytecode_cache_of_an_image_module_rewritten_with_other_code_is_named(tmp_path):
    # the cache's header names the source's time and size, so the next interpreter runs its code
    plant = ("import importlib.util, marshal, os\n"
             "    from submission import helpers\n"
             "    st = os.stat(helpers.__file__)\n"
             "    code = compile('OFFSET = 99\\n', helpers.__file__, 'exec')\n"
             "    head = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, 'little') + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, 'little')"
             " + (st.st_size & 0xFFFFFFFF).to_bytes(4, 'little')\n"
             "    p = importlib.util.cache_from_source(helpers.__file__)\n"
             "    os.makedirs(os.path.dirname(p), exist_ok=True)\n"
             "    open(p, 'wb').write(head + marshal.dumps(code))")
    kernel = f"def entry(x):\n    {plant}\n    return x\n"
    later = "import submission.helpers as h; assert h.OFFSET == 99"  # the planted code did run
    found = families(guarded(tmp_path, kernel, LATER, limits={"started": "now"}, env={"LATER_IMPORT": later}))
    assert any("bytecode cache" in e and "helpers" in e for e in found.get("harness_patched", [])), found


def test_nothing_is_looked_at_outside_a_grading(tmp_path):
    # no start time in the config (pesflow's own tests, a replay): the shell's import step is as it was
    kernel = ("import os\nREPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
              "def entry(x):\n    open(REPO + '/json.py', 'w').write('X = 1\\n')\n    return x\n")
    assert families(guarded(tmp_path, kernel, LATER, env={"LATER_IMPORT": "import json"})) == {}


def test_a_finding_the_shell_sends_is_json_whatever_the_path_holds():
    spec = importlib.util.spec_from_file_location("pesflow_guard_planted", INSIDE / "pesflow_guard_planted.py")
    planted = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(planted)
    for text in ('a "quoted" \\ path\n\t\x01', "é/ü/\u2603", "\ud800 lone", "astral \U0001f600"):
        assert json.loads(planted._quote(text)) == "".join(c if ord(c) < 0x10000 else "\ufffd" for c in text)


def test_the_guard_sends_a_planted_files_text_up_to_the_hosts_limit():
    from evaluator.trust import written  # noqa: PLC0415 - beside its one use
    spec = importlib.util.spec_from_file_location("pesflow_guard_planted", INSIDE / "pesflow_guard_planted.py")
    planted = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(planted)
    assert planted._short_text.__defaults__ == (written.MAX_TEXT,)


def test_the_planted_files_text_goes_with_its_finding_so_the_graders_own_can_be_told(tmp_path):
    from evaluator.trust import runtime  # noqa: PLC0415 - beside its one use
    body = "import sys\nsys.dont_write_bytecode = True  # the grader's own stand-in\n"
    kernel = ("import os\nREPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
              f"def entry(x):\n    open(REPO + '/json.py', 'w').write({body!r})\n    return x\n")
    events = guarded(tmp_path, kernel, LATER, limits={"started": "now"}, env={"LATER_IMPORT": "import json"})
    shadows = [e for e in events if e.get("kind") == "finding" and "module json ran" in e.get("evidence", "")]
    assert shadows and shadows[0].get("text") == body, events
    assert runtime.read(shadows, set(), set(), f"cat > json.py <<'EOF'\n{body}EOF\n")[0] == []  # a heredoc of the grader's
    assert runtime.read(shadows, set(), set(), "echo unrelated\n" * 3)[0]
