/*
 * Line-oriented logging with levels. Each line is formatted into one buffer and written with a
 * single write(2), so lines from several threads or processes never interleave.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "rgpu/err.h"
#include "rgpu/log.h"

int rgpu_log_level = RGPU_LOG_INFO;
static int log_fd = 2;
static char log_tag[64] = "rgpu";

void rgpu_log_set_level(int level)
{
	rgpu_log_level = level;
}

int rgpu_log_parse_level(const char *s)
{
	static const char *const names[] = {"none", "err", "warn", "info", "debug"};
	if (!s || !*s)
		return -1;
	if (s[0] >= '0' && s[0] <= '4' && s[1] == '\0')
		return s[0] - '0';
	for (int i = 0; i < 5; i++)
		if (!strncasecmp(s, names[i], strlen(names[i])))
			return i;
	return -1;
}

void rgpu_log_set_tag(const char *tag)
{
	snprintf(log_tag, sizeof(log_tag), "%s", tag);
}

int rgpu_log_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return RGPU_ESYS;
	log_fd = fd;
	return 0;
}

int rgpu_log_fd(void)
{
	return log_fd;
}

void rgpu_log_set_fd(int fd)
{
	log_fd = fd;
}

void rgpu_log(int level, const char *file, int line, const char *fmt, ...)
{
	static const char *const lv[] = {"", "error", "warn", "info", "debug"};
	char buf[2048];
	struct timeval tv;
	struct tm tm;
	int n, saved = errno;

	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	n = snprintf(buf, sizeof(buf), "%02d:%02d:%02d.%03ld %s %s: ", tm.tm_hour, tm.tm_min,
		     tm.tm_sec, (long)tv.tv_usec / 1000, log_tag, lv[level & 7 ? level : 0]);
	if (n < 0)
		n = 0;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (m > 0)
		n += m;
	if ((size_t)n >= sizeof(buf) - 64)
		n = (int)sizeof(buf) - 64;
	if (file) {
		const char *base = strrchr(file, '/');
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, " (%s:%d)", base ? base + 1 : file,
			      line);
	}
	buf[n++] = '\n';
	ssize_t w = write(log_fd, buf, (size_t)n);
	(void)w;
	errno = saved;
}
