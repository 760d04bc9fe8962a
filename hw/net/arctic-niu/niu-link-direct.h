/*
 * Arctic NIU: direct rings to and from the other NIUs of this host (link
 * 1.5, docs/link-protocol.md §6.8, arctic/link-ring.h).  The link thread's
 * transport owns one set per connection; the switch hands the rings out
 * (DIRECT_RING) and takes them back (DIRECT_STOP) on the link's socket.
 *
 * Locking: the rings to other nodes are written under the device lock;
 * the rings from them are read under the link thread's rx_lock and the
 * device lock; the set changes only under both.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_NET_ARCTIC_NIU_LINK_DIRECT_H
#define HW_NET_ARCTIC_NIU_LINK_DIRECT_H

#include <linux/futex.h>
#include "niu-link.h"

typedef struct NiuDirectRings NiuDirectRings;

NiuDirectRings *niu_direct_new(NiuLink *link);
/* Every ring unmapped; what was unread is lost (the link ended). */
void niu_direct_free(NiuDirectRings *d);
/*
 * A DIRECT_RING (@fd, which the call closes) or DIRECT_STOP frame's
 * @body; false, with *@broken, if the switch broke the rules.
 */
bool niu_direct_control(NiuDirectRings *d, uint16_t type,
                        const uint8_t *body, int fd, const char **broken);
bool niu_direct_write(NiuDirectRings *d, unsigned dst, uint8_t prio,
                      const uint8_t *frame, size_t len);
/* Does a ring from another node hold a frame?  (Loads only.) */
bool niu_direct_input_waits(const NiuDirectRings *d);
/*
 * Hand what the rings from other nodes hold to the link; true if any.
 * @owner: the caller is the link thread, which may change the set.
 */
bool niu_direct_deliver(NiuDirectRings *d, bool owner);
/*
 * Before sleeping: the wake-up words of the rings from other nodes, with
 * the values seen now, into @w (at most @max); then niu_direct_sleep()
 * says so in each ring and looks a last time (false: input came), and
 * niu_direct_awake() takes the flags back.
 */
unsigned niu_direct_waiters(const NiuDirectRings *d, struct futex_waitv *w,
                            unsigned max);
bool niu_direct_sleep(NiuDirectRings *d);
void niu_direct_awake(NiuDirectRings *d);

#endif /* HW_NET_ARCTIC_NIU_LINK_DIRECT_H */
