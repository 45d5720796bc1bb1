#!/usr/bin/env bash
# Podman serving the Docker API, and the base image the bundled tasks start FROM, without
# any registry. Idempotent: a second run checks and returns in about a second.
#
#   sudo tools/podman_setup.sh            # then: export DOCKER_HOST=unix:///run/podman/podman.sock
#
# 1. installs podman, runc and debootstrap from Debian (apt-get) when missing;
# 2. writes /etc/containers/containers.conf: runc and cgroupfs (crun and the systemd cgroup
#    manager fail on hosts with hybrid cgroups), no default ulimits;
# 3. serves the Docker-compatible API on $PESFLOW_PODMAN_SOCKET (podman system service);
# 4. builds python:3.11-slim-bookworm locally: debootstrap of Debian bookworm with python3,
#    venv, pip, git, ca-certificates and procps, python3 also at /usr/local/bin as in the
#    official image, this host's CA bundle and pip.conf (package downloads may pass a TLS
#    proxy), imported with `podman import` and tagged docker.io/library/python:3.11-slim-bookworm
#    so that `FROM python:3.11-slim-bookworm` resolves to it and nothing is ever pulled.
#
# It prints the DOCKER_HOST to use as its last line.
set -euo pipefail

SOCKET="${PESFLOW_PODMAN_SOCKET:-/run/podman/podman.sock}"
MIRROR="${PESFLOW_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE_TAGS=(docker.io/library/python:3.11-slim-bookworm docker.io/library/python:3.11-slim)
PACKAGES=python3,python3-venv,python3-pip,git,ca-certificates,procps
# Bump when the recipe of the base image changes: an image with another label is rebuilt.
BASE_VERSION="pesflow-base-2:${PACKAGES}"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

log() { echo "podman_setup: $*" >&2; }
[ "$(id -u)" = 0 ] || { echo "podman_setup: run as root (rootful podman serves the socket)" >&2; exit 2; }

# 1. packages ---------------------------------------------------------------------------
need=()
for pair in podman:podman runc:runc debootstrap:debootstrap; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# 2. engine settings ----------------------------------------------------------------------
conf=/etc/containers/containers.conf
want='# written by pesflow tools/podman_setup.sh
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
'
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$(printf '%s' "$want")" ]; then
  mkdir -p /etc/containers
  printf '%s' "$want" > "$conf"
  log "wrote $conf"
fi

# 3. the Docker-compatible socket -----------------------------------------------------------
ping() {  # GET /_ping on the socket (python3 rather than curl: a fresh machine may lack curl)
  python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(sys.argv[1])
s.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n"); sys.exit(0 if b" 200 " in s.recv(64) else 1)' "$SOCKET" 2>/dev/null
}
if ! ping; then
  mkdir -p "$(dirname "$SOCKET")"
  rm -f "$SOCKET"
  # detached from this shell: the service outlives the script (CI steps, test runs). Started in
  # a folder of its own: conmon drops files (an `oom` marker) into the working folder it inherits.
  # The redirections cover the whole subshell, not just podman: a subshell left holding this
  # script's stdout keeps a caller's `$(podman_setup.sh | tail -n 1)` waiting for ever.
  mkdir -p /run/pesflow-podman
  (cd /run/pesflow-podman && exec setsid podman system service --time=0 "unix://$SOCKET") \
    >/var/log/pesflow-podman-service.log 2>&1 </dev/null &
  for _ in $(seq 1 100); do ping && break; sleep 0.1; done
  ping || { echo "podman_setup: podman system service did not answer on $SOCKET; see /var/log/pesflow-podman-service.log" >&2; exit 1; }
  log "serving the Docker API on $SOCKET"
fi

# 4. the base image -------------------------------------------------------------------------
have="$(podman image inspect --format '{{index .Labels "pesflow.base"}}' "${BASE_TAGS[0]}" 2>/dev/null || true)"
if [ "$have" != "$BASE_VERSION" ]; then
  start=$(date +%s)
  work="$(mktemp -d /var/tmp/pesflow-rootfs.XXXXXX)"
  trap 'rm -rf "$work"' EXIT
  root="$work/rootfs"
  log "debootstrap bookworm with $PACKAGES (about a minute)"
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; echo "podman_setup: debootstrap failed (is $MIRROR reachable?)" >&2; exit 1; }
  # as in the official python image: python3 under /usr/local/bin, pip allowed outside venvs
  mkdir -p "$root/usr/local/bin"
  ln -sf /usr/bin/python3 "$root/usr/local/bin/python3"
  ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
  rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
  # this host's trust (a TLS-intercepting proxy's CA included) for apt, pip and git in builds
  if [ -f "$CA_BUNDLE" ]; then
    cp "$CA_BUNDLE" "$root/etc/ssl/certs/ca-certificates.crt"
    mkdir -p "$root/usr/local/share/ca-certificates"
  fi
  if [ -f /etc/pip.conf ]; then
    cp /etc/pip.conf "$root/etc/pip.conf"
  fi
  if ! grep -qs '^cert *=' "$root/etc/pip.conf"; then
    grep -qs '^\[global\]' "$root/etc/pip.conf" || printf '[global]\n' >> "$root/etc/pip.conf"
    sed -i "/^\[global\]/a cert = /etc/ssl/certs/ca-certificates.crt" "$root/etc/pip.conf"
  fi
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/tmp/* "$root"/var/log/*.log
  tar -C "$root" -c . | podman import --quiet \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change "LABEL pesflow.base=$BASE_VERSION" \
      --change 'CMD ["python3"]' - "${BASE_TAGS[0]}" >/dev/null
  for tag in "${BASE_TAGS[@]:1}"; do podman tag "${BASE_TAGS[0]}" "$tag"; done
  log "built ${BASE_TAGS[*]} in $(( $(date +%s) - start )) s"
fi
echo "DOCKER_HOST=unix://$SOCKET"
