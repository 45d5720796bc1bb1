"""Code of a module the interpreter is about to run that the grading planted: loaded only where
pesflow_guard's import step met a module file outside the image's interpreter folders that was
written since the grading began (or a module's bytecode cache written since then).

Every interpreter of a grading runs this, the grader's own short ones too (a `python3 -c
"import json; ..."` that parses the timing pass's line, in the repository folder), before the
module's first line; the guard proper is not on there (no candidate code ran), so a finding is
sent from here, without json, re or anything the module being run could stand in for.

- A top-level module from a file the grading wrote (not the candidate's) that stands in for one
  the interpreter has (standard library, built in) or another folder of its path holds (an
  installed package): the harness then runs the grading's code in place of the image's.
- A top-level module from such a file that the path search found by name for code that is not
  the candidate's (an optional import, where the image has no module of that name).
- A submodule from such a file in a package of the image (its __init__ older than the grading, or
  a namespace package's folder), found there by the package's own search: in place of a module
  the package holds (a folder with an __init__ or an extension beside its .py wins the search),
  or asked for by code that is not the candidate's (an optional submodule import; an __init__
  that turns a namespace folder of the repository into a package of the grading's code).
- A module of the image (its file older than the grading) whose bytecode cache the grading wrote
  with code that is not its source's: the next interpreter runs that code, the file unchanged.

Standard library only, nothing the module being run could be (json, re); Python 3.8+.
"""

import _socket
import importlib.machinery
import importlib.util
import marshal
import os
import sys


def _quote(text):
    """A JSON string without the json module (which may be the module being run)."""
    out = []
    for c in text:
        out.append(c if " " <= c and c not in '"\\' and ord(c) < 0x7F else "\\u%04x" % ord(c) if ord(c) < 0x10000
                   else "\\ufffd")
    return '"' + "".join(out) + '"'


_sent = [0]


def say(cfg, rule, evidence, text=None):
    """The finding on the event socket (what is sent cannot be taken back) and in this
    process's file; negative sequence numbers, apart from the guard proper's own. `text`: the
    planted file's, where short (the host lets the grader's own files through: written.graders_own)."""
    _sent[0] -= 1
    import pesflow_rules  # noqa: PLC0415 - slow to import in every interpreter: only once a planted file is found
    line = ('{"kind": "finding", "rule": %s, "family": %s, "evidence": %s, "pid": %d, '
            '"seq": %d, "via_shell": true%s}') % (
        _quote(rule), _quote(pesflow_rules.family(rule)), _quote(evidence), os.getpid(), _sent[0],
        ', "text": %s' % _quote(text) if text else "")
    if cfg.get("socket"):
        try:
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
            try:
                s.connect(cfg["socket"])
                s.send(line.encode("utf-8", "replace"))
            finally:
                s.close()
        except OSError:
            pass
    try:
        out = cfg.get("out_dir") or "/.pesflow-trust-out"
        with open(os.path.join(out, "events-%d-planted.jsonl" % os.getpid()), "a") as f:
            f.write(line + "\n")
    except OSError:
        pass


def _provided_elsewhere(name, folder):
    """Whether the interpreter has `name` (standard library, built in) or a folder of its path
    other than `folder` holds it."""
    if name in getattr(sys, "stdlib_module_names", ()) or name in sys.builtin_module_names:
        return True
    own = os.path.realpath(folder)
    for entry in list(sys.path):
        if not isinstance(entry, str):
            continue
        p = os.path.realpath(entry or ".")
        if p == own or not os.path.isdir(p):
            continue
        if os.path.isfile(os.path.join(p, name + ".py")) or os.path.isfile(os.path.join(p, name, "__init__.py")):
            return True
        try:
            if any(f.startswith(name + ".") and f.endswith((".so", ".pyc")) for f in os.listdir(p)):
                return True
        except OSError:
            pass
    return False


def _named(name, filename):
    """Whether `filename` is named as module `name` (its last part): a loader given a file
    under another name did not search for it."""
    base = os.path.basename(filename)
    if base.startswith("__init__."):
        base = os.path.basename(os.path.dirname(filename))
    return base.split(".", 1)[0] == name


def _found_by_name(name, filename, folder):
    """Whether the path search would find `filename` for `name`: its name is the module's and
    `folder` is one the search looks in."""
    if not _named(name, filename):
        return False
    own = os.path.realpath(folder)
    return any(isinstance(e, str) and os.path.realpath(e or ".") == own for e in list(sys.path))


_MACHINERY = ("<frozen importlib", os.sep + "importlib" + os.sep, "pesflow_guard")
_PESFLOW = "/.pesflow-trust/"  # pesflow's own code in a grading (read-only): the probe, loading the candidate's modules


def _importer(role):
    """The file of the code that asked for the module being run, or None where candidate code is
    on the stack (its own process: the guard proper watches what it does there), or pesflow's
    probe, which replays the candidate's calls (its inputs name the candidate's modules)."""
    first = None
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if role(fn) == "candidate" or fn.startswith(_PESFLOW):
            return None
        if first is None and not any(m in fn for m in _MACHINERY):
            first = fn
        f = f.f_back
    return first or "?"


def _copy_of_known(cfg, filename):
    """Whether the file is a copy of the candidate's or the frozen baseline's (a grader that
    copies the scope file under another name to import it)."""
    try:
        # only for a planted module that stands in for nothing:
        import hashlib  # noqa: PLC0415 - slow to import in every interpreter
        with open(filename, "rb") as f:
            h = hashlib.sha256(f.read()).hexdigest()
    except (OSError, ImportError):
        return False
    return h in (cfg.get("candidate_hashes") or {}) or h in (cfg.get("baseline_hashes") or {})


def shadow(cfg, name, filename, role=None):
    """`filename` (written since the grading began, not the candidate's) run as module `name`:
    a finding when it stands in for a module the image provides, or when the path search found it
    by name for code that is not the candidate's (an optional import the image has nothing for:
    the standard library's copy asks for `org`, torch for `opt_einsum`), which then runs the
    grading's code where the harness did not ask for the candidate's. A submodule: _submodule."""
    if not name:
        return
    folder = os.path.dirname(filename)
    if os.path.basename(filename).startswith("__init__."):
        folder = os.path.dirname(folder)
    if "." in name:
        _submodule(cfg, name, filename, folder, role)
    elif _provided_elsewhere(name, folder):
        say(cfg, "guard.planted_module_ran",
            "module %s ran from %s, a file the grading wrote, in place of the one the image provides"
                % (name, filename), _short_text(filename))
    elif role is not None and _found_by_name(name, filename, folder) and not _copy_of_known(cfg, filename):
        by = _importer(role)
        if by is not None:
            say(cfg, "guard.planted_module_ran",
                "module %s ran from %s, a file the grading wrote, found on the path for %s (no candidate code asked "
                "for it; the image has no such module)"
                % (name, filename, by), _short_text(filename))


def _image_package(package, started):
    """Whether `package` is the image's, not one the grading wrote (a JIT's generated package,
    whose own code decides what it imports): its __init__ older than the grading, or a namespace
    package (folders alone, which a grading cannot be told apart by: a JIT's packages have an __init__)."""
    init = getattr(package, "__file__", None)
    if not isinstance(init, str):
        return True
    try:
        return os.stat(init).st_ctime <= started
    except OSError:
        return True


def _other_provider(name, filename, folders):
    """A file other than `filename` that one of the package's `folders` holds for submodule
    `name` (its source, bytecode, package or extension): what the planted one stands in for."""
    own = os.path.realpath(filename)
    own_pkg = os.path.dirname(own) if os.path.basename(own).startswith("__init__.") else None
    forms = [name + ".py", name + ".pyc", os.path.join(name, "__init__.py"), os.path.join(name, "__init__.pyc")] + \
        [name + s for s in importlib.machinery.EXTENSION_SUFFIXES]
    for folder in folders:
        for form in forms:
            path = os.path.join(folder, form)
            real = os.path.realpath(path)
            if real == own or (own_pkg is not None and os.path.dirname(real) == own_pkg):
                continue
            if os.path.isfile(path):
                return path
    return None


def _submodule(cfg, name, filename, folder, role):
    """`filename` (written since the grading began, not the candidate's) run as submodule `name`
    of a package of the image, from a folder the package's search looks in: a finding when it
    stands in for a module the package holds, or when code that is not the candidate's asked for
    it (the harness, or the image's own package code)."""
    parent_name, _, tail = name.rpartition(".")
    try:
        folders = [os.path.realpath(p) for p in list(getattr(sys.modules.get(parent_name), "__path__", None) or ())
                   if isinstance(p, str)]
    except TypeError:
        return
    if os.path.realpath(folder) not in folders or not _named(tail, filename) or \
            not _image_package(sys.modules.get(parent_name), float(cfg.get("started") or 0)):
        return  # loaded from elsewhere or under another name (not the package's search), or a package the grading wrote
    other = _other_provider(tail, filename, folders)
    if other is not None:
        say(cfg, "guard.planted_module_ran",
            "module %s ran from %s, a file the grading wrote, in place of %s, which the image provides"
                % (name, filename, other), _short_text(filename))
    elif role is not None and not _copy_of_known(cfg, filename):
        by = _importer(role)
        if by is not None:
            say(cfg, "guard.planted_module_ran",
                "module %s ran from %s, a file the grading wrote into the image's package %s, found there for %s "
                "(no candidate code asked for it)"
                % (name, filename, parent_name, by), _short_text(filename))


def _short_text(path, limit=16384):
    """A Python source's text, where it is short and text at all (`limit`: the host's
    written.MAX_TEXT, which this file cannot import)."""
    if not path.endswith(".py"):
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
        return data.decode("utf-8") if len(data) <= limit else None
    except (OSError, UnicodeDecodeError):
        return None


def cache(cfg, name, source, cached):
    """`source` is the image's (older than the grading); `cached` its bytecode cache, written
    since: a finding when the cache is one the interpreter will run (its header matches the
    source, or asks for no check) and its code is not what the source compiles to."""
    try:
        with open(cached, "rb") as f:
            data = f.read()
        st = os.stat(source)
    except OSError:
        return
    if len(data) < 16:
        return
    if data[:4] != importlib.util.MAGIC_NUMBER:
        return  # another interpreter's: this one compiles the source again
    flags = int.from_bytes(data[4:8], "little")
    # a timestamp cache runs only where its header names the source's time and size; a hash-based
    # one (which the import system writes only in place of another) is taken as one that runs
    if not flags & 1 and (int.from_bytes(data[8:12], "little") != (int(st.st_mtime) & 0xFFFFFFFF)
                          or int.from_bytes(data[12:16], "little") != (st.st_size & 0xFFFFFFFF)):
        return
    try:
        with open(source, "rb") as f:
            compiled = compile(f.read(), source, "exec", dont_inherit=True, optimize=-1)
        planted = marshal.loads(data[16:])
    except Exception:  # noqa: BLE001 - bytecode that does not load is not code that runs
        say(cfg, "guard.planted_bytecode", "the bytecode cache %s of %s, written during the grading, does not load as "
                                    "its source's" % (cached, source))
        return
    if compiled != planted:  # co_code, constants (nested code too), names, line tables; not the file name
        say(cfg, "guard.planted_bytecode", "the bytecode cache %s of %s (module %s), written during the grading, holds "
                                    "code that is not its source's" % (cached, source, name))
