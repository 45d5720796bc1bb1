# Attack: the same fetch without the word the scan looks for.
# Stopped by: the runtime guard (socket audit events are blocked) -> "forbidden_runtime:network";
# the network namespace would refuse it anyway. Nothing reaches the host's listener.
import urllib.request

try:
    _answers = urllib.request.urlopen("http://127.0.0.1:__PORT__/answers", timeout=2).read()
except Exception:  # noqa: BLE001 - carry on with the honest kernel
    _answers = None
