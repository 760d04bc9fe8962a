/* SPDX-License-Identifier: MIT */
/*
 * Descriptors over UNIX sockets, and the wake-up kicks of the shared-memory
 * rings (arctic/link-ring.h): the one place in the switch, its tests and
 * its benchmark that builds or reads an SCM_RIGHTS message or touches a
 * wake-up socket.  Every call is non-blocking per call (MSG_DONTWAIT), so
 * nothing a peer does to its own end of a socket, such as clearing
 * O_NONBLOCK on a description both share, can make the switch block.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "switch-internal.h"

ssize_t sw_send_fds(int fd, const void *buf, size_t len, const int *fds,
                    unsigned n_fds)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * SW_FDS_MAX)];
    } control;
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
    };
    ssize_t n;

    g_assert(n_fds <= SW_FDS_MAX);
    if (n_fds) {
        struct cmsghdr *cmsg;

        memset(&control, 0, sizeof(control));
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n_fds);
    }
    do {
        n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n;
}

/*
 * Every descriptor the kernel installed is either handed back or closed,
 * however many the message carried: the control buffer holds as many as
 * one message can (SCM_MAX_FD), and the kernel closes what does not fit.
 */
ssize_t sw_recv_fds(int fd, void *buf, size_t len, int *fds,
                    unsigned max_fds, unsigned *n_fds)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * SW_FDS_MAX)];
    } control;
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control.buf,
        .msg_controllen = sizeof(control.buf),
    };
    struct cmsghdr *cmsg;
    ssize_t n;

    *n_fds = 0;
    do {
        n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return n;
    }
    for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        const int *got = (const int *)CMSG_DATA(cmsg);
        unsigned i, count;

        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (i = 0; i < count; i++) {
            if (*n_fds < max_fds) {
                fds[(*n_fds)++] = got[i];
            } else {
                close(got[i]);
            }
        }
    }
    return n;
}

bool sw_wake_pair(int fds[2])
{
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      0, fds) == 0;
}

bool sw_is_wake_socket(int fd)
{
    int domain = 0, type = 0;
    socklen_t len = sizeof(domain);

    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0) {
        return false;
    }
    len = sizeof(type);
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
           domain == AF_UNIX && type == SOCK_STREAM;
}

/*
 * A kick: one byte, never blocking.  A full socket means a kick waits to
 * be read already; a peer that closed its end is gone with its link.
 */
void sw_kick(int fd)
{
    static const char byte = 1;

    if (send(fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        /* EAGAIN: one is pending; EPIPE: the link ends anyway. */
    }
}

/*
 * Take the kicks that came, up to ARCTIC_RING_DRAIN_MAX of them, in one
 * call; returns how many, or -1 when the peer closed its end (or the
 * socket failed): then it stays readable for ever, and must be unwatched.
 */
int sw_drain(int fd)
{
    char bytes[ARCTIC_RING_DRAIN_MAX];
    ssize_t n = recv(fd, bytes, sizeof(bytes), MSG_DONTWAIT);

    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
                  errno == EINTR)) {
        return 0;
    }
    return n > 0 ? (int)n : -1;
}
