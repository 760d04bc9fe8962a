#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/niu-sched-delay --timehist on `perf sched timehist` text written
here: the cluster's threads found by name (names with spaces too), their
runs per second, share of a core and delay percentiles, other tasks left
out, and bad input refused; and --events on `perf script` text of the
scheduler's events: each wake-up's waker, CPU, delay, and how much of the
delay its CPU was idle or busy with the cluster."""
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


def run(text, option="--timehist"):
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(text)
        f.flush()
        return subprocess.run([TOOL, option, f.name],
                              capture_output=True, text=True)


def event(t, cpu, comm, tid, what):
    return "%16s %6d [%03d] %.6f: %s\n" % (comm, tid, cpu, t, what)


def switch(prev, prev_pid, nxt, nxt_pid):
    return ("sched:sched_switch: prev_comm=%s prev_pid=%d prev_prio=120 "
            "prev_state=S ==> next_comm=%s next_pid=%d next_prio=120"
            % (prev, prev_pid, nxt, nxt_pid))


def waking(comm, pid, cpu):
    return ("sched:sched_waking: comm=%s pid=%d prio=120 target_cpu=%03d"
            % (comm, pid, cpu))


def events():
    """20 times in a second: the switch's wake-up thread on CPU 0 wakes a
    link thread that runs 30 us later on CPU 1, idle until then; that one
    wakes a vCPU on CPU 1, which runs 10 us later, once the link thread
    has gone to sleep; and a shell, not of the cluster, wakes another."""
    out = []
    for k in range(20):
        t = 1.0 + k * 0.05
        out.append(event(t, 1, "arctic-niu-0", 70,
                         switch("arctic-niu-0", 70, "swapper/1", 0)))
        out.append(event(t + 10e-6, 0, "arctic-wake", 50,
                         waking("arctic-niu-0", 70, 1)))
        out.append(event(t + 40e-6, 1, "swapper/1", 0,
                         switch("swapper/1", 0, "arctic-niu-0", 70)))
        out.append(event(t + 50e-6, 1, "arctic-niu-0", 70,
                         waking("CPU 0/TCG", 61, 1)))
        out.append(event(t + 60e-6, 1, "arctic-niu-0", 70,
                         switch("arctic-niu-0", 70, "CPU 0/TCG", 61)))
        out.append(event(t + 70e-6, 0, "bash", 80, waking("sleep", 81, 0)))
    out.append(event(2.0, 0, "bash", 80, switch("bash", 80, "sleep", 81)))
    return "".join(out)


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

    def test_wakeups(self):
        r = run(events(), "--events")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("wake-ups (1.00 s)", r.stdout)
        rows = [line.split() for line in r.stdout.splitlines()[2:]]
        # waker woken CPU per-s p50 p90 idle busy (roles of two words)
        self.assertEqual(rows, [
            ["switch", "wake-up", "link", "thread", "other", "20", "30",
             "30", "30.0", "0.0"],
            ["link", "thread", "vCPU", "same", "20", "10", "10", "0.0",
             "10.0"],
        ])

    def test_no_wakeups(self):
        r = run(event(1.0, 0, "bash", 80, waking("sleep", 81, 0)),
                "--events")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no wake-up of the cluster's threads", r.stderr)

    def test_bad_policy(self):
        r = subprocess.run([TOOL, "--switch-policy", "rr"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("want other, fifo or nice:N", r.stderr)


if __name__ == "__main__":
    unittest.main()
