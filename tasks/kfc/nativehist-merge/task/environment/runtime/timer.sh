#!/usr/bin/env bash
# Prints how long this session has been running, if a start stamp exists.
set -u
STAMP=/app/.timer/start
if [ ! -f "$STAMP" ]; then
  echo "session timer not started"
  exit 0
fi
start="$(cat "$STAMP" 2>/dev/null || echo '')"
case "$start" in
  ''|*[!0-9]*) echo "session timer stamp unreadable"; exit 0 ;;
esac
now="$(date +%s)"
elapsed=$(( now - start ))
printf 'elapsed: %dh %02dm %02ds (%d s)\n' $(( elapsed / 3600 )) $(( (elapsed % 3600) / 60 )) $(( elapsed % 60 )) "$elapsed"
