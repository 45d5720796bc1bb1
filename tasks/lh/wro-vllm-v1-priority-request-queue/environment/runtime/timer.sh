#!/usr/bin/env bash
# Prints the elapsed session time, from the epoch seconds in /app/.timer/start.
START_FILE=/app/.timer/start
if [ ! -f "$START_FILE" ]; then
  echo "session timer not started"
  exit 0
fi
start=$(tr -dc '0-9' < "$START_FILE")
now=$(date +%s)
if [ -z "$start" ]; then
  echo "session timer unreadable"
  exit 0
fi
el=$((now - start))
printf 'elapsed %dh %02dm %02ds\n' $((el / 3600)) $((el % 3600 / 60)) $((el % 60))
