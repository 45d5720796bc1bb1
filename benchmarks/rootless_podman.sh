#!/usr/bin/env bash
# The docker backend through an ordinary user's own rootless podman: no root daemon, no root
# in the grading path. Run as root on a machine where tools/podman_setup.sh has run (it built the
# base image, which is copied into the user's store: no registry is reachable here) and where
# benchmarks/rootless_search.py has made the user and its install (~/pesflow, ~/pesflow/.venv).
#   sudo bash benchmarks/rootless_podman.sh [USER]        # prints the verdict's line
# What it takes, as a lab machine would have it: uidmap (newuidmap, newgidmap) and the user's
# subordinate id range (useradd writes /etc/subuid), slirp4netns and a usable /dev/net/tun for
# image builds that download (gradings themselves run with the network off).
set -euo pipefail
U="${1:-pesflow-researcher}"
UID_=$(id -u "$U")
command -v newuidmap >/dev/null && command -v slirp4netns >/dev/null || \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends uidmap slirp4netns >/dev/null
grep -q "^$U:" /etc/subuid || { echo "no subordinate ids for $U in /etc/subuid" >&2; exit 2; }
[ -w /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" = 666 ] || chmod 666 /dev/net/tun  # Debian's default mode
mkdir -p "/run/user/$UID_" && chown "$U:$U" "/run/user/$UID_" && chmod 700 "/run/user/$UID_"
podman save -o /tmp/pesflow-base.tar docker.io/library/python:3.11-slim-bookworm >/dev/null && chmod 644 /tmp/pesflow-base.tar
as_user() {
  setpriv --reuid "$UID_" --regid "$UID_" --init-groups --reset-env -- env -i HOME="/home/$U" USER="$U" LOGNAME="$U" \
    LANG=C.UTF-8 XDG_RUNTIME_DIR="/run/user/$UID_" PATH="/home/$U/pesflow/.venv/bin:/usr/bin:/bin" bash -c "cd ~ && $1"
}
as_user "mkdir -p ~/.config/containers && printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n' > ~/.config/containers/containers.conf"
as_user "podman load -q -i /tmp/pesflow-base.tar >/dev/null"
as_user "podman info --format 'podman {{.Version.Version}} as {{.Host.IDMappings.UIDMap}}, storage {{.Store.GraphDriverName}}, cgroups {{.Host.CgroupsVersion}}, rootless {{.Host.Security.Rootless}}' 2>/dev/null"
sock="/run/user/$UID_/podman.sock"
as_user "[ -S $sock ] || (setsid podman system service --time=0 unix://$sock > ~/podman-service.log 2>&1 < /dev/null &); sleep 2"
as_user "cd ~/pesflow && pip install -q -e '.[docker]' && DOCKER_HOST=unix://$sock pesflow evaluate kfc/wre-router-power-of-two-choices-loop16 \
  --backend docker --mode oracle --grader hidden --json > ~/docker-eval.json 2>/dev/null; python3 -c \"import json; v = json.load(open('/home/$U/docker-eval.json')); \
print('as $U through its rootless podman:', v['status'], 'speedup', round(v['speedup'] or 0, 3), 'reward', round(v['reward'], 4), 'environment', v['environment'], \
'suspect', v['trust']['suspect'], 'probes', v['trust']['checks'].get('probes', {}).get('sandbox'), v.get('message', '')[:200])\""
