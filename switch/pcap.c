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
 *
 * A control client names a capture, it does not choose where it goes: the
 * name must be a new plain file in the directory the switch was given at
 * start (--pcap-dir), created there relative to that directory's
 * descriptor and never through a link, so the control socket cannot make
 * the switch write, or empty, any other file its user may write.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

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

/* Write the file header to @f and make it the capture (@path: its name
 * in messages and "info"); @f is closed on failure. */
static bool pcap_begin(ArcticSwitch *sw, FILE *f, const char *path,
                       GError **errp)
{
    uint8_t header[24];

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
    if (sw->hooks.watching_changed) {
        sw->hooks.watching_changed(sw);
    }
    return true;
}

bool arctic_switch_pcap_open(ArcticSwitch *sw, const char *path,
                             GError **errp)
{
    FILE *f;

    arctic_switch_pcap_close(sw);
    f = fopen(path, "wb");
    if (!f) {
        g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(errno),
                    "cannot write pcap file %s: %s", path, g_strerror(errno));
        return false;
    }
    return pcap_begin(sw, f, path, errp);
}

bool sw_pcap_dir_open(ArcticSwitch *sw, const char *dir, GError **errp)
{
    /* O_PATH: the switch never lists or reads the directory, it only
     * creates files in it with openat(). */
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0) {
        g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(errno),
                    "--pcap-dir %s: %s", dir, g_strerror(errno));
        return false;
    }
    sw->pcap_dir_fd = fd;
    sw->pcap_dir = g_strdup(dir);
    sw->config.pcap_dir = sw->pcap_dir;
    return true;
}

void sw_pcap_dir_close(ArcticSwitch *sw)
{
    if (sw->pcap_dir) {
        close(sw->pcap_dir_fd);
        g_clear_pointer(&sw->pcap_dir, g_free);
        sw->config.pcap_dir = NULL;
    }
}

/* Whether @name is one plain entry of a directory: not empty, no '/',
 * not "." or "..", short enough to be a name at all. */
static bool pcap_name_check(const char *name, GError **errp)
{
    const char *why = NULL;

    if (!*name) {
        why = "is empty";
    } else if (strchr(name, '/')) {
        why = "contains '/'";
    } else if (!strcmp(name, ".") || !strcmp(name, "..")) {
        why = "names a directory";
    } else if (strlen(name) > NAME_MAX) {
        why = "is longer than " G_STRINGIFY(NAME_MAX) " bytes";
    }
    if (why) {
        /* The name as far as a name may go: a reply is not an echo of
         * whatever a client sent. */
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_FILENAME,
                    "capture name \"%.*s%s\" %s: give a plain file name, "
                    "to be created in the --pcap-dir directory", NAME_MAX,
                    name, strlen(name) > NAME_MAX ? "..." : "", why);
        return false;
    }
    return true;
}

/* Why @name could not be created in the capture directory (@err: the
 * errno of openat). */
static void pcap_name_refused(ArcticSwitch *sw, const char *name, int err,
                              GError **errp)
{
    const char *why = g_strerror(err);
    struct stat st;

    if (err == EEXIST &&
        fstatat(sw->pcap_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        why = S_ISLNK(st.st_mode) ? "is a symbolic link"
            : S_ISDIR(st.st_mode) ? "is a directory"
            : S_ISREG(st.st_mode) ? "exists (a capture never replaces a file)"
            : "exists and is not a regular file";
    }
    g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(err),
                "capture \"%s\" in %s: %s", name, sw->pcap_dir, why);
}

bool arctic_switch_pcap_open_in_dir(ArcticSwitch *sw, const char *name,
                                    GError **errp)
{
    g_autofree char *path = NULL;
    FILE *f;
    int fd;

    if (!sw->pcap_dir) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
                    "captures from the control socket need a directory: "
                    "start the switch with --pcap-dir DIR");
        return false;
    }
    if (!pcap_name_check(name, errp)) {
        return false;
    }
    /* O_EXCL: nothing that exists is opened (no file is truncated, no
     * FIFO or device written, no symbolic link followed even dangling;
     * O_NOFOLLOW says so twice), so what is opened is a new regular file.
     * Mode 0666 less the umask, as fopen() makes the --pcap file. */
    fd = openat(sw->pcap_dir_fd, name,
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        pcap_name_refused(sw, name, errno, errp);
        return false;
    }
    f = fdopen(fd, "wb");
    if (!f) {
        int err = errno;

        close(fd);
        pcap_name_refused(sw, name, err, errp);
        return false;
    }
    path = g_build_filename(sw->pcap_dir, name, NULL);
    arctic_switch_pcap_close(sw);
    return pcap_begin(sw, f, path, errp);
}

void arctic_switch_pcap_close(ArcticSwitch *sw)
{
    if (sw->pcap) {
        fclose(sw->pcap);
        sw->pcap = NULL;
    }
    g_clear_pointer(&sw->pcap_path, g_free);
    /* The packets need not all be seen any more: pairs may be made. */
    if (sw->hooks.watching_changed) {
        sw->hooks.watching_changed(sw);
    }
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
