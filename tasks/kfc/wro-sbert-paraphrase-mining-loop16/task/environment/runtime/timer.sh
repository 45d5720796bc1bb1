#!/usr/bin/env bash
# Print the time elapsed in this session (start stamp: /app/.timer/start,
# epoch seconds). Prints "unknown" when no stamp exists.
START_FILE=/app/.timer/start
if [ ! -r "$START_FILE" ]; then
  echo "elapsed: unknown (no $START_FILE)"
  exit 0
fi
start="$(tr -d '[:space:]' < "$START_FILE")"
start="${start%%.*}"
case "$start" in
  ''|*[!0-9]*) echo "elapsed: unknown (unreadable $START_FILE)"; exit 0 ;;
esac
now="$(date +%s)"
el=$(( now - start ))
[ "$el" -lt 0 ] && el=0
printf 'elapsed: %dh %02dm %02ds (%d s)\n' $((el / 3600)) $((el % 3600 / 60)) $((el % 60)) "$el"
