#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/niu-bench-nodes reads the figures of a niu-cluster run right:
each pinging pair's 1-word row (median, p99, mean), each pair's DMA rate,
the collectives' round times, and whether every node said ok."""

import importlib.machinery
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
loader = importlib.machinery.SourceFileLoader(
    'niu_bench_nodes', os.path.join(ROOT, 'scripts', 'niu-bench-nodes'))
spec = importlib.util.spec_from_loader('niu_bench_nodes', loader)
bench = importlib.util.module_from_spec(spec)
loader.exec_module(bench)

RUN = """\
==> booting 4 nodes (thread link): niu-ping -x 1
[node 0] niu-ping: node 0 of 4, pinger, 1000 round trips per size
[node 0]  words    median_us       p99_us       min_us      mean_us
[node 0]      0       40.000      300.000       20.000       60.000
[node 0]      1       41.500      310.250       21.000       62.125
[node 0]      2       43.000      320.000       22.000       63.000
[node 2]      1       55.000      900.000       30.000       97.500
[node 1] niu-bw: DMA: 2000 blocks of 2048 bytes: 99.000 MB/s
[node 0] niu-bw: DMA: 2000 blocks of 2048 bytes: 38.250 MB/s
[node 2] niu-bw: DMA: 2000 blocks of 2048 bytes: 44.500 MB/s
[node 0] niu-coll-test: round ms: median 4.100 mean 4.900 p99 9.000 max 9.500 over 50 rounds
=== summary: x on 4 nodes, boot 20s, program 30s ===
node 0: ok
node 1: ok
node 2: ok
node 3: ok
"""

fail = 0


def check(cond, what):
    global fail
    print(('ok: ' if cond else 'FAIL: ') + what)
    fail |= not cond


r = bench.parse(RUN)
check(r['rtt'] == {0: (41.5, 310.25, 62.125), 2: (55.0, 900.0, 97.5)},
      'the 1-word rows of both pinging pairs: %r' % r['rtt'])
check(r['dma'] == {1: 99.0, 0: 38.25, 2: 44.5} and r['dma'][0] == 38.25,
      'each sender\'s DMA rate: %r' % r['dma'])
check(r['round'] == (4.1, 4.9, 9.0, 9.5), 'the round times: %r'
      % (r['round'],))
check(r['ok'], 'every node ok')
check(not bench.parse(RUN.replace('node 3: ok',
                                  'node 3: FAILED (status 1)'))['ok'],
      'a failed node makes the run not ok')
check(not bench.parse('nothing')['ok'], 'no summary: not ok')
check(bench.span([3.0, 1.0, 2.0]) == '1.0-3.0' and bench.span([2.0]) == '2.0'
      and bench.span([]) == '-', 'ranges')
check(bench.verdict([90.0, 99.0], 100.0, True) == 'met in every run',
      'at most: met')
check(bench.verdict([90.0, 120.0], 100.0, True) ==
      'met in some runs, not all', 'at most: some')
check(bench.verdict([30.0], 40.0, False) == 'not met', 'at least: not met')
sys.exit(fail)
