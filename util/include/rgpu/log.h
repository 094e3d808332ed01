/*
 * Logging for daemons, tools and (only when RGPU_LOG asks) the interposer.
 *
 * Define LOG_PREFIX before including to prefix every line of a file ("worker: ").
 * pr_err() adds file and line. Output goes to stderr or to the file set with rgpu_log_open();
 * never to stdout.
 */
#ifndef RGPU_LOG_H
#define RGPU_LOG_H

#include <stdarg.h>

enum rgpu_log_level {
	RGPU_LOG_NONE = 0,
	RGPU_LOG_ERR = 1,
	RGPU_LOG_WARN = 2,
	RGPU_LOG_INFO = 3,
	RGPU_LOG_DEBUG = 4,
};

#ifndef LOG_PREFIX
#define LOG_PREFIX ""
#endif

extern int rgpu_log_level;

/* rgpu_log_set_level() - set the level; rgpu_log_parse_level() maps "err|warn|info|debug|0-4". */
void rgpu_log_set_level(int level);
int rgpu_log_parse_level(const char *s);
/* rgpu_log_set_tag() - a tag printed on every line ("rgpud[1234]"). Copied. */
void rgpu_log_set_tag(const char *tag);
/* rgpu_log_open() - append to PATH instead of stderr. Returns 0 or RGPU_ESYS. */
int rgpu_log_open(const char *path);
/*
 * rgpu_log_fd() - the descriptor lines go to: 2 (stderr) unless rgpu_log_open() or
 * rgpu_log_set_fd() chose another. rgpu_log_set_fd() - write to fd from now on (a worker whose
 * fd 2 becomes the program's output keeps logging to a copy of the original; server/stdio.c).
 */
int rgpu_log_fd(void);
void rgpu_log_set_fd(int fd);

void rgpu_log(int level, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define pr_err(fmt, ...)                                                                       \
	do {                                                                                   \
		if (rgpu_log_level >= RGPU_LOG_ERR)                                            \
			rgpu_log(RGPU_LOG_ERR, __FILE__, __LINE__, LOG_PREFIX fmt, ##__VA_ARGS__); \
	} while (0)
#define pr_warn(fmt, ...)                                                                      \
	do {                                                                                   \
		if (rgpu_log_level >= RGPU_LOG_WARN)                                           \
			rgpu_log(RGPU_LOG_WARN, NULL, 0, LOG_PREFIX fmt, ##__VA_ARGS__);        \
	} while (0)
#define pr_info(fmt, ...)                                                                      \
	do {                                                                                   \
		if (rgpu_log_level >= RGPU_LOG_INFO)                                           \
			rgpu_log(RGPU_LOG_INFO, NULL, 0, LOG_PREFIX fmt, ##__VA_ARGS__);        \
	} while (0)
/*
 * pr_warn_once() - pr_warn, the first time this line is reached in the process: for refusals a
 * peer can repeat at will (an rgpud worker is one process per session, so there: once per
 * session and reason).
 */
#define pr_warn_once(fmt, ...)                                                                 \
	do {                                                                                   \
		static int said_;                                                              \
		if (!__atomic_exchange_n(&said_, 1, __ATOMIC_RELAXED))                         \
			pr_warn(fmt, ##__VA_ARGS__);                                           \
	} while (0)
#define pr_debug(fmt, ...)                                                                     \
	do {                                                                                   \
		if (rgpu_log_level >= RGPU_LOG_DEBUG)                                          \
			rgpu_log(RGPU_LOG_DEBUG, NULL, 0, LOG_PREFIX fmt, ##__VA_ARGS__);       \
	} while (0)

#endif
