# Attack: start a daemon that waits for the harness to finish, then rewrites its result file;
# started through os.posix_spawn looked up by name, which the scan cannot see.
# Stopped by: the runtime guard (process creation is blocked and recorded) ->
# "forbidden_runtime:process_spawn"; a process started some other way is killed by the
# harness before its last verdict ("background_process"), and by the sandbox after it.
import os
import sys

_out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "/tmp/x"
_code = ("import json,os,time\n"
         f"p={_out!r}\n"
         "while True:\n"
         "    time.sleep(0.002)\n"
         "    try:\n"
         "        d=json.load(open(p))\n"
         "        if d.get('stage')=='done' and not d.get('forged'):\n"
         "            d.update(forged=True, hard_fail_reasons=[], timing={'ran':True,'speedup':1000.0,'cv':0,'pairs':1,'ratios':[1000.0],'workloads':[]})\n"
         "            json.dump(d,open(p,'w'))\n"
         "    except Exception:\n"
         "        pass\n")
try:
    getattr(os, "posix_" + "spawn")(sys.executable, [sys.executable, "-c", _code, "__TAG__"], dict(os.environ))
except OSError:
    pass
