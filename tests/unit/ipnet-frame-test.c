/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the framing of IP over the NIU (guest/driver/arctic_ipnet.h,
 * the driver's niuN): a packet of every length cut into fragments as the
 * driver's transmit does and put together again as its NAPI poll does
 * gives back the same bytes; and what another node or a broken sender can
 * put on the kernel's endpoint (a frame too long, a wrong payload length,
 * a fragment out of place, a packet cut short) is refused with the
 * verdict the driver counts, never accepted.
 */
#include <glib.h>
#include <string.h>

#include "arctic_ipnet.h"

/* A fragment as it travels: the frame word and its payload length. */
struct frag {
    uint32_t word;
    unsigned int words;
};

static unsigned int cut(unsigned int len, unsigned int seq, struct frag *out)
{
    unsigned int n = arctic_ipnet_frags(len), f;

    for (f = 0; f < n; f++) {
        out[f].word = arctic_ipnet_word(len, seq, f);
        out[f].words = arctic_ipnet_payload_words(
            arctic_ipnet_frag_bytes(len, f));
    }
    return n;
}

static void test_sizes(void)
{
    /* command[1] and 20 payload words: 84 bytes a message. */
    g_assert_cmpuint(ARCTIC_IPNET_CHUNK, ==, 84);
    g_assert_cmpuint(arctic_ipnet_frags(1), ==, 1);
    g_assert_cmpuint(arctic_ipnet_frags(84), ==, 1);
    g_assert_cmpuint(arctic_ipnet_frags(85), ==, 2);
    /* The default MTU: 18 messages, the last of 72 bytes. */
    g_assert_cmpuint(arctic_ipnet_frags(1500), ==, 18);
    g_assert_cmpuint(arctic_ipnet_frag_bytes(1500, 17), ==, 72);
    g_assert_cmpuint(arctic_ipnet_payload_words(72), ==, 17);
    g_assert_cmpuint(arctic_ipnet_payload_words(4), ==, 0);
    g_assert_cmpuint(arctic_ipnet_payload_words(5), ==, 1);
    g_assert_cmpuint(arctic_ipnet_payload_words(84), ==, 20);
    /* The largest packet fills a quarter of a queue and fits the word. */
    g_assert_cmpuint(arctic_ipnet_frags(ARCTIC_IPNET_MAX_MTU), ==,
                     ARCTIC_N / 4);
    g_assert_cmpuint(ARCTIC_IPNET_MAX_MTU, <=,
                     R_IPNET_WORD_LEN_MASK >> R_IPNET_WORD_LEN_SHIFT);
    g_assert_cmpuint(ARCTIC_IPNET_MAX_FRAGS - 1, <=,
                     R_IPNET_WORD_FRAG_MASK >> R_IPNET_WORD_FRAG_SHIFT);
}

/* Every length, cut and put together: the bytes come back in order. */
static void test_round_trip(void)
{
    static struct frag frags[ARCTIC_IPNET_MAX_FRAGS];
    static uint8_t in[ARCTIC_IPNET_MAX_MTU], out[ARCTIC_IPNET_MAX_MTU];
    struct arctic_ipnet_rx rx = { 0 };
    unsigned int len, n, f, offset = 0, bytes = 0, i;
    enum arctic_ipnet_verdict v;
    bool abandoned;

    for (i = 0; i < sizeof(in); i++) {
        in[i] = (uint8_t)(i * 131 + 17);
    }
    for (len = 1; len <= ARCTIC_IPNET_MAX_MTU; len++) {
        n = cut(len, len & 0xff, frags);
        memset(out, 0, len);
        for (f = 0; f < n; f++) {
            v = arctic_ipnet_rx_step(&rx, frags[f].word, frags[f].words,
                                     ARCTIC_IPNET_MAX_MTU, &abandoned,
                                     &offset, &bytes);
            g_assert_false(abandoned);
            g_assert_cmpint(v, ==, f + 1 == n ? ARCTIC_IPNET_DONE
                                              : ARCTIC_IPNET_MORE);
            g_assert_cmpuint(offset + bytes, <=, len);
            memcpy(out + offset, in + offset, bytes);
        }
        g_assert_false(rx.active);
        g_assert_cmpmem(out, len, in, len);
    }
}

static enum arctic_ipnet_verdict step(struct arctic_ipnet_rx *rx,
                                      struct frag fr, unsigned int max,
                                      bool *abandoned)
{
    unsigned int offset = 0, bytes = 0;

    return arctic_ipnet_rx_step(rx, fr.word, fr.words, max, abandoned,
                                &offset, &bytes);
}

static void test_bad_input(void)
{
    struct frag frags[ARCTIC_IPNET_MAX_FRAGS], fr;
    struct arctic_ipnet_rx rx = { 0 };
    bool abandoned;

    /* Longer than the largest packet, or empty: refused at fragment 0. */
    fr.word = arctic_ipnet_word(ARCTIC_IPNET_MAX_MTU + 1, 0, 0);
    fr.words = 20;
    g_assert_cmpint(step(&rx, fr, ARCTIC_IPNET_MAX_MTU, &abandoned), ==,
                    ARCTIC_IPNET_TOO_LONG);
    fr.word = arctic_ipnet_word(0, 0, 0);
    fr.words = 0;
    g_assert_cmpint(step(&rx, fr, ARCTIC_IPNET_MAX_MTU, &abandoned), ==,
                    ARCTIC_IPNET_TOO_LONG);
    /* A receiver's own limit counts too. */
    cut(1500, 1, frags);
    g_assert_cmpint(step(&rx, frags[0], 1000, &abandoned), ==,
                    ARCTIC_IPNET_TOO_LONG);
    g_assert_false(rx.active);

    /* A payload length that does not fit: refused, nothing under way. */
    fr = frags[0];
    fr.words = 19;
    g_assert_cmpint(step(&rx, fr, ARCTIC_IPNET_MAX_MTU, &abandoned), ==,
                    ARCTIC_IPNET_BAD_SIZE);
    g_assert_false(rx.active);
    /* A fragment past the end of its packet. */
    fr.word = arctic_ipnet_word(100, 0, 0);
    fr.words = 20;
    g_assert_cmpint(step(&rx, fr, ARCTIC_IPNET_MAX_MTU, &abandoned), ==,
                    ARCTIC_IPNET_MORE);
    fr.word = arctic_ipnet_word(100, 0, 1);
    fr.words = arctic_ipnet_payload_words(16);
    g_assert_cmpint(step(&rx, fr, ARCTIC_IPNET_MAX_MTU, &abandoned), ==,
                    ARCTIC_IPNET_DONE);
    fr.word = arctic_ipnet_word(100, 0, 2);
    fr.words = 0;
    g_assert_cmpint(step(&rx, fr, ARCTIC_IPNET_MAX_MTU, &abandoned), ==,
                    ARCTIC_IPNET_UNEXPECTED);

    /* A middle fragment with nothing under way (a sender's junk). */
    g_assert_cmpint(step(&rx, frags[3], ARCTIC_IPNET_MAX_MTU, &abandoned),
                    ==, ARCTIC_IPNET_UNEXPECTED);
    /* A skipped fragment, another sequence, another length. */
    g_assert_cmpint(step(&rx, frags[0], ARCTIC_IPNET_MAX_MTU, &abandoned),
                    ==, ARCTIC_IPNET_MORE);
    g_assert_cmpint(step(&rx, frags[2], ARCTIC_IPNET_MAX_MTU, &abandoned),
                    ==, ARCTIC_IPNET_UNEXPECTED);
    g_assert_false(rx.active);
    g_assert_cmpint(step(&rx, frags[0], ARCTIC_IPNET_MAX_MTU, &abandoned),
                    ==, ARCTIC_IPNET_MORE);
    fr = frags[1];
    fr.word = arctic_ipnet_word(1500, 2, 1);
    g_assert_cmpint(step(&rx, fr, ARCTIC_IPNET_MAX_MTU, &abandoned), ==,
                    ARCTIC_IPNET_UNEXPECTED);
    g_assert_cmpint(step(&rx, frags[0], ARCTIC_IPNET_MAX_MTU, &abandoned),
                    ==, ARCTIC_IPNET_MORE);
    fr.word = arctic_ipnet_word(1400, 1, 1);
    g_assert_cmpint(step(&rx, fr, ARCTIC_IPNET_MAX_MTU, &abandoned), ==,
                    ARCTIC_IPNET_UNEXPECTED);

    /*
     * A packet cut short (its sender restarted): the next fragment 0
     * gives the old one up, says so, and starts the new one.
     */
    g_assert_cmpint(step(&rx, frags[0], ARCTIC_IPNET_MAX_MTU, &abandoned),
                    ==, ARCTIC_IPNET_MORE);
    g_assert_false(abandoned);
    g_assert_cmpint(step(&rx, frags[1], ARCTIC_IPNET_MAX_MTU, &abandoned),
                    ==, ARCTIC_IPNET_MORE);
    cut(60, 9, frags);
    g_assert_cmpint(step(&rx, frags[0], ARCTIC_IPNET_MAX_MTU, &abandoned),
                    ==, ARCTIC_IPNET_DONE);
    g_assert_true(abandoned);
    g_assert_false(rx.active);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/ipnet/sizes", test_sizes);
    g_test_add_func("/ipnet/round-trip", test_round_trip);
    g_test_add_func("/ipnet/bad-input", test_bad_input);
    return g_test_run();
}
