/*
 * tui: the live monitor, `termsight top`. The room's public face for the CLI: the options and
 * one entry point. Everything else (screen, canvas, layout, panels, the live source) is in
 * tui_internal.h, for the room and its tests.
 */
#ifndef TERMSIGHT_TUI_H
#define TERMSIGHT_TUI_H

#define TUI_REFRESH_MS_DEFAULT 1000
#define TUI_REFRESH_MS_MIN     50
#define TUI_REFRESH_MS_MAX     60000

typedef struct tui_options {
    const char *target;  /* a pid or a process name; NULL: the newest live session */
    const char *job;     /* instead of target: the sessions of this job on this machine */
    unsigned refresh_ms; /* display refresh; 0: TUI_REFRESH_MS_DEFAULT */
    int once;            /* print one snapshot of the views without curses, then exit */
    int json;            /* with once: the snapshot as JSON */
} tui_options;

/* Runs the monitor (or, with once, prints one snapshot). Returns the exit status: 0 on success,
 * 1 on failure with *cause set to a malloc'd message that the caller prints after the terminal
 * is restored (cause may be NULL). */
int tui_main(const tui_options *o, char **cause);

#endif
