/*
 * model: termsight's shared vocabulary.
 *
 * The event record, the clock, the shared-memory segment (header, lanes, string table, control
 * mailbox) and the recording format. Pure data structures and their lock-free protocols: no
 * threads, no policy. Everything that crosses a process boundary is described here, so the
 * collector, the monitor and the analysis agree on it.
 *
 * One header per concept (segment.h, lane.h, recording.h, ...), each including what it needs;
 * the other rooms include this one, which includes them all.
 *
 * Errors follow one convention: functions return 0 (or a count) on success and -1 on failure,
 * with *cause set to a malloc'd message the caller frees (cause may be NULL).
 */
#ifndef TERMSIGHT_MODEL_H
#define TERMSIGHT_MODEL_H

#include "base.h"
#include "utf8.h"
#include "options.h"
#include "event.h"
#include "tsclock.h"
#include "opname.h"
#include "nesting.h"
#include "steptrace.h"
#include "rlimits.h"
#include "budget.h"
#include "segment.h"
#include "board.h"
#include "digest.h"
#include "lane.h"
#include "inflight.h"
#include "strtab.h"
#include "mailbox.h"
#include "recording.h"

#endif
