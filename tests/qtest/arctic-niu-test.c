/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qtests for the Arctic NIU (-device arctic-niu).
 *
 * The test plays both the arctic-switch and the peer NIUs: it listens on a
 * UNIX socket, answers the device's HELLO, and exchanges link frames with
 * it, building and checking every packet byte for byte with the same
 * contract headers the device uses (include/arctic/).  The guest side is
 * played through qtest memory accesses: slots are written and read in
 * guest RAM exactly as seed 002 §3.2 describes.  Device timers run on the
 * virtual clock, which qtest only moves when told to, so every retry and
 * timeout happens exactly when a test steps the clock.
 *
 * This file only registers the tests.  arctic-niu-common.c holds what they
 * share (arctic-niu-test.h: QEMU started with the NIU, its BARs and guest
 * memory, the switch side of the link, the peer NIUs); one file per topic
 * holds the tests: arctic-niu-regs-test.c (registers, interrupts, state),
 * -queues- (Tx/Rx queues, endpoints, priorities), -ack- (the ack/retry
 * protocol), -raw-, -dma- (remote DMA, job tags), -link-, -bad- (bad
 * input), -cluster- (QEMUs joined by the real switch) and -time- (timed
 * mode, against a timed switch the test plays from a thread of its own).
 * The list of topics is in tests/qtest/meson.build.
 */

#include "qemu/osdep.h"
#include "libqtest.h"
#include "qemu/module.h"
#include "arctic-niu-test.h"

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    module_call_init(MODULE_INIT_QOM);  /* QIOChannelSocket */
#define X(name) niu_test_add_##name();
    ARCTIC_NIU_TEST_TOPICS
#undef X
    return g_test_run();
}
