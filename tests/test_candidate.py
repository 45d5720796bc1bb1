import pytest

from evaluator.candidate import Candidate, CandidateError, apply_diff, diff_paths, folder_files, scope_violations

SCOPE = ["toy/kernel.py"]
BASE = {"toy/kernel.py": "def f():\n    return 1\n"}


def test_diff_paths_sees_every_header_kind():
    diff = """diff --git a/toy/kernel.py b/toy/kernel.py
--- a/toy/kernel.py
+++ b/toy/kernel.py
@@ -1 +1 @@
-x
+y
diff --git a/old.py b/new.py
similarity index 90%
rename from old.py
rename to new.py
diff --git a/link b/link
new file mode 120000
--- /dev/null
+++ b/link
@@ -0,0 +1 @@
+/etc/passwd
"""
    touched, links = diff_paths(diff)
    assert touched == {"toy/kernel.py", "old.py", "new.py", "link"}
    assert links == {"link"}
    reasons = scope_violations(touched, links, SCOPE)
    assert reasons == ["out_of_scope:link", "out_of_scope:new.py", "out_of_scope:old.py", "symlink_or_special_file:link"]


def test_git_dir_escape_and_absolute_prefix():
    touched, _ = diff_paths(
        "--- a/.git/HEAD\n+++ b/.git/HEAD\n--- a/../x\n+++ b/../x\n--- /app/repo/toy/kernel.py\n+++ /app/repo/toy/kernel.py\n"
    )
    assert touched == {".git/HEAD", "../x", "toy/kernel.py"}
    assert scope_violations(touched, set(), SCOPE) == ["path_escapes_tree:../x", "touches_git:.git/HEAD"]


def test_apply_diff_roundtrip_and_failure():
    new = {"toy/kernel.py": "def f():\n    return 2\n"}
    diff = Candidate(files=new).diff(BASE)
    assert apply_diff(diff, BASE) == new
    with pytest.raises(CandidateError) as e:
        apply_diff(diff.replace("-    return 1", "-    return 9"), BASE)
    assert e.value.reason == "patch_does_not_apply"


def test_candidate_hash_is_content_only():
    a = Candidate(files={"toy/kernel.py": "x"}).content_hash()
    assert a == Candidate(files={"toy/kernel.py": "x"}).content_hash()
    assert a != Candidate(files={"toy/kernel.py": "y"}).content_hash()


def test_folder_candidate_reports_symlinks(tmp_path):
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "kernel.py").write_text("x = 1\n")
    (tmp_path / "toy" / "evil.py").symlink_to("/etc/passwd")
    files, links = folder_files(tmp_path)
    assert files == {"toy/kernel.py": "x = 1\n"} and links == {"toy/evil.py"}
