/* Private to statetrack/: what log.c shares with stream.c beyond the public API. */
#ifndef RGPU_ST_INT_H
#define RGPU_ST_INT_H

#include <stddef.h>

#include "rgpu/statetrack.h"

/*
 * st__check_rec() - the rules of st_add that need no log: known kind, id not 0, name within
 * ST_NAME_MAX, a name and a parent for functions, kernels and globals, a parent for
 * attributes, a hash for modules. A tombstone needs only its id. *name_len receives the
 * name's length (0: none).
 * Returns 0, RGPU_EINVAL or RGPU_ETOOBIG.
 */
int st__check_rec(const struct st_rec *rec, size_t *name_len);

/*
 * st__next() - the live record after rec in creation order (the oldest when rec is NULL), or
 * NULL after the newest: a cursor for walking two logs side by side (st_compare). rec must be
 * a record of this log (st_find, st__next), and the log unchanged since it was obtained.
 */
const struct st_rec *st__next(struct st_log *log, const struct st_rec *rec);

#endif
