/* SPDX-License-Identifier: MIT */
/*
 * pcap capture of the Arctic packets the switch sees, for Wireshark/tshark
 * with switch/wireshark/arctic.lua.  Link type LINKTYPE_USER0 (147); each
 * record is an 8-byte capture header (what happened to the packet, the
 * ports it came from and goes to, a drop reason) and then the wire packet
 * exactly as on the link: e2e header, Arctic words, CRC.  docs/network.md
 * documents the format.  Writes go through stdio buffering and are flushed
 * when the capture closes (and at each control-socket "pcap-flush").  A
 * timed switch (docs/timed-mode.md) writes the cluster's virtual time
 * instead of the host's: the file's timestamps are in nanoseconds, and
 * each capture header (version 2) carries the virtual time too: the stamp
 * a packet left its NIU with, or the time its receiver takes it.
 */
#include <errno.h>
#include <string.h>
#include <sys/time.h>

#include <gio/gio.h>

#include "switch-internal.h"

enum {
    PCAP_MAGIC_USEC = 0xa1b2c3d4,
    PCAP_MAGIC_NSEC = 0xa1b23c4d,
    PCAP_VERSION_MAJOR = 2,
    PCAP_VERSION_MINOR = 4,
    PCAP_SNAPLEN = 65535,
    LINKTYPE_USER0 = 147,
    ARCTIC_PCAP_HEADER_VERSION = 1,
    ARCTIC_PCAP_HEADER_SIZE = 8,
    ARCTIC_PCAP_TIMED_VERSION = 2,      /* + le64 virtual time */
    ARCTIC_PCAP_TIMED_SIZE = 16,
};

bool arctic_switch_pcap_open(ArcticSwitch *sw, const char *path,
                             GError **errp)
{
    uint8_t header[24];
    FILE *f;

    arctic_switch_pcap_close(sw);
    f = fopen(path, "wb");
    if (!f) {
        g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(errno),
                    "cannot write pcap file %s: %s", path, g_strerror(errno));
        return false;
    }
    arctic_put_le32(header, sw->config.timed ? PCAP_MAGIC_NSEC
                                             : PCAP_MAGIC_USEC);
    arctic_put_le16(header + 4, PCAP_VERSION_MAJOR);
    arctic_put_le16(header + 6, PCAP_VERSION_MINOR);
    arctic_put_le32(header + 8, 0);             /* thiszone */
    arctic_put_le32(header + 12, 0);            /* sigfigs */
    arctic_put_le32(header + 16, PCAP_SNAPLEN);
    arctic_put_le32(header + 20, LINKTYPE_USER0);
    if (fwrite(header, sizeof(header), 1, f) != 1) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_FAILED,
                    "cannot write pcap file %s", path);
        fclose(f);
        return false;
    }
    sw->pcap = f;
    sw->pcap_path = g_strdup(path);
    /* A capture shows every packet: none may skip the switch now. */
    sw_direct_revise(sw);
    return true;
}

void arctic_switch_pcap_close(ArcticSwitch *sw)
{
    if (sw->pcap) {
        fclose(sw->pcap);
        sw->pcap = NULL;
    }
    g_clear_pointer(&sw->pcap_path, g_free);
    /* The packets need not all be seen any more: pairs may be made. */
    sw_direct_revise(sw);
}

void sw_pcap_record(ArcticSwitch *sw, enum sw_pcap_event event,
                    int drop_reason, unsigned flags, unsigned in_port,
                    unsigned out_port, const uint8_t *bytes, size_t size)
{
    uint8_t record[16 + ARCTIC_PCAP_TIMED_SIZE];
    bool timed = sw->config.timed;
    size_t header = timed ? ARCTIC_PCAP_TIMED_SIZE : ARCTIC_PCAP_HEADER_SIZE;
    uint32_t length = header + size;
    struct timeval tv;

    if (!sw->pcap) {
        return;
    }
    if (timed) {
        arctic_put_le32(record, sw->pcap_time / 1000000000ull);
        arctic_put_le32(record + 4, sw->pcap_time % 1000000000ull);
        arctic_put_le64(record + 24, sw->pcap_time);
    } else {
        gettimeofday(&tv, NULL);
        arctic_put_le32(record, tv.tv_sec);
        arctic_put_le32(record + 4, tv.tv_usec);
    }
    arctic_put_le32(record + 8, length);
    arctic_put_le32(record + 12, length);
    record[16] = timed ? ARCTIC_PCAP_TIMED_VERSION
                       : ARCTIC_PCAP_HEADER_VERSION;
    record[17] = event;
    /* 0 = not dropped, else enum arctic_drop_reason + 1 */
    record[18] = drop_reason < 0 ? 0 : drop_reason + 1;
    record[19] = flags;
    arctic_put_le16(record + 20, in_port);
    arctic_put_le16(record + 22, out_port);
    if (fwrite(record, 16 + header, 1, sw->pcap) != 1 ||
        fwrite(bytes, size, 1, sw->pcap) != 1) {
        g_warning("pcap capture to %s failed; capture stopped",
                  sw->pcap_path);
        arctic_switch_pcap_close(sw);
    }
}
