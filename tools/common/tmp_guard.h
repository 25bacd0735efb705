/*
 * The temporary files of a process (up to 4) that a terminating signal (HUP, INT, TERM,
 * XFSZ) removes before the process dies of that signal as it would have:
 * a tool writing OUT through a temporary beside it (picolm-quantize), or
 * measuring a scratch copy (picolm-bench --tune), leaves nothing behind on
 * Ctrl-C.  Signals ignored by whoever started the process stay ignored.
 */
#ifndef PICOLM_TMP_GUARD_H
#define PICOLM_TMP_GUARD_H

/* Block (1) or unblock (0) the signals, so that the guarded name and the
   file itself change together (create/rename/unlink between hold(1) and
   hold(0)). */
void tmp_guard_hold(int on);
/* Guard PATH alone ("" or NULL: nothing); installs the handlers on first use.
   Call it between hold(1) and hold(0). */
void tmp_guard_set(const char *path);
/* Guard PATH too (the others stay guarded); -1 when 4 already are.  Between
   hold(1) and hold(0) as well. */
int tmp_guard_add(const char *path);

#endif
