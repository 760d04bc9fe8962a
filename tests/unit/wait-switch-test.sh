#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/lib.sh arctic_wait_switch: it returns only once the new switch
# listens, not when it finds the socket file a SIGKILLed switch left
# behind (cluster-switch-restart-4 once died of that: the wait saw the old
# file, the new switch then unlinked it to bind, and the wait's last look
# found nothing).  A stand-in switch unlinks the stale file after 0.5 s
# and listens 0.5 s later; when the wait returns, it must be listening.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

dir=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$dir"' EXIT
sock=$dir/switch.sock
fail=0
check() {
    if "$@"; then echo "ok: ${desc}"; else echo "FAIL: ${desc}"; fail=1; fi
}

# What a switch killed with SIGKILL leaves: a socket file nobody holds.
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$sock"
desc="the stale file is a socket"
check test -S "$sock"
desc="nobody listens on the stale file"
check_not() { ! "$@"; }
check check_not arctic_unix_listening "$sock"

python3 - "$sock" <<'PY' >"$dir/switch.log" 2>&1 &
import os, socket, sys, time
time.sleep(0.5)
os.unlink(sys.argv[1])
time.sleep(0.5)
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
time.sleep(30)
PY
pid=$!
started=$(date +%s%N)
arctic_wait_switch "$pid" "$sock" "$dir/switch.log"
waited_ms=$(( ($(date +%s%N) - started) / 1000000 ))
desc="the wait returned once the new switch listened (after ${waited_ms} ms)"
check arctic_unix_listening "$sock"
kill "$pid" 2>/dev/null || true

# With TCP the wait also reads the port from the switch's log, which
# "switch >log &" creates in the child, perhaps after the wait's first
# look (cluster-hosts-4-thread once died of that: sed found no file and
# niu-cluster exited 2).  Here the log appears 0.3 s late.
rm -f "$sock" "$dir/switch.log"
python3 - "$sock" "$dir/switch.log" <<'PY' >/dev/null 2>&1 &
import socket, sys, time
time.sleep(0.3)
with open(sys.argv[2], "w") as log:
    log.write("arctic-switch: listening for NIUs on TCP port 4242\n")
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
time.sleep(30)
PY
pid=$!
got=$( (arctic_wait_switch "$pid" "$sock" "$dir/switch.log" tcp &&
        echo "port $ARCTIC_SWITCH_TCP_PORT") 2>&1)
desc="a log that appears late is waited for, its port read ($got)"
check test "$got" = "port 4242"
exit $fail
