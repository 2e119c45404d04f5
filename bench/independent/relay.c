/* A delay-only relay between two TUN devices, for held-out runs built
 * outside tcpwhy's lab (bench/independent/run.py).
 *
 * It opens two TUN devices (IFF_TUN | IFF_NO_PI: plain IP packets, no GSO)
 * in the namespace it starts in, prints "ready" once both exist (the driver
 * then moves them into their namespaces) and copies every packet read from
 * one to the other after a fixed one-way delay. Both directions are FIFO
 * queues: a constant delay keeps the order. Nothing else: the rate, the
 * queue, a policer and random loss come from the kernel (tbf, nftables)
 * in the middle namespace, not from this program, so these runs share no
 * code with tcpwhy's link emulator.
 *
 * Usage: relay TUN_A TUN_B ONE_WAY_DELAY_US
 * Build: cc -O2 -o relay relay.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 65536 /* packets a direction may hold in flight */
#define MAXPKT 65536

struct pkt {
    int64_t due_ns;
    uint32_t len;
    unsigned char *buf;
};

struct queue {
    struct pkt p[SLOTS];
    unsigned head, tail; /* head: next to send; tail: next free */
    uint64_t dropped;
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int tun_open(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        perror("/dev/net/tun");
        exit(1);
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        perror("TUNSETIFF");
        exit(1);
    }
    return fd;
}

/* Reads what is waiting on `from` into `q`, due `delay` from now. */
static void take(int from, struct queue *q, int64_t delay) {
    for (;;) {
        unsigned next = (q->tail + 1) % SLOTS;
        struct pkt *p = &q->p[q->tail];
        if (!p->buf)
            p->buf = malloc(MAXPKT);
        ssize_t n = read(from, p->buf, MAXPKT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            perror("read");
            exit(1);
        }
        if (next == q->head) { /* full: the relay is no bottleneck, so count it */
            q->dropped++;
            continue;
        }
        p->len = (uint32_t)n;
        p->due_ns = now_ns() + delay;
        q->tail = next;
    }
}

/* Writes every packet of `q` that is due; returns ns until the next one, or -1. */
static int64_t give(int to, struct queue *q) {
    int64_t t = now_ns();
    while (q->head != q->tail) {
        struct pkt *p = &q->p[q->head];
        if (p->due_ns > t)
            return p->due_ns - t;
        if (write(to, p->buf, p->len) < 0 && errno != EAGAIN && errno != EIO && errno != EINVAL) {
            perror("write");
            exit(1);
        }
        q->head = (q->head + 1) % SLOTS;
    }
    return -1;
}

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: relay TUN_A TUN_B ONE_WAY_DELAY_US\n");
        return 2;
    }
    int a = tun_open(argv[1]), b = tun_open(argv[2]);
    int64_t delay = atoll(argv[3]) * 1000;
    static struct queue ab, ba;
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    printf("ready\n");
    fflush(stdout);
    struct pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    while (!stop) {
        int64_t w1 = give(b, &ab), w2 = give(a, &ba), wait = -1;
        if (w1 >= 0)
            wait = w1;
        if (w2 >= 0 && (wait < 0 || w2 < wait))
            wait = w2;
        /* ppoll sleeps on an hrtimer: microseconds, not poll's milliseconds */
        if (wait < 0)
            wait = 100000000;
        struct timespec ts = {wait / 1000000000, wait % 1000000000};
        int r = ppoll(fds, 2, &ts, NULL);
        if (r < 0 && errno != EINTR) {
            perror("poll");
            return 1;
        }
        if (fds[0].revents & POLLIN)
            take(a, &ab, delay);
        if (fds[1].revents & POLLIN)
            take(b, &ba, delay);
    }
    fprintf(stderr, "relay: dropped %llu and %llu (queue full)\n", (unsigned long long)ab.dropped, (unsigned long long)ba.dropped);
    return 0;
}
