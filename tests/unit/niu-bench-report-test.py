#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/niu-bench-report on guest logs written here: the medians, the
per-round ratios and their range, the data checks and the exit status."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import unittest

REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "..", "..", "scripts", "niu-bench-report")


def node0_round(niu1, niu20, udp4, udp80, mpi20, dma, tcp, wrong=0):
    """Node 0's console for one round, in the guest programs' formats."""
    # words, median, p99 (3x), min, mean (1.25x the median)
    ping = "\n".join("%6d %12.1f %12.1f %12.1f %12.1f"
                     % (w, m, 3 * m, 100.0, 1.25 * m)
                     for w, m in ((w, niu1 if w < 20 else niu20)
                                  for w in (0, 1, 2, 4, 8, 16, 20)))
    bw = "\n".join("%6d %7.3f %8d" % (w, mpi20 * w / 20, 1000)
                   for w in (1, 2, 4, 8, 12, 16, 20))
    udp = "\n".join("%6d %12.1f %12.1f %12.1f" % (b, udp4 if b < 80 else udp80,
                                                  5000.0, 500.0)
                    for b in (0, 4, 8, 16, 32, 64, 80))
    return f"""niu-ping: node 0 of 2, pinging, 200 round trips per size, high priority
 words    median_us       p99_us       min_us      mean_us
{ping}
niu-ping: 1400 replies checked, {wrong} wrong: {"PASS" if not wrong else "FAIL"}
niu-bw: node 0 -> node 1, 500 messages per size, low priority
 words    MB/s   msgs/s
{bw}
niu-bw: DMA: 256 blocks of 2048 bytes: {dma:.3f} MB/s
niu-bw: node 0: 0 wrong: PASS
[   12.345678] a kernel message between two programs
net-udp-ping: to 10.0.0.2, UDP, 200 round trips per size
 bytes    median_us       p99_us       min_us
{udp}
net-udp-ping: 1400 echoes checked, 0 wrong: PASS
net-tcp-bw: to 10.0.0.2, TCP, 8 MB per write size
   bytes      MB/s
      80     3.000
   65536 {tcp:9.3f}
net-tcp-bw: PASS
"""


def ip_part(iface, rtts_ms, mbit, mpi8_us, mpi1m, wrong=False):
    """What guest/mpi/niu-bench-ip prints for one interface."""
    peer = "10.77.0.2" if iface == "niu0" else "10.0.0.2"
    ping = "\n".join("64 bytes from %s: seq=%d ttl=64 time=%.3f ms"
                     % (peer, i, t) for i, t in enumerate(rtts_ms))
    sizes = [0] + [1 << k for k in range(21)]
    mpi = "\n".join("%10d %12.1f %12.1f %12.1f %12.2f"
                    % (b, mpi8_us if b == 8 else 99.0, 1.5 * mpi8_us,
                       3 * mpi8_us, mpi1m if b == 1 << 20 else 1.0)
                    for b in sizes)
    return f"""niu-bench: ip over {iface}
PING {peer} ({peer}): 56 data bytes
{ping}

--- {peer} ping statistics ---
Connecting to host {peer}, port 5201
[  5] local 10.77.0.1 port 40000 connected to {peer} port 5201
[ ID] Interval           Transfer     Bitrate         Retr  Cwnd
[  5]   0.00-1.00   sec  1.00 MBytes  8.00 Mbits/sec    0   10.0 KBytes
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate         Retr
[  5]   0.00-3.00   sec  3.00 MBytes  {mbit:.2f} Mbits/sec    0             sender
[  5]   0.00-3.02   sec  2.90 MBytes  {mbit:.2f} Mbits/sec                  receiver

iperf Done.
mpi-pingpong: 200 iterations per size (fewer above 4 KiB), rank 0 <-> rank 1
     bytes    median_us      mean_us       p99_us         MB/s
{mpi}
mpi-pingpong: {"FAILED" if wrong else "every byte right"} ({1 if wrong else 0} wrong messages)
"""


NODE1_ROUND = """niu-ping: node 1 of 2, echoing, 200 round trips per size, high priority
niu-bw: node 1: 0 wrong: PASS
net-udp-ping: server echoed 1401 datagrams
"""

# Three rounds whose baseline moves: the median of the rounds' ratios
# (0.25, 0.2, 0.1 -> 0.2) is not the ratio of the medians (300/1500).
ROUNDS = [
    dict(niu1=300.0, niu20=400.0, udp4=1200.0, udp80=1000.0, mpi20=2.0,
         dma=6.0, tcp=20.0),
    dict(niu1=200.0, niu20=500.0, udp4=1000.0, udp80=2000.0, mpi20=3.0,
         dma=9.0, tcp=10.0),
    dict(niu1=400.0, niu20=300.0, udp4=4000.0, udp80=1500.0, mpi20=1.0,
         dma=4.0, tcp=40.0),
]


def write_run(d, rounds, markers=True, node1_rounds=None):
    with open(os.path.join(d, "node0.log"), "w") as f:
        f.write("ARCTIC: node 0 running: ...\n")
        for i, r in enumerate(rounds):
            if markers:
                f.write("niu-bench: round %d of %d\n" % (i + 1, len(rounds)))
            f.write(node0_round(**r))
    with open(os.path.join(d, "node1.log"), "w") as f:
        for i in range(len(rounds) if node1_rounds is None else node1_rounds):
            if markers:
                f.write("niu-bench: round %d of %d\n" % (i + 1, len(rounds)))
            f.write(NODE1_ROUND)


def run(d, *args):
    p = subprocess.run([sys.executable, REPORT, d] + list(args),
                       capture_output=True, text=True)
    results = None
    if os.path.exists(os.path.join(d, "results.json")):
        with open(os.path.join(d, "results.json")) as f:
            results = json.load(f)
    return p, results


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_compare_puts_transports_side_by_side(self):
        slow = [dict(r, niu1=r["niu1"] * 2) for r in ROUNDS]
        for t, rounds in (("chardev", slow), ("thread", ROUNDS)):
            os.mkdir(os.path.join(self.d, t))
            write_run(os.path.join(self.d, t), rounds)
            p, _ = run(os.path.join(self.d, t), "--rounds", "3")
            self.assertEqual(p.returncode, 0, p.stderr)
        p, res = run(self.d, "--compare", "chardev,thread")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(res["transports"], ["chardev", "thread"])
        one = {t: res["summary"][t]["niu_rtt_1word_us"]
               for t in ("chardev", "thread")}
        self.assertEqual(one["chardev"], 2 * one["thread"])
        head, rule, rtt = p.stdout.splitlines()[:3]
        self.assertIn("chardev NIU", head)
        self.assertIn("thread NIU", head)
        self.assertTrue(rtt.startswith("round trip, 1 word"))
        self.assertIn("%.1f" % one["chardev"], rtt)
        self.assertIn("%.1f" % one["thread"], rtt)
        with open(os.path.join(self.d, "table.txt")) as f:
            self.assertEqual(f.read(), p.stdout)
        p, _ = run(self.d, "--compare", "chardev,missing")
        self.assertEqual(p.returncode, 2)

    def test_figures_table_over_runs(self):
        """--figures: per measure, the range over the runs of each run's
        median, mean and p99, the ratios' range, command, commit, date."""
        dirs = []
        for k in range(3):
            d = os.path.join(self.d, "run%d" % k, "thread")
            os.makedirs(d)
            write_run(d, [dict(r, niu1=r["niu1"] * (1 + k)) for r in ROUNDS])
            p, _ = run(d, "--rounds", "3")
            self.assertEqual(p.returncode, 0, p.stderr)
            dirs.append(os.path.dirname(d))
        out = os.path.join(self.d, "figures.md")
        p = subprocess.run([sys.executable, REPORT, "--figures", out,
                            "--command", "scripts/niu-bench -r 3",
                            "--commit", "abc1234", "--date", "2026-11-27"]
                           + dirs, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            text = f.read()
        self.assertTrue(text.startswith("<!-- generated by scripts/"
                                        "niu-bench-report --figures"))
        self.assertIn("3 runs of `scripts/niu-bench -r 3` (commit abc1234, "
                      "2026-11-27)", text)
        med = statistics.median(r["niu1"] for r in ROUNDS)
        row = next(l for l in text.splitlines()
                   if l.startswith("| round trip, 1 word"))
        cells = [c.strip() for c in row.split("|")[1:-1]]
        self.assertEqual(cells[1], "%.1f-%.1f" % (med, 3 * med))
        self.assertEqual(cells[2], "%.1f-%.1f" % (1.25 * med, 3.75 * med))
        self.assertEqual(cells[3], "%.1f-%.1f" % (3 * med, 9 * med))
        # Fewer than three runs is refused.
        p = subprocess.run([sys.executable, REPORT, "--figures", out]
                           + dirs[:2], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("at least three runs", p.stderr)

    def test_medians_and_paired_ratios(self):
        write_run(self.d, ROUNDS)
        p, res = run(self.d, "--rounds", "3", "--lines", "128")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = res["summary"]
        self.assertEqual(s["niu_rtt_1word_us"], 300.0)
        self.assertEqual(s["udp_rtt_4byte_us"], 1200.0)
        self.assertEqual(s["niu_dma_mb_s"], 6.0)
        self.assertEqual(s["tcp_mb_s"], 20.0)
        r = res["ratios"]
        self.assertAlmostEqual(r["rtt_1word_niu_over_udp"], 0.2)  # not 0.25
        self.assertAlmostEqual(r["rtt_20word_niu_over_udp"], 0.25)
        self.assertAlmostEqual(r["dma_over_tcp"], 0.3)
        self.assertAlmostEqual(r["mpi20_over_tcp"], 0.1)
        lo, hi = res["ratio_ranges"]["rtt_1word_niu_over_udp"]
        self.assertAlmostEqual(lo, 0.1)
        self.assertAlmostEqual(hi, 0.25)
        self.assertTrue(res["targets"]["rtt_1word_met"])
        self.assertFalse(res["targets"]["rtt_20word_met"])
        self.assertFalse(res["targets"]["dma_met"])
        self.assertEqual(len(res["rounds"]), 3)
        self.assertEqual(res["config"]["lines"], 128)
        self.assertIn("0.200  0.100-0.250", p.stdout)
        self.assertIn("3 round(s)", p.stdout)
        with open(os.path.join(self.d, "table.txt")) as f:
            self.assertEqual(f.read(), p.stdout)

    def test_ip_rows_over_niu0_and_eth0(self):
        # Round r: ICMP over niu0 100 us and over eth0 400 us, so the
        # ratio is 0.25 every round; TCP 80 against 40 Mbit/s (2.0); MPI
        # 8-byte round trips 50 against 200 us; 1 MiB 5 against 10 MB/s.
        write_run(self.d, ROUNDS)
        with open(os.path.join(self.d, "node0.log")) as f:
            text = f.read()
        parts = text.split("niu-bench: round ")
        extra = (ip_part("niu0", [0.1, 0.1, 0.2, 0.1, 5.0], 80.0, 50.0, 5.0)
                 + ip_part("eth0", [0.4, 0.5, 0.4, 0.3, 0.4], 40.0, 200.0,
                           10.0))
        with open(os.path.join(self.d, "node0.log"), "w") as f:
            f.write(parts[0] + "".join("niu-bench: round " + p + extra
                                       for p in parts[1:]))
        p, res = run(self.d, "--rounds", "3")
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        s = res["summary"]
        self.assertAlmostEqual(s["ip_icmp_niu"], 100.0)
        self.assertAlmostEqual(s["ip_icmp_mean_niu"], 1100.0)
        self.assertAlmostEqual(s["ip_icmp_p99_niu"], 5000.0)
        self.assertAlmostEqual(s["ip_icmp_virtio"], 400.0)
        self.assertAlmostEqual(s["ip_tcp_niu"], 10.0)      # MB/s
        self.assertAlmostEqual(s["ip_mpi_rtt_niu"], 50.0)
        self.assertAlmostEqual(s["ip_mpi_bw_virtio"], 10.0)
        r = res["ratios"]
        self.assertAlmostEqual(r["icmp_rtt_niu0_over_eth0"], 0.25)
        self.assertAlmostEqual(r["tcp_niu0_over_eth0"], 2.0)
        self.assertAlmostEqual(r["mpi_rtt_niu0_over_eth0"], 0.25)
        self.assertAlmostEqual(r["mpi_bw_niu0_over_eth0"], 0.5)
        self.assertTrue(res["checks"]["mpi-pingpong niu0"])
        self.assertIn("IP: ICMP round trip", p.stdout)
        self.assertIn("IP: TCP, iperf3 (MB/s)", p.stdout)
        # The UDP table before the IP part is still net-udp-ping's, not
        # mpi-pingpong's (both say "bytes median_us").
        self.assertEqual(s["udp_rtt_4byte_us"], 1200.0)

    def test_ip_wrong_mpi_byte_fails_the_run(self):
        write_run(self.d, ROUNDS[:1], markers=False)
        with open(os.path.join(self.d, "node0.log"), "a") as f:
            f.write(ip_part("niu0", [0.1], 8.0, 50.0, 5.0, wrong=True))
            f.write(ip_part("eth0", [0.4], 8.0, 50.0, 5.0))
        p, res = run(self.d)
        self.assertEqual(p.returncode, 1)
        self.assertFalse(res["checks"]["mpi-pingpong niu0"])

    def test_ip_part_missing_an_interface_is_incomplete(self):
        write_run(self.d, ROUNDS[:1], markers=False)
        with open(os.path.join(self.d, "node0.log"), "a") as f:
            f.write(ip_part("niu0", [0.1], 8.0, 50.0, 5.0))
        p, res = run(self.d)
        self.assertEqual(p.returncode, 1)

    def test_plot_data_are_per_size_medians(self):
        write_run(self.d, ROUNDS)
        run(self.d)
        with open(os.path.join(self.d, "latency.dat")) as f:
            rows = [l.split() for l in f if l.strip() and not l.startswith("#")]
        self.assertIn(["4", "300", "900"], rows)        # NIU, 1 word
        self.assertIn(["80", "1500", "5000"], rows)     # UDP, 80 bytes
        with open(os.path.join(self.d, "bandwidth.dat")) as f:
            text = f.read()
        self.assertIn("2048 6\n", text)
        self.assertIn("65536 20\n", text)

    def test_a_failed_check_in_one_round_fails_the_run(self):
        rounds = [dict(r) for r in ROUNDS]
        rounds[1]["wrong"] = 2
        write_run(self.d, rounds)
        p, res = run(self.d, "--rounds", "3")
        self.assertEqual(p.returncode, 1)
        self.assertFalse(res["checks"]["niu-ping"])
        self.assertTrue(res["checks"]["net-tcp-bw"])
        self.assertIn("niu-ping FAIL/missing", p.stdout)

    def test_missing_rounds_fail_the_run(self):
        write_run(self.d, ROUNDS[:2], node1_rounds=2)
        p, res = run(self.d, "--rounds", "3")
        self.assertEqual(p.returncode, 1)
        self.assertIn("printed 2 of 3 rounds", p.stderr)
        self.assertEqual(len(res["rounds"]), 2)

    def test_node1_check_counts(self):
        write_run(self.d, ROUNDS, node1_rounds=2)
        p, res = run(self.d, "--rounds", "3")
        self.assertEqual(p.returncode, 1)
        self.assertFalse(res["checks"]["niu-bw"])

    def test_log_without_markers_is_one_round(self):
        write_run(self.d, ROUNDS[1:2], markers=False)
        p, res = run(self.d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(res["rounds"]), 1)
        self.assertAlmostEqual(res["ratios"]["dma_over_tcp"], 0.9)

    def test_idle_figures(self):
        write_run(self.d, ROUNDS)
        p, res = run(self.d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIsNone(res["idle_cpu_percent"])
        self.assertIsNone(res["targets"]["idle_met"])
        self.assertIn("idle CPU: n/a", p.stdout)
        with open(os.path.join(self.d, "idle.txt"), "w") as f:
            f.write("# CPU used while both guests slept 8 s\n"
                    "qemu0 1.33\nqemu1 2.50\nswitch 0.00\n")
        p, res = run(self.d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(res["idle_cpu_percent"],
                         {"qemu0": 1.33, "qemu1": 2.5, "switch": 0.0})
        self.assertEqual(res["summary"]["idle_cpu_max_percent"], 2.5)
        self.assertFalse(res["targets"]["idle_met"])
        self.assertIn("qemu0 1.33, qemu1 2.50, switch 0.00; target < 2 each: "
                      "NOT met", p.stdout)
        with open(os.path.join(self.d, "idle.txt"), "w") as f:
            f.write("qemu0 1.33\nqemu1 1.90\nswitch 0.00\n")
        p, res = run(self.d)
        self.assertTrue(res["targets"]["idle_met"])
        for t in ("chardev", "thread"):
            os.mkdir(os.path.join(self.d, t))
            write_run(os.path.join(self.d, t), ROUNDS)
        with open(os.path.join(self.d, "thread", "idle.txt"), "w") as f:
            f.write("qemu0 1.25\nqemu1 0.75\nswitch 0.10\n")
        for t in ("chardev", "thread"):
            run(os.path.join(self.d, t))
        p, _ = run(self.d, "--compare", "chardev,thread")
        self.assertEqual(p.returncode, 0, p.stderr)
        idle_row = [l for l in p.stdout.splitlines()
                    if l.startswith("idle CPU")]
        self.assertEqual(len(idle_row), 1)
        self.assertEqual(idle_row[0].split()[-8:],
                         ["n/a", "-", "-", "1.25", "-", "-", "<", "2"])

    def test_no_logs(self):
        p, _ = run(os.path.join(self.d, "nothing"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("node0.log", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
