/* SPDX-License-Identifier: MIT */
/* tfevents.c — TensorBoard event files: scalar summaries encoded with protobuf-c (the message
 * subset in tfevents.proto) and framed as TFRecords (length, masked CRC32C of the length, data,
 * masked CRC32C of the data), so that TensorBoard reads them without TensorFlow installed. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tfevents.pb-c.h"

#include "gpumon/gpumon.h"

#define TAG_MAX_BYTES 1024
#define FILE_VERSION  "brain.Event:2"

struct gpumon_tfevents {
	FILE *f;
	int failed; /* a write failed: every later write returns GPUMON_E_IO at once */
	char *path;
	char err[512];
};

static void set_err(gpumon_tfevents *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(gpumon_tfevents *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->err, sizeof w->err, fmt, ap);
	va_end(ap);
}

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), bitwise: records are small and few (a
 * few per training step at most), so a table buys nothing worth its 1 KiB. */
static uint32_t crc32c(const uint8_t *p, size_t n)
{
	uint32_t c = 0xFFFFFFFFu;
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
	}
	return c ^ 0xFFFFFFFFu;
}

/* The TFRecord mask: rotate right by 15 and add a constant (mod 2^32). */
static uint32_t masked_crc(const uint8_t *p, size_t n)
{
	uint32_t c = crc32c(p, n);
	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes one record framing the n bytes of data. Returns 0 or GPUMON_E_IO (message set). */
static int write_record(gpumon_tfevents *w, const uint8_t *data, size_t n)
{
	uint8_t head[12], tail[4];
	for (int i = 0; i < 8; i++)
		head[i] = (uint8_t)((uint64_t)n >> (8 * i));
	put_le32(head + 8, masked_crc(head, 8));
	put_le32(tail, masked_crc(data, n));
	if (fwrite(head, 1, sizeof head, w->f) != sizeof head || fwrite(data, 1, n, w->f) != n ||
	    fwrite(tail, 1, sizeof tail, w->f) != sizeof tail) {
		set_err(w, "writing the TensorBoard event file %s failed: %s", w->path, strerror(errno));
		w->failed = 1;
		return GPUMON_E_IO;
	}
	return 0;
}

/* Encodes ev and writes it as one record. */
static int write_event(gpumon_tfevents *w, const GpumonTf__Event *ev)
{
	uint8_t small[256];
	size_t n = gpumon_tf__event__get_packed_size(ev);
	uint8_t *buf = n <= sizeof small ? small : malloc(n);
	if (!buf) {
		set_err(w, "out of memory encoding a TensorBoard event of %zu bytes", n);
		return GPUMON_E_NOMEM;
	}
	gpumon_tf__event__pack(ev, buf);
	int rc = write_record(w, buf, n);
	if (buf != small)
		free(buf);
	return rc;
}

/* Creates dir and its missing parents (mode 0777 less the umask), like `mkdir -p`. */
static int make_dirs(const char *dir)
{
	char *p = strdup(dir);
	if (!p)
		return -1;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0777) && errno != EEXIST) {
			free(p);
			return -1;
		}
		*s = '/';
	}
	int rc = mkdir(p, 0777) && errno != EEXIST ? -1 : 0;
	free(p);
	return rc;
}

/* Opens a new file in dir: events.out.tfevents.<seconds>.<host>.<pid>.<counter>, taking the
 * first counter whose file does not exist yet (O_EXCL), so that writers never share a file. */
static int create_file(gpumon_tfevents *w, const char *dir, double wall_time)
{
	char host[256] = "localhost";
	if (gethostname(host, sizeof host) || !host[0])
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = 0;
	for (char *s = host; *s; s++)
		if (*s == '/')
			*s = '_';
	size_t cap = strlen(dir) + strlen(host) + 96;
	if (!(w->path = malloc(cap)))
		return GPUMON_E_NOMEM;
	for (unsigned counter = 0; counter < 1000; counter++) {
		snprintf(w->path, cap, "%s/events.out.tfevents.%010lld.%s.%ld.%u", dir, (long long)wall_time,
			 host, (long)getpid(), counter);
		int fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0) {
			if (!(w->f = fdopen(fd, "wb"))) {
				close(fd);
				set_err(w, "could not open %s: %s", w->path, strerror(errno));
				return GPUMON_E_IO;
			}
			return 0;
		}
		if (errno != EEXIST) {
			set_err(w, "could not create the TensorBoard event file %s: %s", w->path,
				strerror(errno));
			return GPUMON_E_IO;
		}
	}
	set_err(w, "could not create a TensorBoard event file in %s: 1000 names taken", dir);
	return GPUMON_E_IO;
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int gpumon_tfevents_create(const char *dir, double wall_time, gpumon_tfevents **out)
{
	if (!out)
		return GPUMON_E_INVAL;
	gpumon_tfevents *w = calloc(1, sizeof *w);
	*out = w;
	if (!w)
		return GPUMON_E_NOMEM;
	if (!dir || !*dir) {
		set_err(w, "no directory given for the TensorBoard event file");
		return GPUMON_E_INVAL;
	}
	if (wall_time <= 0)
		wall_time = wall_now();
	if (make_dirs(dir)) {
		set_err(w, "could not create the TensorBoard log directory %s: %s", dir, strerror(errno));
		return GPUMON_E_IO;
	}
	int rc = create_file(w, dir, wall_time);
	if (rc)
		return rc;
	GpumonTf__Event ev = GPUMON_TF__EVENT__INIT;
	ev.wall_time = wall_time;
	ev.what_case = GPUMON_TF__EVENT__WHAT_FILE_VERSION;
	ev.file_version = (char *)FILE_VERSION;
	if ((rc = write_event(w, &ev)) || (rc = gpumon_tfevents_flush(w)))
		return rc;
	return 0;
}

const char *gpumon_tfevents_path(const gpumon_tfevents *w)
{
	return w && w->path ? w->path : "";
}

const char *gpumon_tfevents_errmsg(const gpumon_tfevents *w)
{
	return w ? w->err : "";
}

int gpumon_tfevents_scalar(gpumon_tfevents *w, const char *tag, int64_t step, double wall_time, float value)
{
	if (!w || !w->f)
		return GPUMON_E_INVAL;
	if (w->failed)
		return GPUMON_E_IO;
	if (!tag || !*tag || strlen(tag) > TAG_MAX_BYTES) {
		set_err(w, "a TensorBoard tag must hold 1 to %d bytes", TAG_MAX_BYTES);
		return GPUMON_E_INVAL;
	}
	if (step < 0) {
		set_err(w, "a TensorBoard step must not be negative (%lld)", (long long)step);
		return GPUMON_E_INVAL;
	}
	GpumonTf__Summary__Value v = GPUMON_TF__SUMMARY__VALUE__INIT;
	v.tag = (char *)tag;
	v.value_case = GPUMON_TF__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
	v.simple_value = value;
	GpumonTf__Summary__Value *vs[1] = {&v};
	GpumonTf__Summary s = GPUMON_TF__SUMMARY__INIT;
	s.n_value = 1;
	s.value = vs;
	GpumonTf__Event ev = GPUMON_TF__EVENT__INIT;
	ev.wall_time = wall_time > 0 ? wall_time : wall_now();
	ev.step = step;
	ev.what_case = GPUMON_TF__EVENT__WHAT_SUMMARY;
	ev.summary = &s;
	return write_event(w, &ev);
}

int gpumon_tfevents_flush(gpumon_tfevents *w)
{
	if (!w || !w->f)
		return GPUMON_E_INVAL;
	if (w->failed)
		return GPUMON_E_IO;
	if (fflush(w->f)) {
		set_err(w, "writing the TensorBoard event file %s failed: %s", w->path, strerror(errno));
		w->failed = 1;
		return GPUMON_E_IO;
	}
	return 0;
}

void gpumon_tfevents_destroy(gpumon_tfevents *w)
{
	if (!w)
		return;
	if (w->f)
		fclose(w->f); /* a failure here was reported by gpumon_tfevents_flush, when asked */
	free(w->path);
	free(w);
}
