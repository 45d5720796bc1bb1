import random

import pytest

from agent.search.edits import (
    EDIT_FORMAT_HELP,
    EditFailure,
    ParsedEdits,
    SearchReplace,
    WholeFile,
    apply_edits,
    extract_and_apply,
    format_failures,
    parse_edits,
)

KERNEL = """\
import numpy as np


def total(xs):
    s = 0
    for x in xs:
        s += x * x
    return s
"""

CU = """\
__global__ void square(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i];
}
"""

METHODS = """\
class Op:
    def forward(self, x):
        y = x + 1
        return y

    def backward(self, g):
        y = g + 1
        return y
"""

FILES = {"toy/kernel.py": KERNEL, "toy/square.cu": CU}


def sr(search: str, replace: str, ch: str = "") -> str:
    lt, eq, gt = ch or "<" * 7, "=" * 7, ">" * 7
    return f"{lt} SEARCH\n{search}{eq}\n{replace}{gt} REPLACE\n"


INDEX = "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
LOOP = "    s = 0\n    for x in xs:\n        s += x * x\n    return s\n"
FAST = "    xs = np.asarray(xs)\n    return float(np.dot(xs, xs))\n"
KERNEL_FAST = KERNEL.replace(LOOP, FAST)


# --- SEARCH/REPLACE blocks ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path_line",
    ["toy/kernel.py", "`toy/kernel.py`", "**toy/kernel.py**", "File: toy/kernel.py", "### toy/kernel.py",
     "**File:** `toy/kernel.py`", "- `toy/kernel.py`:"],
)
def test_search_replace_path_on_the_line_before(path_line):
    answer = f"I vectorize the loop.\n\n{path_line}\n{sr(LOOP, FAST)}\nDone."
    r = extract_and_apply(answer, FILES)
    assert r.ok and r.applied == 1
    assert r.files == {"toy/kernel.py": KERNEL_FAST}  # only changed files come back


def test_path_first_line_inside_fence_or_in_info_string_or_before_fence():
    inside = f"```python\ntoy/kernel.py\n{sr(LOOP, FAST)}```\n"
    info = f"```python toy/kernel.py\n{sr(LOOP, FAST)}```\n"
    before = f"toy/kernel.py\n```python\n{sr(LOOP, FAST)}```\n"
    for answer in (inside, info, before):
        r = extract_and_apply(answer, FILES)
        assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}, answer


@pytest.mark.parametrize("n", [5, 9])
def test_markers_tolerate_5_to_9_characters_and_trailing_spaces(n):
    answer = f"toy/kernel.py\n{'<' * n} SEARCH  \n{LOOP}{'=' * n} \n{FAST}{'>' * n} REPLACE\t\n"
    assert extract_and_apply(answer, FILES).files == {"toy/kernel.py": KERNEL_FAST}


def test_four_character_markers_are_not_markers():
    answer = f"toy/kernel.py\n<<<< SEARCH\n{LOOP}====\n{FAST}>>>> REPLACE\n"
    r = extract_and_apply(answer, FILES)
    assert not r.ok and r.files == {} and [f.kind for f in r.failures] == ["no_code"]


def test_several_blocks_and_files_apply_in_order_each_on_the_previous_result():
    answer = (
        "toy/kernel.py\n```python\n"
        + sr("    s = 0\n", "    s = 0.0\n")
        # The second block searches for text that exists only after the first one applied.
        + sr("    s = 0.0\n    for x in xs:\n", "    s = 0.0\n    for x in list(xs):\n")
        + "```\n\ntoy/square.cu\n```cuda\n"
        + sr("  if (i < n) y[i] = x[i] * x[i];\n", "  if (i < n) { float v = x[i]; y[i] = v * v; }\n")
        + "```\n"
    )
    r = extract_and_apply(answer, FILES)
    assert r.ok and r.applied == 3
    assert "    s = 0.0\n    for x in list(xs):\n" in r.files["toy/kernel.py"]
    assert "float v = x[i];" in r.files["toy/square.cu"]


def test_block_without_path_belongs_to_the_single_scope_file_only():
    r = extract_and_apply(sr(LOOP, FAST), {"toy/kernel.py": KERNEL})
    assert r.ok and r.files["toy/kernel.py"] == KERNEL_FAST
    r = extract_and_apply(sr(LOOP, FAST), FILES)
    assert r.files == {} and [f.kind for f in r.failures] == ["unknown_path"]
    assert "toy/kernel.py" in r.failures[0].detail and "s = 0" in r.failures[0].detail


def test_later_blocks_without_path_follow_the_previous_block_file():
    answer = (
        "toy/square.cu\n"
        + sr(INDEX, INDEX.replace("int i", "long i"))
        + sr("  if (i < n) y[i] = x[i] * x[i];\n", "  if (i < (long)n) y[i] = x[i] * x[i];\n")
    )
    r = extract_and_apply(answer, FILES)
    assert r.ok and r.applied == 2 and "long i" in r.files["toy/square.cu"] and "(long)n" in r.files["toy/square.cu"]


def test_empty_search_replaces_an_empty_file_only():
    files = {"toy/kernel.py": KERNEL, "toy/new.py": ""}
    r = extract_and_apply("toy/new.py\n" + sr("", "X = 1\n"), files)
    assert r.ok and r.files == {"toy/new.py": "X = 1\n"}
    r = extract_and_apply("toy/kernel.py\n" + sr("", "X = 1\n"), files)
    assert r.files == {} and [(f.kind, f.path) for f in r.failures] == [("malformed_block", "toy/kernel.py")]


# --- whole files -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "opening",
    ["```python path=toy/kernel.py\n", "```python toy/kernel.py\n", "toy/kernel.py\n```python\n",
     "Here is the new `toy/kernel.py`:\n```python\n", "```python\ntoy/kernel.py\n", "```py title=\"toy/kernel.py\"\n"],
)
def test_whole_file_named_by_info_string_or_the_line_before(opening):
    r = extract_and_apply(f"Rewritten.\n\n{opening}{KERNEL_FAST}```\n", FILES)
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}


def test_info_string_variants_and_captions():
    r = extract_and_apply(f"```python:toy/kernel.py\n{KERNEL_FAST}```\n", FILES)
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}
    r = extract_and_apply(f"~~~python toy/kernel.py\n{KERNEL_FAST}~~~\n", FILES)
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}
    # A caption is not a path: the block is the single scope file's unnamed whole file.
    r = extract_and_apply(f'```python title="Fast"\n{KERNEL_FAST}```\n', {"toy/kernel.py": KERNEL})
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}


def test_path_a_few_lines_above_and_blocks_indented_in_a_list():
    r = extract_and_apply(f"### toy/kernel.py\nReplace the loop by a dot product.\n\n{sr(LOOP, FAST)}", FILES)
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}
    nested = "".join("   " + ln + "\n" for ln in f"toy/kernel.py\n{sr(LOOP, FAST)}".splitlines())
    r = extract_and_apply("1. Vectorize:\n" + nested, FILES)
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}


def test_whole_cuda_file():
    new_cu = CU.replace("x[i] * x[i]", "__fmul_rn(x[i], x[i])")
    r = extract_and_apply(f"```cuda toy/square.cu\n{new_cu}```\n", FILES)
    assert r.ok and r.files == {"toy/square.cu": new_cu}
    r = extract_and_apply(f"toy/square.cu\n```cuda\n{new_cu}```\n", FILES)
    assert r.ok and r.files == {"toy/square.cu": new_cu}


def test_single_scope_file_takes_the_one_substantial_unnamed_block():
    files = {"toy/kernel.py": KERNEL}
    answer = f"Use numpy.\n\n```python\n{KERNEL_FAST}```\n\nRun it with:\n```bash\npython -m bench\n```\n"
    r = extract_and_apply(answer, files)
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}
    # A one-liner is an example, not a file.
    r = extract_and_apply("Try `np.dot`:\n```python\nnp.dot(xs, xs)\n```\n", files)
    assert r.files == {} and [f.kind for f in r.failures] == ["no_code"]
    # Two candidate blocks: which one is the file is a guess, so it is refused.
    r = extract_and_apply(f"Old:\n```python\n{KERNEL}```\nNew:\n```python\n{KERNEL_FAST}```\n", files)
    assert r.files == {} and r.failures[0].kind == "no_code" and "names its file" in r.failures[0].detail
    # With several scope files an unnamed block belongs to none.
    r = extract_and_apply(f"```python\n{KERNEL_FAST}```\n", FILES)
    assert r.files == {} and r.failures[0].kind == "no_code" and "toy/square.cu" in r.failures[0].detail


def test_unnamed_block_is_not_a_whole_file_when_the_answer_has_markers():
    files = {"toy/kernel.py": KERNEL}
    answer = f"{sr(LOOP, FAST)}\nFor reference:\n```python\n{KERNEL_FAST}```\n"
    r = extract_and_apply(answer, files)
    assert r.ok and r.applied == 1 and r.files == {"toy/kernel.py": KERNEL_FAST}


# --- paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling", ["./toy/kernel.py", "a/toy/kernel.py", "b/toy/kernel.py", "/app/repo/toy/kernel.py", "kernel.py"]
)
def test_path_spellings_resolve_to_the_scope_path(spelling):
    r = extract_and_apply(f"{spelling}\n{sr(LOOP, FAST)}", FILES)
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}
    r = extract_and_apply(f"```python path={spelling}\n{KERNEL_FAST}```\n", FILES)
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}


def test_path_outside_scope_is_a_failure_never_dropped():
    answer = "toy/utils.py\n" + sr("a = 1\n", "a = 2\n")
    answer += "\n```python path=setup.py\nfrom setuptools import setup\nsetup()\n```\n"
    r = extract_and_apply(answer + f"\ntoy/kernel.py\n{sr(LOOP, FAST)}", FILES)
    assert [(f.kind, f.path) for f in r.failures] == [("out_of_scope", "toy/utils.py"), ("out_of_scope", "setup.py")]
    assert "toy/kernel.py" in r.failures[0].detail  # the model is told what it may edit
    assert r.files == {"toy/kernel.py": KERNEL_FAST} and not r.ok  # the good edit applies; the answer is not clean


def test_non_scope_path_mentioned_in_prose_is_not_an_edit():
    answer = f"This mirrors `toy/utils.py` and /usr/lib/python3/heapq.py.\n\ntoy/kernel.py\n{sr(LOOP, FAST)}"
    r = extract_and_apply(answer, FILES)
    assert r.ok and r.failures == []


def test_basename_shared_by_two_scope_files_is_unknown_path():
    files = {"a/kernel.py": KERNEL, "b2/kernel.py": KERNEL}
    r = extract_and_apply(f"kernel.py\n{sr(LOOP, FAST)}", files)
    assert r.files == {} and [f.kind for f in r.failures] == ["unknown_path"]


# --- matching SEARCH -----------------------------------------------------------------------


def test_exact_match_is_preferred_and_indentation_shift_is_tolerated():
    # The model dedented a method body; the block must land in place with the file's indentation.
    search = "y = g + 1\nreturn y\n"
    replace = "y = g * 2\nif y is None:\n    raise ValueError\nreturn y\n"
    r = extract_and_apply(f"op.py\n{sr(search, replace)}", {"op.py": METHODS})
    assert r.ok
    body = "        y = g * 2\n        if y is None:\n            raise ValueError\n        return y\n"
    assert body in r.files["op.py"]
    assert "        y = x + 1\n" in r.files["op.py"]  # forward untouched


def test_over_indented_search_is_shifted_back():
    search = "            s += x * x\n"  # four spaces too many
    r = extract_and_apply("toy/kernel.py\n" + sr(search, "            s += x ** 2\n"), FILES)
    assert r.ok and "        s += x ** 2\n    return s\n" in r.files["toy/kernel.py"]


def test_trailing_whitespace_and_padding_blank_lines_are_tolerated():
    search = "    s = 0   \n    for x in xs:\t\n"
    r = extract_and_apply("toy/kernel.py\n" + sr(search, "    s = 0.0\n    for x in xs:\n"), FILES)
    assert r.ok and "    s = 0.0\n" in r.files["toy/kernel.py"]
    r = extract_and_apply("toy/kernel.py\n" + sr("\n" + LOOP + "\n", "\n" + FAST + "\n"), FILES)
    assert r.ok and r.files["toy/kernel.py"] == KERNEL_FAST


def test_ambiguous_search_is_a_failure_showing_where_it_matched():
    r = extract_and_apply("op.py\n" + sr("        return y\n", "        return -y\n"), {"op.py": METHODS})
    assert r.files == {} and [f.kind for f in r.failures] == ["ambiguous_search"]
    assert "lines 4, 8" in r.failures[0].detail and "return y" in r.failures[0].detail
    # Ambiguity survives the tolerant passes too: a dedented duplicate is still two places.
    r = extract_and_apply("op.py\n" + sr("return y\n", "return -y\n"), {"op.py": METHODS})
    assert [f.kind for f in r.failures] == ["ambiguous_search"]


def test_missing_search_names_block_first_line_and_closest_line():
    first = sr("import numpy as np\n", "import numpy as np  # BLAS\n")
    search = "    s = 0\n    for x in ys:\n"
    r = extract_and_apply("toy/kernel.py\n" + first + "toy/kernel.py\n" + sr(search, "pass\n"), FILES)
    (f,) = r.failures
    assert f.kind == "search_not_found" and f.path == "toy/kernel.py"
    assert "SEARCH block 2" in f.detail and "'s = 0'" in f.detail and "closest file line 5: 's = 0'" in f.detail
    # The other block still applies, but the answer is not clean: it goes back for repair.
    assert "# BLAS" in r.files["toy/kernel.py"] and not r.ok


def test_blocks_apply_to_the_result_of_previous_blocks_not_the_original():
    answer = f"toy/kernel.py\n{sr(LOOP, FAST)}toy/kernel.py\n{sr(LOOP, FAST)}"
    r = extract_and_apply(answer, FILES)
    assert [f.kind for f in r.failures] == ["search_not_found"]


# --- failures of the answer as a whole -----------------------------------------------------


def test_no_code():
    r = extract_and_apply("I think the kernel is already optimal.", FILES)
    assert r.files == {} and r.applied == 0 and [(f.kind, f.path) for f in r.failures] == [("no_code", None)]
    r = extract_and_apply("```diff\n--- a/toy/kernel.py\n+++ b/toy/kernel.py\n@@ -1 +1 @@\n-a\n+b\n```\n", FILES)
    assert r.failures[0].kind == "no_code" and "diff" in r.failures[0].detail


def test_empty_result_is_a_failure():
    r = extract_and_apply("toy/kernel.py\n" + sr(KERNEL, ""), FILES)
    assert r.files == {} and r.applied == 0
    assert [(f.kind, f.path) for f in r.failures] == [("empty_file", "toy/kernel.py")]
    r = extract_and_apply("```python path=toy/kernel.py\n\n```\n", FILES)
    assert r.files == {} and r.failures[0].kind == "empty_file"


def test_identical_result_counts_as_nothing_applied():
    r = extract_and_apply(f"toy/kernel.py\n{sr(LOOP, LOOP)}", FILES)
    assert r.files == {} and r.applied == 0 and r.failures == [] and not r.ok
    r = extract_and_apply(f"```python toy/kernel.py\n{KERNEL}```\n", FILES)
    assert r.files == {} and r.applied == 0 and not r.ok


def test_stray_replace_marker_and_unclosed_blocks_are_malformed():
    r = extract_and_apply("toy/kernel.py\n>>>>>>> REPLACE\n", FILES)
    assert [f.kind for f in r.failures] == ["malformed_block"]
    r = extract_and_apply(f"toy/kernel.py\n<<<<<<< SEARCH\n{LOOP}>>>>>>> REPLACE\n", FILES)
    assert [f.kind for f in r.failures] == ["malformed_block"] and "=======" in r.failures[0].detail
    r = extract_and_apply(f"```python toy/kernel.py\n{KERNEL_FAST}", FILES)  # whole file cut off
    assert r.files == {} and [f.kind for f in r.failures] == ["malformed_block"]


VALID = (
    "I replace the Python loop by a dot product and use a fused multiply in the CUDA kernel.\n\n"
    f"toy/kernel.py\n```python\n{sr(LOOP, FAST)}```\n\n"
    "toy/square.cu\n```cuda\n"
    + sr("  if (i < n) y[i] = x[i] * x[i];\n", "  if (i < n) y[i] = __fmul_rn(x[i], x[i]);\n")
    + sr(INDEX, INDEX.replace("int i", "const int i"))
    + "```\n\nThat is all.\n"
)


def test_truncated_answers_fail_instead_of_applying_half_an_edit():
    full = extract_and_apply(VALID, FILES)
    assert full.ok and full.applied == 3
    # Cuts that leave a complete shorter answer cannot be told from one: between the two
    # fences, and after the last one. Everywhere else a cut must be reported.
    first_close = VALID.index("```\n", VALID.index("```python") + 3) + 3
    second_open, last_close = VALID.index("```cuda") + 2, VALID.rindex("```") + 3
    rng = random.Random(1234)
    cuts = rng.sample(range(len(VALID)), 30) + list(range(len(VALID)))  # 30 random, then every point
    for cut in cuts:
        r = extract_and_apply(VALID[:cut], FILES)
        failed = {f.path for f in r.failures}
        for path, text in r.files.items():  # a file no failure names is complete
            assert path in failed or text == full.files[path], (cut, path)
        if cut < first_close or second_open < cut < last_close:
            assert r.failures, (cut, VALID[:cut][-40:])


def test_garbage_never_raises():
    rng = random.Random(7)
    pieces = VALID.split("\n") + ["```", "~~~", "=======", "<<<<<<< SEARCH", ">>>>>>> REPLACE", "", "```cuda x.cu",
                                  "/abs/toy/kernel.py", "**", "# ", "```python path=", "`"]
    for _ in range(300):
        text = "\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 25)))
        if rng.random() < 0.3:
            text = text.replace("\n", "\r\n")
        r = extract_and_apply(text, FILES)
        assert set(r.files) <= set(FILES) and (r.applied == 0) == (not r.files)
        # Nothing comes back silently: a change, a failure, or edits that changed nothing.
        assert r.files or r.failures or parse_edits(text, list(FILES)).edits
    for text in ["", "\n", "\r", "```", "<<<<<<< SEARCH", "=======\n>>>>>>> REPLACE", "\x00\ufeff"]:
        assert extract_and_apply(text, FILES).failures


def test_crlf_answer_and_crlf_file_keep_the_file_line_endings():
    files = {"toy/kernel.py": KERNEL.replace("\n", "\r\n")}
    answer = f"toy/kernel.py\n{sr(LOOP, FAST)}".replace("\n", "\r\n")
    r = extract_and_apply(answer, files)
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST.replace("\n", "\r\n")}
    r = extract_and_apply(answer, {"toy/kernel.py": KERNEL})
    assert r.ok and r.files == {"toy/kernel.py": KERNEL_FAST}


# --- the pieces on their own --------------------------------------------------------------


def test_parse_edits_returns_typed_edits_in_order():
    parsed = parse_edits("toy/square.cu\n" + sr("a\n", "b\n") + "\n```python toy/kernel.py\nx = 1\n```\n", list(FILES))
    assert parsed.failures == []
    assert parsed.edits == [SearchReplace(path="toy/square.cu", search="a\n", replace="b\n"),
                            WholeFile(path="toy/kernel.py", content="x = 1\n")]


def test_apply_edits_is_pure_and_reports_unknown_paths():
    files = dict(FILES)
    parsed = ParsedEdits(edits=[SearchReplace(path="toy/kernel.py", search=LOOP, replace=FAST),
                                WholeFile(path="nope.py", content="x\n")], failures=[])
    r = apply_edits(files, parsed)
    assert files == FILES and r.files == {"toy/kernel.py": KERNEL_FAST}
    assert [(f.kind, f.path) for f in r.failures] == [("unknown_path", "nope.py")]


def test_format_failures_names_path_and_first_line_of_the_missing_search():
    r = extract_and_apply("toy/kernel.py\n" + sr("def totl(xs):\n    pass\n", "x\n"), FILES)
    text = format_failures(r.failures)
    assert "toy/kernel.py" in text and "def totl(xs):" in text and "search_not_found" in text
    assert format_failures([]) == ""
    many = format_failures([EditFailure(path=None, kind="no_code", detail="nothing")] * 2)
    assert many.count("\n") == 2 and "(answer)" in many


def test_the_help_example_is_itself_accepted():
    # What the model is told must be what the parser accepts.
    files = {"toy/kernel.py": "import numpy as np\n\ndef total(xs):\n    return sum(x * x for x in xs)\n"}
    sr_part, whole_part = EDIT_FORMAT_HELP.split("- Or send a whole file")
    r = extract_and_apply(sr_part, files)
    assert r.ok and "np.dot" in r.files["toy/kernel.py"]
    r = extract_and_apply(whole_part, files)
    assert r.ok and r.files["toy/kernel.py"].startswith("import numpy as np\n\ndef total")
