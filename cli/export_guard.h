/* export_guard: the exporter's admission of connections (export_guard.c). */
#ifndef TERMSIGHT_CLI_EXPORT_GUARD_H
#define TERMSIGHT_CLI_EXPORT_GUARD_H

#include <microhttpd.h>

typedef struct export_guard export_guard;

/* A guard for at most max_conn connections at once: a client always gets per_client of them, and
 * more only while reserve slots stay free for the others; each request must be whole and
 * answered within deadline_s seconds of its connection's opening or of the previous answer on
 * it. NULL when out of memory. */
export_guard *export_guard_new(unsigned max_conn, unsigned per_client, unsigned reserve,
                               unsigned deadline_s);
void export_guard_free(export_guard *g);

/* MHD_OPTION_NOTIFY_CONNECTION's callback (cls: the guard): a connection opened is counted
 * against its client, or shut down at once when it is past the client's share and only the
 * reserve is left; one closed is counted off. */
void export_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode toe);

/* MHD_OPTION_NOTIFY_COMPLETED's callback (cls: the guard): an answer sent starts the connection's
 * next deadline. */
void export_guard_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                            enum MHD_RequestTerminationCode toe);

/* Closes the connections past their deadline (from any thread; the exporter calls it about once a
 * second). Returns how many it closed. */
unsigned export_guard_sweep(export_guard *g);

#endif
