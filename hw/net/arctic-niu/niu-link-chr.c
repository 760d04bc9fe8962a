/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU link transport over a chardev (niu-link.h): a UNIX or TCP
 * socket chardev served by QEMU's main loop, which takes the device lock
 * (under the BQL) in each of its handlers.  Use reconnect-ms= on the
 * chardev so a restarted switch is found again.  It reaches switches on
 * other hosts, and is the fallback where the link thread cannot be used.
 */

#include "qemu/osdep.h"
#include "qemu/lockable.h"
#include "qapi/error.h"

#include "niu-link.h"

static gboolean chr_out_ready(void *do_not_use, GIOCondition cond,
                              void *opaque)
{
    NiuLink *link = opaque;
    QEMU_LOCK_GUARD(link->lock);

    link->out_watch = 0;
    niu_link_writable(link);
    return G_SOURCE_REMOVE;
}

static size_t chr_write(NiuLink *link, const uint8_t *buf, size_t len)
{
    int n = qemu_chr_fe_write(link->chr, buf, len);

    if (n <= 0) {
        n = 0;
    }
    if (n < len && !link->out_watch) {
        link->out_watch = qemu_chr_fe_add_watch(link->chr, G_IO_OUT | G_IO_HUP,
                                                chr_out_ready, link);
    }
    return n;
}

static void chr_accept_input(NiuLink *link)
{
    qemu_chr_fe_accept_input(link->chr);
}

static void chr_remove_watch(NiuLink *link)
{
    if (link->out_watch) {
        g_source_remove(link->out_watch);
        link->out_watch = 0;
    }
}

static void chr_disconnect(NiuLink *link)
{
    chr_remove_watch(link);
    qemu_chr_fe_disconnect(link->chr);
}

static void chr_defer_cb(void *opaque)
{
    NiuLink *link = opaque;
    QEMU_LOCK_GUARD(link->lock);

    niu_link_deferred_due(link);
}

/* Host time: coalescing must not wait for a qtest to step the clock. */
static void chr_defer(NiuLink *link, int64_t delay_ns)
{
    timer_mod_anticipate(link->defer_timer,
                         qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + delay_ns);
}

static void chr_cleanup(NiuLink *link)
{
    chr_remove_watch(link);
    timer_free(link->defer_timer);
    qemu_chr_fe_deinit(link->chr, false);
}

static const NiuTransportOps chr_transport = {
    .name = "chardev",
    .write = chr_write,
    .accept_input = chr_accept_input,
    .disconnect = chr_disconnect,
    .defer = chr_defer,
    .cleanup = chr_cleanup,
};

static int chr_can_read(void *opaque)
{
    NiuLink *link = opaque;
    QEMU_LOCK_GUARD(link->lock);

    return niu_link_input_room(link);
}

static void chr_read(void *opaque, const uint8_t *buf, int size)
{
    NiuLink *link = opaque;
    QEMU_LOCK_GUARD(link->lock);

    niu_link_input(link, buf, size);
}

static void chr_event(void *opaque, QEMUChrEvent event)
{
    NiuLink *link = opaque;
    QEMU_LOCK_GUARD(link->lock);

    switch (event) {
    case CHR_EVENT_OPENED:
        niu_link_opened(link);
        break;
    case CHR_EVENT_CLOSED:
        chr_remove_watch(link);
        niu_link_closed(link);
        break;
    default:
        break;
    }
}

bool niu_link_init_chr(NiuLink *link, CharBackend *chr, Error **errp)
{
    if (link->timed) {
        /* The main loop reads a chardev at instants no clock decides. */
        error_setg(errp, "arctic-niu: timed=on needs link-socket=, not "
                   "chardev=");
        return false;
    }
    link->chr = chr;
    link->transport = &chr_transport;
    link->defer_timer = timer_new_ns(QEMU_CLOCK_REALTIME, chr_defer_cb, link);
    qemu_chr_fe_set_handlers(chr, chr_can_read, chr_read, chr_event,
                             NULL, link, NULL, true);
    return true;
}
