#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/lib.sh arctic_kick_yield_prop: a vCPU gives its core away after
# its poll woke the switch (x-link-kick-yield=on) only when a host's nodes
# can take all its cores; with fewer nodes than cores a register read
# never yields; never on a chardev link; a property given wins.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$(dirname "$0")/check.sh"

nproc() { echo 2; }                     # a 2-core host, whatever runs this
check "1 node on 2 cores: no yield" "$(arctic_kick_yield_prop 1 thread '')" ""
check "2 nodes on 2 cores: yields" \
    "$(arctic_kick_yield_prop 2 thread '')" ",x-link-kick-yield=on"
check "4 nodes on 2 cores: yields" \
    "$(arctic_kick_yield_prop 4 socket '')" ",x-link-kick-yield=on"
check "a chardev link is not polled: no yield" \
    "$(arctic_kick_yield_prop 4 chardev '')" ""
check "a property given wins" \
    "$(arctic_kick_yield_prop 4 thread ',lines=8,x-link-kick-yield=off')" ""
nproc() { echo 8; }
check "4 nodes on 8 cores: no yield" "$(arctic_kick_yield_prop 4 thread '')" ""
exit "$fail"
