#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/niu-timed-fidelity's model, worked by hand from
include/arctic/timing.h and docs/timed-mode.md, and its reading of the
guest programs' output."""
import importlib.machinery
import importlib.util
import os
import unittest

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                    "scripts", "niu-timed-fidelity")


def load():
    loader = importlib.machinery.SourceFileLoader("niu_timed_fidelity", PATH)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


F = load()


class Model(unittest.TestCase):
    def setUp(self):
        self.d = F.timing_defaults()
        self.base = F.Costs(self.d, 1)

    def test_defaults_from_the_contract(self):
        self.assertEqual(self.d["tx_ns"], 500)
        self.assertEqual(self.d["rx_ns"], 500)
        self.assertEqual(self.d["pci_ps_per_byte"], 12500)
        self.assertEqual(self.d["link_ps_per_byte"], 6250)
        self.assertEqual(self.d["hop_ns"], 150)
        self.assertEqual(self.d["wire_ns"], 50)

    def test_one_word_one_router(self):
        # docs/timed-mode.md: 650 + 50 + 150 + 50 + 250 + 650 ns.
        self.assertEqual(F.one_way(self.base, 1, 1), 1800)

    def test_sizes_and_routers(self):
        self.assertEqual(F.one_way(self.base, 0, 1), 1675)
        self.assertEqual(F.one_way(self.base, 20, 1), 4175)
        self.assertEqual(F.routers_between(0, 1), 1)
        self.assertEqual(F.routers_between(0, 8), 7)
        self.assertEqual(F.one_way(self.base, 0, 7), 1675 + 6 * 150)

    def test_costs_scale_exactly(self):
        slow = F.Costs(self.d, F.SLOW)
        self.assertEqual(F.one_way(slow, 4, 1),
                         F.SLOW * F.one_way(self.base, 4, 1))
        self.assertIn("time-pci-mbytes=%d," % (80 // F.SLOW),
                      slow.device_props())
        self.assertIn("--link-mbytes=%d" % (160 // F.SLOW),
                      slow.switch_options())

    def test_dma_slowest_stage(self):
        # 32 packets of 800 ns and a 600 ns notification per 2048 bytes.
        self.assertAlmostEqual(F.dma_mbytes(self.base, 1),
                               2048e3 / 26200, places=6)
        self.assertAlmostEqual(F.dma_mbytes(self.base, 2),
                               F.dma_mbytes(self.base, 1) / 2, places=6)

    def test_buffers_from_the_contract(self):
        # seed 000 §6.1.4: three per input section, one for high priority.
        self.assertEqual(self.d["buffers"], 3)
        self.assertIn("--time-buffers=3", self.base.switch_options())
        self.assertIn("--time-buffers=3",
                      F.Costs(self.d, F.SLOW).switch_options())

    def test_dma_engine_kept_busy(self):
        # 50 ns of cable and 108 bytes at 160 MB/s (675 ns) within 800 ns.
        self.assertTrue(F.dma_engine_kept_busy(self.base, True))
        self.assertTrue(F.dma_engine_kept_busy(self.base, False))
        self.assertTrue(F.dma_engine_kept_busy(F.Costs(self.d, F.SLOW),
                                               False))
        # Two buffers leave a low-priority stream one: the engine idles.
        two = dict(self.d, buffers=2)
        self.assertTrue(F.dma_engine_kept_busy(F.Costs(two, 1), True))
        self.assertFalse(F.dma_engine_kept_busy(F.Costs(two, 1), False))

    def test_high_priority_bound(self):
        # /switch/timed/priority: 0 words, one router, two links:
        # 1075 ns of switch and engine, 500 ns to transmit, 100 across PCI.
        self.assertEqual(F.high_priority_bound(self.base, 0, 1),
                         F.one_way(self.base, 0, 1) + 2 * 225 + 600)
        self.assertEqual(F.high_priority_bound(self.base, 0, 1), 2725)


class Parsing(unittest.TestCase):
    def test_ping_table(self):
        out = ("[node 1] niu-ping: node 1: peer node 0\n"
               "[node 0]  words    median_us       p99_us       min_us\n"
               "[node 0]      0        8.981       12.306        8.981\n"
               "[node 0]     20       14.588       22.967       14.500\n"
               "[node 1]      4        1.000        1.000        1.000\n")
        self.assertEqual(F.ping_medians(out, 0), {0: 8981.0, 20: 14588.0})

    def test_dma_rates(self):
        out = ("[node 1] niu-bw: DMA: 128 blocks of 2048 bytes: 78.066 MB/s\n"
               "[node 2] niu-bw: DMA: 128 blocks of 2048 bytes: 39.1 MB/s\n"
               "[node 0] niu-bw: node 0: 0 wrong: PASS\n")
        self.assertEqual(F.dma_rates(out), {1: 78.066, 2: 39.1})


if __name__ == "__main__":
    unittest.main()
