#!/usr/bin/env bash
# Container entrypoint: run whatever command was given.
exec "$@"
