/* SPDX-License-Identifier: MIT */
/*
 * IP over the Arctic NIU: how the driver's niuN interface cuts an IPv4 or
 * IPv6 packet into NIU messages and puts it together again (docs/guest.md,
 * "IP over the NIU").  Pure code, shared by the driver and a unit test
 * compiled on the host (tests/unit/ipnet-frame-test.c).
 *
 * A packet of LEN bytes travels as ARCTIC_IPNET_FRAGS(LEN) MPI messages to
 * the kernel's endpoint of the destination node, on the low-priority
 * stream, all with TYPE ARCTIC_IPNET_TYPE.  Each message carries:
 *   command[0]   the frame word: LEN, the packet's sequence number (per
 *                destination, modulo 256) and the fragment's index
 *   command[1], payload[0..19]
 *                up to ARCTIC_IPNET_CHUNK = 84 bytes of the packet, in
 *                order; LENGTH (payload words) is exactly what the
 *                fragment's bytes need beyond command[1]
 * The NIU delivers a (source, destination, priority) stream exactly once
 * and in order (programming guide §12), so the receiver only checks that
 * each message is the one it expects and drops, and counts, anything else.
 */
#ifndef ARCTIC_IPNET_H
#define ARCTIC_IPNET_H

#include "arctic/niu-hw.h"

FIELD(IPNET_WORD, FRAG, 0, 8)		/* fragment index, 0 first */
FIELD(IPNET_WORD, SEQ, 8, 8)		/* packet number, per destination */
FIELD(IPNET_WORD, LEN, 16, 16)		/* the whole packet's bytes */

enum {
	ARCTIC_IPNET_TYPE = 0x49,	/* 'I': MPI_HEADER.TYPE of every message */
	/* bytes per message: command[1] and the 20 payload words */
	ARCTIC_IPNET_CHUNK = 4 + 4 * ARCTIC_MAX_PAYLOAD,
	/*
	 * At most a quarter of a transmit queue per packet, so that four
	 * of the largest fit in LoTx at once.
	 */
	ARCTIC_IPNET_MAX_FRAGS = ARCTIC_N / 4,
	ARCTIC_IPNET_MAX_MTU = ARCTIC_IPNET_MAX_FRAGS * ARCTIC_IPNET_CHUNK,
	ARCTIC_IPNET_DEFAULT_MTU = 1500,
};

static inline unsigned int arctic_ipnet_frags(unsigned int len)
{
	return (len + ARCTIC_IPNET_CHUNK - 1) / ARCTIC_IPNET_CHUNK;
}

/* Bytes of a @len-byte packet that fragment @frag carries. */
static inline unsigned int arctic_ipnet_frag_bytes(unsigned int len,
						   unsigned int frag)
{
	unsigned int at = frag * ARCTIC_IPNET_CHUNK;

	if (at >= len)
		return 0;
	return len - at < ARCTIC_IPNET_CHUNK ? len - at : ARCTIC_IPNET_CHUNK;
}

/* MPI_HEADER.LENGTH of a fragment of @bytes: the words after command[1]. */
static inline unsigned int arctic_ipnet_payload_words(unsigned int bytes)
{
	return bytes > 4 ? (bytes - 4 + 3) / 4 : 0;
}

static inline uint32_t arctic_ipnet_word(unsigned int len, unsigned int seq,
					 unsigned int frag)
{
	return ARCTIC_FIELD_PREP(IPNET_WORD, LEN, len) |
	       ARCTIC_FIELD_PREP(IPNET_WORD, SEQ, seq) |
	       ARCTIC_FIELD_PREP(IPNET_WORD, FRAG, frag);
}

/* Reassembly of one source's packets. */
struct arctic_ipnet_rx {
	unsigned int len;	/* of the packet under way */
	unsigned int seq;
	unsigned int next;	/* fragment expected */
	bool active;		/* a packet is under way */
};

enum arctic_ipnet_verdict {
	ARCTIC_IPNET_MORE,	/* fragment taken, more to come */
	ARCTIC_IPNET_DONE,	/* last fragment taken: the packet is whole */
	/* dropped: */
	ARCTIC_IPNET_TOO_LONG,	/* LEN 0 or over the largest packet */
	ARCTIC_IPNET_BAD_SIZE,	/* LENGTH does not fit LEN and FRAG */
	ARCTIC_IPNET_UNEXPECTED,/* not the fragment expected */
};

/*
 * Check a message with frame word @word and @words payload words against
 * @rx, for packets of at most @max_len bytes.  Fragment 0 always starts a
 * packet; if one was under way it is given up and *@abandoned set (its
 * fragments were lost: a sender that restarted or gave up on us).  On
 * MORE and DONE the fragment's bytes go at *@offset, *@bytes of them.
 * Any other verdict leaves no packet under way.
 */
static inline enum arctic_ipnet_verdict
arctic_ipnet_rx_step(struct arctic_ipnet_rx *rx, uint32_t word,
		     unsigned int words, unsigned int max_len,
		     bool *abandoned, unsigned int *offset,
		     unsigned int *bytes)
{
	unsigned int len = ARCTIC_FIELD_GET(IPNET_WORD, LEN, word);
	unsigned int seq = ARCTIC_FIELD_GET(IPNET_WORD, SEQ, word);
	unsigned int frag = ARCTIC_FIELD_GET(IPNET_WORD, FRAG, word);

	*abandoned = false;
	if (frag == 0) {
		*abandoned = rx->active;
		rx->active = false;
		if (len == 0 || len > max_len)
			return ARCTIC_IPNET_TOO_LONG;
		rx->len = len;
		rx->seq = seq;
		rx->next = 0;
	} else if (!rx->active || len != rx->len || seq != rx->seq ||
		   frag != rx->next) {
		rx->active = false;
		return ARCTIC_IPNET_UNEXPECTED;
	}
	*bytes = arctic_ipnet_frag_bytes(len, frag);
	if (*bytes == 0 || words != arctic_ipnet_payload_words(*bytes)) {
		rx->active = false;
		return ARCTIC_IPNET_BAD_SIZE;
	}
	*offset = frag * ARCTIC_IPNET_CHUNK;
	if (*offset + *bytes == len) {
		rx->active = false;
		return ARCTIC_IPNET_DONE;
	}
	rx->active = true;
	rx->next = frag + 1;
	return ARCTIC_IPNET_MORE;
}

#endif /* ARCTIC_IPNET_H */
