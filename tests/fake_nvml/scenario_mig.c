/* SPDX-License-Identifier: MIT */
/* scenario_mig.c — MIG in the fake NVML's scenarios: the `mig` lines (a GPU's MIG mode, and the MIG
 * devices of a GPU in MIG mode, each a GPU instance + compute instance with its own UUID and
 * memory) and the look-ups the fake's MIG calls make. Pure, like scenario.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario_internal.h"

/* A GPU's MIG mode, once a `mig` line has named the GPU. */
struct mig_mode {
	unsigned gpu;
	int current, pending;
	int explicit_mode; /* set by `mig GPU on|off`, not implied by a device line */
};

struct scn_migs {
	struct scn_mig *dev;
	size_t ndev, dev_cap;
	struct mig_mode *mode;
	size_t nmode, mode_cap;
};

void scn__mig_free(struct scn *s)
{
	if (!s->mig)
		return;
	free(s->mig->dev);
	free(s->mig->mode);
	free(s->mig);
	s->mig = NULL;
}

/* Grows *arr (of *cap elements of size elem) to hold one more; -1 when out of memory. */
static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 8;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

static struct mig_mode *mode_of(const struct scn_migs *m, unsigned gpu)
{
	for (size_t i = 0; m && i < m->nmode; i++)
		if (m->mode[i].gpu == gpu)
			return &m->mode[i];
	return NULL;
}

static struct mig_mode *mode_get(struct scn_migs *m, unsigned gpu)
{
	struct mig_mode *md = mode_of(m, gpu);
	if (md)
		return md;
	if (grow((void **)&m->mode, &m->mode_cap, m->nmode, sizeof *m->mode) < 0)
		return NULL;
	md = &m->mode[m->nmode++];
	*md = (struct mig_mode){.gpu = gpu};
	return md;
}

static size_t devices_of(const struct scn_migs *m, unsigned gpu)
{
	size_t n = 0;
	for (size_t i = 0; m && i < m->ndev; i++)
		n += m->dev[i].gpu == gpu;
	return n;
}

static int on_off(const char *v, int *out)
{
	if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0)
		*out = 1;
	else if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
		*out = 0;
	else
		return -1;
	return 0;
}

/* `mig GPU on|off [pending=on|off]` */
static int mode_line(struct scn_migs *m, unsigned gpu, char **a, size_t n, char *msg, size_t len)
{
	int cur, pend;
	if (on_off(a[0], &cur) < 0)
		return snprintf(msg, len, "expected on or off after the GPU"), -1;
	pend = cur;
	for (size_t i = 1; i < n; i++) {
		if (strncmp(a[i], "pending=", 8) != 0 || on_off(a[i] + 8, &pend) < 0)
			return snprintf(msg, len, "expected pending=on|off, got '%.40s'", a[i]), -1;
	}
	struct mig_mode *md = mode_get(m, gpu);
	if (!md)
		return snprintf(msg, len, "out of memory"), -1;
	if (md->explicit_mode)
		return snprintf(msg, len, "MIG mode of gpu %u given twice", gpu), -1;
	if (!cur && devices_of(m, gpu))
		return snprintf(msg, len, "gpu %u has MIG devices: its MIG mode cannot be off", gpu), -1;
	md->current = cur;
	md->pending = pend;
	md->explicit_mode = 1;
	return 0;
}

/* One key=value of a device line into d; -1 with a message. */
static int device_key(struct scn_mig *d, char *kv, char *msg, size_t len)
{
	char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return snprintf(msg, len, "expected key=value, got '%.40s'", kv), -1;
	*eq = 0;
	const char *k = kv, *v = eq + 1;
	uint64_t x;
	int bad = 0;
	if (!strcmp(k, "gi") || !strcmp(k, "ci")) {
		bad = scn__parse_u32(v, &x) < 0 || x == NO_INSTANCE;
		*(!strcmp(k, "gi") ? &d->gi : &d->ci) = (unsigned)x;
	} else if (!strcmp(k, "total") || !strcmp(k, "reserved") || !strcmp(k, "used")) {
		bad = scn__parse_size(v, &x) < 0;
		*(!strcmp(k, "total") ? &d->total : !strcmp(k, "reserved") ? &d->reserved : &d->used) = x;
	} else if (!strcmp(k, "profile") || !strcmp(k, "uuid")) {
		size_t cap = !strcmp(k, "profile") ? sizeof d->profile : sizeof d->uuid;
		if (strlen(v) >= cap)
			return snprintf(msg, len, "%s longer than %zu bytes", k, cap - 1), -1;
		memcpy(!strcmp(k, "profile") ? d->profile : d->uuid, v, strlen(v) + 1);
	} else {
		return snprintf(msg, len, "unknown key '%.40s'", k), -1;
	}
	if (bad)
		return snprintf(msg, len, "bad value '%.40s' for %s", v, k), -1;
	return 0;
}

/* `mig GPU gi=N ci=N [profile=TEXT] [uuid=TEXT] [total=SIZE] [reserved=SIZE] [used=SIZE]` */
static int device_line(struct scn_migs *m, unsigned gpu, char **a, size_t n, char *msg, size_t len)
{
	struct scn_mig d = {.gpu = gpu, .gi = NO_INSTANCE, .ci = NO_INSTANCE, .total = 10ull << 30};
	snprintf(d.profile, sizeof d.profile, "1g.10gb");
	for (size_t i = 0; i < n; i++)
		if (device_key(&d, a[i], msg, len) < 0)
			return -1;
	if (d.gi == NO_INSTANCE || d.ci == NO_INSTANCE)
		return snprintf(msg, len, "a MIG device needs gi=N and ci=N"), -1;
	if (d.reserved > d.total || d.used > d.total - d.reserved)
		return snprintf(msg, len, "reserved + used exceed total"), -1;
	for (size_t i = 0; i < m->ndev; i++)
		if (m->dev[i].gpu == gpu && m->dev[i].gi == d.gi && m->dev[i].ci == d.ci)
			return snprintf(msg, len, "gpu %u has MIG device gi=%u ci=%u twice", gpu, d.gi, d.ci), -1;
	if (m->ndev >= SCN_MAX_MIG)
		return snprintf(msg, len, "more than %d MIG devices", SCN_MAX_MIG), -1;
	struct mig_mode *md = mode_get(m, gpu);
	if (!md || grow((void **)&m->dev, &m->dev_cap, m->ndev, sizeof *m->dev) < 0)
		return snprintf(msg, len, "out of memory"), -1;
	if (md->explicit_mode && !md->current)
		return snprintf(msg, len, "gpu %u's MIG mode is off: it has no MIG devices", gpu), -1;
	if (!md->explicit_mode)
		md->current = md->pending = 1;
	if (!d.uuid[0]) /* distinct per device, in the MIG-UUID form */
		snprintf(d.uuid, sizeof d.uuid, "MIG-%08x-0000-4000-8000-%04x%04x%04x", gpu, d.gi, d.ci,
			 (unsigned)(devices_of(m, gpu) & 0xffff));
	m->dev[m->ndev++] = d;
	return 0;
}

int scn__mig_line(struct scn *s, unsigned gpu, char **a, size_t n, char *msg, size_t len)
{
	if (!s->mig && !(s->mig = calloc(1, sizeof *s->mig)))
		return snprintf(msg, len, "out of memory"), -1;
	if (n == 0)
		return snprintf(msg, len, "missing arguments: mig GPU on|off, or mig GPU gi=N ci=N ..."), -1;
	if (!strchr(a[0], '='))
		return mode_line(s->mig, gpu, a, n, msg, len);
	return device_line(s->mig, gpu, a, n, msg, len);
}

void scn_mig_mode(const struct scn *s, unsigned gpu, int *current, int *pending)
{
	const struct mig_mode *md = mode_of(s->mig, gpu);
	*current = md ? md->current : 0;
	*pending = md ? md->pending : 0;
}

size_t scn_mig_count(const struct scn *s)
{
	return s->mig ? s->mig->ndev : 0;
}

const struct scn_mig *scn_mig_get(const struct scn *s, size_t i)
{
	return s->mig && i < s->mig->ndev ? &s->mig->dev[i] : NULL;
}

long scn_mig_find(const struct scn *s, unsigned gpu, unsigned k)
{
	for (size_t i = 0; s->mig && i < s->mig->ndev; i++)
		if (s->mig->dev[i].gpu == gpu && k-- == 0)
			return (long)i;
	return -1;
}
