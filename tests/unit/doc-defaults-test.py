#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The defaults docs/programming-guide.md states are the device's.

The device's own account of its properties (QEMU's `-device
arctic-niu,help`, "(default: V)") is compared with the guide's property
table (section 14), and the values the guide derives from them are
recomputed: NIU_CAPS's reset value in the register table (section 3.1,
from the default `lines` and include/arctic/niu-hw.h's constants), the
lines a remote-DMA transfer may hold (10.4), those low priority may hold
(10.5) and the default count named in 10.3.  A default changed in the
device without the docs fails here.  Needs QEMU built with the device
($ARCTIC_QEMU_BIN); skipped (77) without it.
"""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GUIDE = os.path.join(ROOT, "docs", "programming-guide.md")
NIU_HW = os.path.join(ROOT, "include", "arctic", "niu-hw.h")
NIU_E2E = os.path.join(ROOT, "hw", "net", "arctic-niu", "niu-e2e.h")
QEMU = os.environ.get("ARCTIC_QEMU_BIN", "")


def device_defaults():
    """Property -> default, as the device itself reports them."""
    out = subprocess.run([QEMU, "-M", "none", "-device", "arctic-niu,help"],
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s+([a-z0-9-]+)=<[^>]+>.*\(default: ([^)]*)\)\s*$",
                     line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def guide_text():
    with open(GUIDE, encoding="utf-8") as f:
        return f.read()


def section(text, number):
    """The text of the guide's section NUMBER (e.g. '10.3'), to the next
    heading."""
    m = re.search(r"^#{2,3} %s .*?(?=^#{2,3} )" % re.escape(number), text,
                  re.M | re.S)
    if not m:
        raise AssertionError("the guide has no section %s" % number)
    return m.group(0)


def guide_property_table(text):
    """Property -> documented default, from section 14's table."""
    rows = {}
    for line in section(text, "14.").splitlines():
        m = re.match(r"\| `([a-z0-9-]+)` \| [a-z0-9]+ \| ([^|]+) \|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def header_constant(name, path=NIU_HW):
    with open(path, encoding="utf-8") as f:
        m = re.search(r"\b%s\s*=\s*(\d+)\s*," % name, f.read())
    if not m:
        raise AssertionError("%s not found in %s" % (name, path))
    return int(m.group(1))


class DocDefaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.device = device_defaults()
        cls.text = guide_text()
        cls.lines = int(cls.device["lines"])

    def test_property_table(self):
        documented = guide_property_table(self.text)
        self.assertGreaterEqual(len(documented), 20)
        compared = 0
        for name, default in documented.items():
            if name not in self.device:
                continue        # no default of its own (chardev, secret...)
            with self.subTest(property=name):
                self.assertEqual(default, self.device[name],
                                 "section 14 gives %s's default as %s, the "
                                 "device has %s" % (name, default,
                                                    self.device[name]))
                compared += 1
        # Every property of the device's own with a default is documented.
        own = [n for n in self.device
               if n in ("lines", "rx-credits", "timed", "node-id")
               or n.startswith(("link-", "time-", "x-poll", "x-ack",
                                "x-doorbell", "x-link", "retry-", "peer-",
                                "refused-", "nack-"))]
        for name in own:
            with self.subTest(undocumented=name):
                self.assertIn(name, documented)
        self.assertGreaterEqual(compared, 20)

    def test_caps_reset_value(self):
        caps = (header_constant("ARCTIC_HI_RESERVED_LINES", NIU_E2E) << 24 |
                self.lines << 16 |
                header_constant("ARCTIC_LOG2_N") << 8 |
                header_constant("ARCTIC_ENDPOINTS"))
        m = re.search(r"^\| `0x008` \| `NIU_CAPS` \| RO \| `(0x[0-9a-f]+)` \|",
                      self.text, re.M)
        self.assertIsNotNone(m, "no NIU_CAPS row in the register table")
        self.assertEqual(int(m.group(1), 16), caps,
                         "the register table gives NIU_CAPS %s, a default "
                         "NIU reads 0x%08x" % (m.group(1), caps))
        self.assertIn("LINES 23:16 = %d" % self.lines, m.string[m.start():
                                                                m.end() + 200])

    def test_derived_line_counts(self):
        lines, seed = self.lines, header_constant("ARCTIC_SEED_LINES")
        self.assertIn("%d by default" % lines, section(self.text, "10.3"))
        dma = section(self.text, "10.4")
        self.assertIn("%d of the default %d" % (lines - max(8, lines // 8),
                                                lines), dma)
        self.assertIn("%d of the seed-sized %d" % (seed - max(8, seed // 8),
                                                   seed), dma)
        raw = section(self.text, "10.5")
        self.assertIn("%d of the default %d" % (lines - 4, lines), raw)
        self.assertIn("%d of the seed-sized %d" % (seed - 4, seed), raw)


if __name__ == "__main__":
    if not QEMU or not os.access(QEMU, os.X_OK):
        print("SKIP: no QEMU with the device ($ARCTIC_QEMU_BIN); "
              "run scripts/build-qemu")
        sys.exit(77)
    unittest.main()
