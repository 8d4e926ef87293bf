#!/bin/sh
# Infrastructure services of the sandbox image (seed 003 §6.4 phase 2 step 2): sshd for CLI
# sessions (keys only; the boot writes authorized_keys). Run by the boot as `user`; idempotent.
set -eu
if ! pgrep -x sshd >/dev/null 2>&1; then
  sudo -n /usr/sbin/sshd
fi
