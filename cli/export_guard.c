/* export_guard: who holds the exporter's connections, how many each may hold, and how long a
 * request may take, so that nobody can keep the metrics from the others.
 *
 * libmicrohttpd closes a connection idle for its time-out, but each byte starts that time-out
 * again, and its limit counts connections of all clients together: another user holding the 256
 * slots with a byte a second each kept every other scrape out. Here a client is, for a peer on
 * loopback, the local user that owns the connecting socket (the kernel's socket table,
 * /proc/net/tcp and tcp6, says which: every local client has the address 127.0.0.1), and for any
 * other peer its address (a user cannot be known across machines). A client within its share
 * (per_client connections) is always let in; one past it only while reserve slots stay free for
 * the others, so one client can have many scrapes at once but never the last slots: its
 * connections past that are shut down as soon as they open. And every
 * request must be whole, and answered, within deadline_s of its connection's opening or of the
 * previous answer on it, however its bytes trickle: export_guard_sweep shuts the late ones down.
 *
 * A connection is shut down (shutdown(2)), never closed here: libmicrohttpd sees the end, closes
 * the descriptor and tells export_guard_notify, which forgets it under the same lock the sweep
 * holds, so a descriptor is never shut down after it was closed and reused. */
#include "export_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

typedef struct guard_client {
    char key[64]; /* "uid N" or "address A"; "" unused */
    unsigned open;
} guard_client;

typedef struct guard_conn {
    int fd;         /* -1: a free slot */
    int client;     /* index into clients; -1: refused, counted nowhere */
    uint64_t since; /* the opening or the last answer, CLOCK_MONOTONIC ns */
} guard_conn;

struct export_guard {
    pthread_mutex_t lock;
    unsigned max, per_client, reserve;
    unsigned open; /* connections admitted and not yet closed */
    uint64_t deadline_ns;
    guard_conn *conn;
    guard_client *clients;
};

static uint64_t guard_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

export_guard *export_guard_new(unsigned max_conn, unsigned per_client, unsigned reserve,
                               unsigned deadline_s)
{
    export_guard *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->conn = calloc(max_conn, sizeof *g->conn);
    g->clients = calloc(max_conn, sizeof *g->clients);
    if (!g->conn || !g->clients) {
        export_guard_free(g);
        return NULL;
    }
    for (unsigned i = 0; i < max_conn; i++)
        g->conn[i].fd = -1;
    g->max = max_conn;
    g->per_client = per_client;
    g->reserve = reserve < max_conn ? reserve : max_conn;
    g->deadline_ns = (uint64_t)deadline_s * 1000000000ull;
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

void export_guard_free(export_guard *g)
{
    if (!g)
        return;
    if (g->conn && g->clients)
        pthread_mutex_destroy(&g->lock);
    free(g->conn);
    free(g->clients);
    free(g);
}

/* An address and port as /proc/net/tcp (4) or tcp6 (6) print them: the 32-bit words of the
 * address in this machine's order, the port in hex. A v4 address in tcp6 is v4-mapped. */
static void proc_endpoint(const struct sockaddr_storage *a, int six, char *out, size_t cap)
{
    uint32_t w[4] = {0, 0, 0, 0};
    unsigned port;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const void *)a;
        memcpy(&w[3], &v4->sin_addr, 4);
        w[2] = htonl(0xffffu);
        port = ntohs(v4->sin_port);
    } else {
        const struct sockaddr_in6 *v6 = (const void *)a;
        memcpy(w, &v6->sin6_addr, 16);
        port = ntohs(v6->sin6_port);
    }
    if (six)
        snprintf(out, cap, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3], port);
    else
        snprintf(out, cap, "%08X:%04X", w[3], port);
}

/* The uid that owns the socket at peer connected to self, from the kernel's socket table; -1
 * when it is not there. */
static long peer_uid(const struct sockaddr_storage *peer, const struct sockaddr_storage *self)
{
    for (int six = peer->ss_family == AF_INET6; six < 2; six++) {
        char want_local[64], want_remote[64], line[512];
        proc_endpoint(peer, six, want_local, sizeof want_local);
        proc_endpoint(self, six, want_remote, sizeof want_remote);
        FILE *f = fopen(six ? "/proc/net/tcp6" : "/proc/net/tcp", "re");
        if (!f)
            continue;
        long uid = -1;
        while (uid < 0 && fgets(line, sizeof line, f)) {
            char local[64], remote[64];
            unsigned long u;
            if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %lu", local, remote, &u) == 3 &&
                !strcmp(local, want_local) && !strcmp(remote, want_remote))
                uid = (long)u;
        }
        fclose(f);
        if (uid >= 0)
            return uid;
    }
    return -1;
}

static int loopback(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *)(const void *)a)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(v6) || (IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127);
}

/* Who the client of connection fd is, as a key ("uid N", "address A"). */
static void client_key(int fd, char *key, size_t cap)
{
    struct sockaddr_storage peer, self;
    socklen_t pl = sizeof peer, sl = sizeof self;
    memset(&peer, 0, sizeof peer);
    memset(&self, 0, sizeof self);
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 ||
        getsockname(fd, (struct sockaddr *)&self, &sl) < 0 ||
        (peer.ss_family != AF_INET && peer.ss_family != AF_INET6)) {
        snprintf(key, cap, "unknown");
        return;
    }
    long uid = loopback(&peer) ? peer_uid(&peer, &self) : -1;
    if (uid >= 0) {
        snprintf(key, cap, "uid %ld", uid);
        return;
    }
    char text[INET6_ADDRSTRLEN] = "?";
    const void *addr = peer.ss_family == AF_INET
                           ? (const void *)&((struct sockaddr_in *)&peer)->sin_addr
                           : (const void *)&((struct sockaddr_in6 *)&peer)->sin6_addr;
    inet_ntop(peer.ss_family, addr, text, sizeof text);
    snprintf(key, cap, "address %s", text);
}

/* The client of key (added when new): its index, or -1 when the table is full. */
static int client_of(export_guard *g, const char *key)
{
    int free_at = -1;
    for (unsigned i = 0; i < g->max; i++) {
        if (g->clients[i].key[0] && !strcmp(g->clients[i].key, key))
            return (int)i;
        if (!g->clients[i].key[0] && free_at < 0)
            free_at = (int)i;
    }
    if (free_at >= 0)
        snprintf(g->clients[free_at].key, sizeof g->clients[free_at].key, "%s", key);
    return free_at;
}

static void guard_opened(export_guard *g, struct MHD_Connection *c, void **socket_context)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info)
        return;
    int fd = info->connect_fd;
    char key[64];
    client_key(fd, key, sizeof key); /* outside the lock: it reads /proc */
    pthread_mutex_lock(&g->lock);
    guard_conn *slot = NULL;
    for (unsigned i = 0; i < g->max && !slot; i++)
        if (g->conn[i].fd < 0)
            slot = &g->conn[i];
    int client = client_of(g, key);
    /* Within its share, or while the slots kept for the clients within theirs stay free. */
    int admit = slot && client >= 0 &&
                (g->clients[client].open < g->per_client || g->open + g->reserve < g->max);
    if (!admit) {
        /* Over its share (or past every slot): shut down now, counted nowhere. */
        shutdown(fd, SHUT_RDWR);
        if (slot)
            *slot = (guard_conn){.fd = fd, .client = -1, .since = guard_now()};
    } else {
        g->clients[client].open++;
        g->open++;
        *slot = (guard_conn){.fd = fd, .client = client, .since = guard_now()};
    }
    *socket_context = slot;
    pthread_mutex_unlock(&g->lock);
}

void export_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode toe)
{
    export_guard *g = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        guard_opened(g, c, socket_context);
        return;
    }
    guard_conn *slot = *socket_context;
    if (!slot)
        return;
    pthread_mutex_lock(&g->lock);
    if (slot->client >= 0) {
        guard_client *cl = &g->clients[slot->client];
        if (cl->open && !--cl->open)
            cl->key[0] = 0;
        g->open--;
    }
    slot->fd = -1;
    pthread_mutex_unlock(&g->lock);
    *socket_context = NULL;
}

void export_guard_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                            enum MHD_RequestTerminationCode toe)
{
    (void)req_cls;
    (void)toe;
    export_guard *g = cls;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    guard_conn *slot = info ? info->socket_context : NULL;
    if (!slot)
        return;
    pthread_mutex_lock(&g->lock);
    slot->since = guard_now();
    pthread_mutex_unlock(&g->lock);
}

unsigned export_guard_sweep(export_guard *g)
{
    unsigned cut = 0;
    uint64_t now = guard_now();
    pthread_mutex_lock(&g->lock);
    for (unsigned i = 0; i < g->max; i++) {
        guard_conn *s = &g->conn[i];
        if (s->fd >= 0 && now - s->since > g->deadline_ns) {
            shutdown(s->fd, SHUT_RDWR);
            s->since = now; /* shut down once; libmicrohttpd closes it */
            cut++;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return cut;
}
