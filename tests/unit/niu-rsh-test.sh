#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest/mpi/niu-rsh (the remote shell mpiexec launches MPICH's proxies
# with, docs/guest.md "MPI programs") on the host, against its own server
# on a loopback port: a command's output and exit status come back, a
# signal as 128 + its number, a bad request is refused and the server goes
# on, a client that goes away takes its command down, and --stop ends the
# server with the status given and closes its port before it answers.
# Usage: niu-rsh-test.sh NIU_RSH_BINARY
set -uo pipefail
rsh=${1:?usage: niu-rsh-test.sh NIU_RSH_BINARY}
failures=0
check() {
    local what=$1 want=$2 got=$3
    if [ "$got" = "$want" ]; then
        echo "ok: $what"
    else
        echo "FAIL: $what: expected '$want', got '$got'"
        failures=$((failures + 1))
    fi
}
tmp=$(mktemp -d)
server=
cleanup() {
    [ -z "$server" ] || kill "$server" 2>/dev/null
    pkill -f "sleep 7$$" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

port=$((20000 + $$ % 20000))
"$rsh" --serve --port "$port" 2>"$tmp/server.err" &
server=$!

out=$("$rsh" --port "$port" --wait 10 127.0.0.1 'echo out; echo err >&2; exit 3')
check "a command's exit status" 3 "$?"
check "its stdout and stderr" "out
err" "$out"

"$rsh" --port "$port" 127.0.0.1 sh -c "'kill -9 \$\$'"
check "a command killed by SIGKILL: 128 + 9" 137 "$?"

out=$("$rsh" --port "$port" 127.0.0.1 printf '%s-%s' a b)
check "the words after HOST joined as one command, as rsh does" "a-b" "$out"

# A request that is not one: an unknown operation, then a length beyond
# the limit.  The server says why and serves the next.
printf 'z\0\0\0\1x' >/dev/tcp/127.0.0.1/"$port"
printf 'x\177\377\377\377' >/dev/tcp/127.0.0.1/"$port"
sleep 0.3
out=$("$rsh" --port "$port" 127.0.0.1 echo still)
check "the server serves after two bad requests" "still" "$out"
check "and said why, twice" 2 "$(grep -c 'a bad request' "$tmp/server.err")"

# A client that goes away: its command's process group is killed.
"$rsh" --port "$port" 127.0.0.1 "sleep 7$$" &
client=$!
for _ in $(seq 50); do
    pgrep -fx "sleep 7$$" >/dev/null && break
    sleep 0.1
done
check "the remote command started" yes "$(pgrep -fx "sleep 7$$" >/dev/null && echo yes)"
kill "$client"
wait "$client" 2>/dev/null
for _ in $(seq 50); do
    pgrep -fx "sleep 7$$" >/dev/null || break
    sleep 0.1
done
check "the remote command is gone with its client" no "$(pgrep -fx "sleep 7$$" >/dev/null && echo yes || echo no)"

"$rsh" --port "$port" --stop 7 127.0.0.1
check "--stop is answered with its status" 0 "$?"
wait "$server"
check "the server exits with the status --stop gave" 7 "$?"
server=
"$rsh" --port "$port" --wait 0 127.0.0.1 true 2>/dev/null
check "nothing listens after a stop" 255 "$?"

"$rsh" --help >/dev/null
check "--help" 0 "$?"
"$rsh" --port 0 127.0.0.1 true 2>/dev/null
check "a bad --port" 2 "$?"
"$rsh" --stop 300 127.0.0.1 2>/dev/null
check "a bad --stop status" 2 "$?"
"$rsh" --wait 0 no-such-host.invalid true 2>/dev/null
check "a host that does not resolve" 255 "$?"

echo "$failures failed"
[ "$failures" = 0 ]
