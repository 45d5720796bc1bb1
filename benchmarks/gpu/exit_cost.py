"""How long a process that held a CUDA context takes to end, from its last line to its parent's
reap, by what it did before: where the trust probe's 0.59 s after its last line goes (its exit
handlers, the interpreter's teardown, or the driver's). Prints one line per case (median of N)."""

import statistics
import subprocess
import sys
import time

CASES = {
    "cpu only": "import time",
    "torch imported": "import torch",
    "context": "import torch; torch.cuda.init(); torch.zeros(1, device='cuda')",
    "context+matmul": "import torch; a=torch.randn(4096,4096,device='cuda'); (a@a).sum().item()",
    "context+1GiB": "import torch; a=torch.empty(1<<28, device='cuda'); a.fill_(1); torch.cuda.synchronize()",
    "context+1GiB freed": "import torch; a=torch.empty(1<<28, device='cuda'); a.fill_(1); torch.cuda.synchronize(); "
                          "del a; torch.cuda.empty_cache()",
}
ENDS = {
    "os._exit": "import os,sys,time; sys.stdout.write('%.6f\\n' % time.time()); sys.stdout.flush(); os._exit(0)",
    "atexit+os._exit": "import atexit,os,sys,time; sys.stdout.write('%.6f\\n' % time.time()); sys.stdout.flush(); "
                       "atexit._run_exitfuncs(); sys.stderr.write('atexit %.6f\\n' % time.time()); os._exit(0)",
    "interpreter": "import sys,time; sys.stdout.write('%.6f\\n' % time.time()); sys.stdout.flush()",
    "SIGKILL self": "import os,sys,time,signal; sys.stdout.write('%.6f\\n' % time.time()); sys.stdout.flush(); "
                    "os.kill(os.getpid(), signal.SIGKILL)",
}

EVERY_END = ("cpu only", "context+matmul")  # the other cases end by os._exit alone


def once(body: str, end: str) -> float:
    p = subprocess.Popen([sys.executable, "-c", body + "\n" + end], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline()
    p.wait()
    return time.time() - float(line)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for case, body in CASES.items():
        for end, tail in ENDS.items():
            if end != "os._exit" and case not in EVERY_END:
                continue
            t = [once(body, tail) for _ in range(n)]
            print(f"{case:22s} {end:16s} median {statistics.median(t):.3f} s  ({', '.join(f'{x:.3f}' for x in t)})", flush=True)


if __name__ == "__main__":
    main()
