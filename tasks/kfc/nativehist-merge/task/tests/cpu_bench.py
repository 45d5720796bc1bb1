"""The instruction-count benchmark of the native-histogram merge grader.

test.sh first builds the inputs, outside callgrind:

    python3 -P cpu_bench.py prepare WORKLOADS_JSON INPUTS_FILE

then runs the merge under callgrind once per module, each in a process of its own:

    python3 -P cpu_bench.py candidate|baseline INPUTS_FILE MODULE_DIR REPORT_FILE

`candidate` imports native_histogram_merge from MODULE_DIR (the source tree),
`baseline` the frozen copy; everything else is the same in both processes, so
the ratio of callgrind's totals (I refs) compares the two merges. The inputs
come in one marshal file (every call's histograms their own objects), loaded
before the module is imported, and nothing heavier than marshal and zlib is
imported. Python starts as the image's does (its site-packages and any .pth in
them included), the same in both processes. The report (a few
KEY=value lines) goes to REPORT_FILE, opened before any candidate code runs;
the merge outputs are summed up in a CRC.

What the candidate's code does beyond the merge (processes, files, clocks) is
the trust screen's to judge, not this count's.
"""

import gc
import marshal
import sys
import zlib

gc.disable()  # the same in both processes; collections would only add noise

MODE = sys.argv[1]
HERE = sys.argv[0].rpartition("/")[0] or "."

if MODE == "prepare":
    # Outside callgrind: the seeded inputs of every benchmark workload, in call order.
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("_nhm_bench_cases", HERE + "/cases.py")
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    with open(sys.argv[2]) as fh:
        workloads = json.load(fh)["bench"]
    prepared = []
    for w in workloads:
        for hists, max_buckets in cases.merges(w):
            prepared.append((cases.copy_all(hists), max_buckets))
    with open(sys.argv[3], "wb") as fh:
        marshal.dump(prepared, fh)
    print("prepared %d calls, %d buckets" % (len(prepared), sum(len(h["buckets"]) for c in prepared for h in c[0])))
    sys.exit(0)

INPUTS, MODULE_DIR, REPORT_FILE = sys.argv[2:5]
report = open(REPORT_FILE, "w")


def emit(key, value):
    report.write("%s=%s\n" % (key, value))
    report.flush()


# ---------------------------------------------------------------- the inputs, before any candidate code
with open(INPUTS, "rb") as fh:
    calls = marshal.loads(fh.read())  # from bytes: marshal.load reads a file in tiny pieces
nbuckets = 0
for hists, _ in calls:
    for h in hists:
        nbuckets += len(h["buckets"])

# ---------------------------------------------------------------- the module
sys.path.insert(0, MODULE_DIR)
try:
    import native_histogram_merge as mod
    merge = mod.merge_histograms
    where = mod.__file__
except BaseException as exc:  # noqa: BLE001 - the candidate's import may raise anything
    emit("ERROR", "import: %s: %s" % (type(exc).__name__, str(exc)[:200]))
    report.close()
    sys.exit(0)

# ---------------------------------------------------------------- the measured work
crc = 0
bad = None
for hists, max_buckets in calls:
    try:
        out = merge(hists, max_buckets)
    except BaseException as exc:  # noqa: BLE001
        bad = "call: %s: %s" % (type(exc).__name__, str(exc)[:200])
        break
    if type(out) is not dict or type(out.get("buckets")) is not list:
        bad = "output: expected a dict with a list of buckets, got %s" % type(out).__name__
        break
    crc = zlib.crc32(repr(out).encode(), crc)

emit("MODE", MODE)
emit("MODULE", where)
emit("CALLS", len(calls))
emit("BUCKETS", nbuckets)
if bad:
    emit("ERROR", bad)
emit("CHECKSUM", "%08x" % crc)
emit("DONE", 1)
report.close()
