#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/niu-rtt-budget --traces on device traces written here: round
trips with known hop times, matched and reported per hop, noise ignored."""
import os
import re
import subprocess
import tempfile
import unittest

BUDGET = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "..", "..", "scripts", "niu-rtt-budget")
VCPU, LINK = 100, 101           # thread ids of node 0; node 1 adds 10
# One round trip: (node, offset us, event, args); the hops take 1..9 us.
TRIP = [
    (0, 0, "user_write", "endpoint 0 user[0x000] <- 0x00000001"),
    (0, 1, "tx_packet", "endpoint 0 -> node 1 prio 1 seq 0"),
    (0, 3, "link_flush", "hands 52 bytes to the transport"),
    (0, 6, "link_write", "wrote 52 bytes, 52 taken"),
    (1, 10, "link_frame_in", "frame type 4 length 44"),
    (1, 15, "rx_deliver", "endpoint 0 rxq 0 slot 1 <- node 0"),
    (1, 21, "user_write", "endpoint 0 user[0x000] <- 0x00000001"),
    (1, 28, "link_flush", "hands 52 bytes to the transport"),
    (1, 36, "link_write", "wrote 52 bytes, 52 taken"),
    (0, 45, "link_frame_in", "frame type 4 length 44"),
    (0, 46, "rx_deliver", "endpoint 0 rxq 0 slot 1 <- node 1"),
]
PERIOD = 100                    # us between round trips
THREAD = {"user_write": VCPU, "tx_packet": VCPU, "link_flush": VCPU,
          "link_write": VCPU, "link_frame_in": LINK, "rx_deliver": LINK}


def trace_line(tid, t, ev, node, args):
    """One line of the device's trace at @t us of host time."""
    return "%d@%d.%06d:arctic_niu_%s node %d %s\n" % (
        tid, t // 10**6, t % 10**6, ev, node, args)


def write_traces(d, trips):
    files = [open(os.path.join(d, "node%d.trace" % n), "w") for n in (0, 1)]
    for k in range(trips):
        for node, off, ev, args in TRIP:
            t = 1700000000 * 10**6 + k * PERIOD + off
            tid = THREAD[ev] + 10 * node
            if ev == "user_write" and node == 1:
                tid = VCPU + 10
            files[node].write(trace_line(tid, t, ev, node, args))
            if ev == "link_write" and node == 1:
                # a credit frame in between must not be taken for data
                files[0].write(trace_line(LINK, t + 1, "link_frame_in", 0,
                                          "frame type 5 length 4"))
    for f in files:
        f.close()


def budget_out(d, *args):
    """What niu-rtt-budget --traces D ARGS... prints (it must succeed)."""
    return subprocess.run([BUDGET, "--traces", d] + list(args),
                          capture_output=True, text=True, check=True).stdout


def medians(out, names):
    """The median column of each named row (None if the row is missing)."""
    got = {}
    for name in names:
        m = re.search(re.escape(name) + r".*?\s([\d.]+)\s+([\d.]+)", out)
        got[name] = float(m.group(1)) if m else None
    return got


class Budget(unittest.TestCase):
    def test_hops(self):
        with tempfile.TemporaryDirectory() as d:
            write_traces(d, 50)
            out = budget_out(d, "-l", "thread")
        self.assertIn("49 round trips matched", out)
        want = {"A doorbell -> packet built": 1.0,
                "A packet -> handed to the transport": 2.0,
                "A write() (returns)": 3.0,
                "A write -> B link read": 4.0,
                "B link read -> delivered": 5.0,
                "B guest: delivered -> echo doorbell": 6.0,
                "B doorbell -> handed to the transport": 7.0,
                "B write() (returns)": 8.0,
                "B write -> A link read": 9.0,
                "A link read -> delivered": 1.0,
                "A guest: delivered -> next doorbell": 54.0,
                "A doorbell -> A delivered (sum of above)": 46.0,
                "doorbell to next doorbell (one ping)": 100.0}
        self.assertEqual(medians(out, want), want)
        self.assertRegex(out, r"B link read -> delivered.*link thread")

    def test_no_trips(self):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "node0.trace"), "w").close()
            open(os.path.join(d, "node1.trace"), "w").close()
            r = subprocess.run([BUDGET, "--traces", d], capture_output=True,
                               text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no round trip matched", r.stderr)


# One DMA window every 100 us: (node, offset us, event, args).
WINDOW = [
    (0, 0, "tx_lines_full", "endpoint 0 txq 2 waits for a retransmit line"),
    (0, 10, "link_write", "wrote 3584 bytes, 3584 taken"),
    (0, 11, "link_write", "wrote 24 bytes, 24 taken"),     # not a burst
    (1, 14, "link_frame_in", "frame type 4 length 64"),
    (1, 15, "link_frame_in", "frame type 4 length 64"),
    (1, 17, "link_frame_in", "frame type 4 length 64"),
    (1, 40, "link_write", "wrote 24 bytes, 24 taken"),
    (0, 47, "tx_ack", "ack from node 1 prio 0 up to seq 9 freed 56 lines"),
]


class DmaBudget(unittest.TestCase):
    def test_steps(self):
        with tempfile.TemporaryDirectory() as d:
            files = [open(os.path.join(d, "node%d.trace" % n), "w")
                     for n in (0, 1)]
            for k in range(40):
                for node, off, ev, args in WINDOW:
                    t = 1700000000 * 10**6 + k * 100 + off
                    files[node].write(trace_line(VCPU, t, ev, node, args))
            for f in files:
                f.close()
            out = budget_out(d, "--dma", "1")
        self.assertIn("39 bursts", out)
        want = {"sender burst -> receiver reads a frame": 4.0,
                "receiver input starts -> receiver writes": 26.0,
                "receiver writes -> sender takes an ack": 7.0,
                "sender takes an ack -> sender bursts": 63.0,
                "sender waits for a line -> waits again": 100.0}
        self.assertEqual(medians(out, want), want)

    def test_no_window(self):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "node0.trace"), "w").close()
            open(os.path.join(d, "node1.trace"), "w").close()
            r = subprocess.run([BUDGET, "--traces", d, "--dma", "1"],
                               capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no DMA window", r.stderr)

    def test_bad_blocks(self):
        r = subprocess.run([BUDGET, "--dma", "0"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("positive number of blocks", r.stderr)


if __name__ == "__main__":
    unittest.main()
