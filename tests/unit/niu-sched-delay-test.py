#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/niu-sched-delay --timehist on `perf sched timehist` text written
here: the cluster's threads found by name (names with spaces too), their
runs per second, share of a core and delay percentiles, other tasks left
out, and bad input refused."""
import os
import subprocess
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "..", "..", "scripts", "niu-sched-delay")
HEADER = """\
           time    cpu  task name                       wait time  sch delay   run time
                        [tid/pid]                          (msec)     (msec)     (msec)
--------------- ------  ------------------------------  ---------  ---------  ---------
"""


def row(t, cpu, task, wait_ms, delay_ms, run_ms):
    return "%15.6f [%04d]  %-30s  %9.3f  %9.3f  %9.3f \n" % (
        t, cpu, task, wait_ms, delay_ms, run_ms)


def timehist():
    """2 s of rows: the switch runs 100 times (delays 1..100 us, 10 us
    each), a vCPU 4 times (1 ms each), a shell twice."""
    out = [HEADER]
    for k in range(100):
        out.append(row(100 + k * 0.02, k % 2, "arctic-switch[50/49]",
                       0.02, (k + 1) / 1000, 0.040))
    for k in range(4):
        out.append(row(100.001 + k * 0.5, 0, "CPU 0/TCG[61/60]",
                       0.0, 0.0, 1.0))
    out.append(row(100.5, 1, "bash[70]", 0.1, 0.2, 0.3))
    out.append(row(102.0, 1, "bash[70]", 0.1, 0.2, 0.3))
    out.append("   100.2 [0000]  CPU 0/TCG[61/60]   awakened: "
               "arctic-switch[50/49]\n")
    return "".join(out)


def run(text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(text)
        f.flush()
        return subprocess.run([TOOL, "--timehist", f.name],
                              capture_output=True, text=True)


class Test(unittest.TestCase):
    def test_figures(self):
        r = run(timehist())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("(2.00 s recorded)", r.stdout)
        rows = {line.split()[0]: line.split()
                for line in r.stdout.splitlines()[2:]}
        self.assertEqual(len(rows), 2, r.stdout)
        # thread role runs/s core% p50 p90 p95 p99 max
        self.assertEqual(rows["arctic-switch[50/49]"][1:],
                         ["switch", "50", "0.2", "51", "91", "96", "100",
                          "100"])
        vcpu = [line.split() for line in r.stdout.splitlines()
                if line.startswith("CPU 0/TCG[61/60]")]
        self.assertEqual(vcpu[0][2:], ["vCPU", "2", "0.2", "0", "0", "0",
                                       "0", "0"])
        self.assertNotIn("bash", r.stdout)

    def test_nothing_of_the_cluster(self):
        r = run(HEADER + row(1.0, 0, "bash[70]", 0, 0, 1) +
                row(2.0, 0, "bash[70]", 0, 0, 1))
        self.assertEqual(r.returncode, 1)
        self.assertIn("no thread of the cluster", r.stderr)

    def test_bad_policy(self):
        r = subprocess.run([TOOL, "--switch-policy", "rr"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("want other, fifo or nice:N", r.stderr)


if __name__ == "__main__":
    unittest.main()
