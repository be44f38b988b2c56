/* SPDX-License-Identifier: MIT */
/* fuzz_query_fields.c — libFuzzer target for the parsers behind `gpumon query`: any bytes as a
 * --query-gpu / --query-compute-apps list, a --format and a loop period, then every parsed field
 * rendered from a sample made of the same bytes, into buffers of every size. */
#include <stdlib.h>
#include <string.h>

#include "query_fields.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* An error message must be there (as much as fits), terminated inside the buffer. */
static void check_err(const char *err, size_t errlen)
{
	if (errlen > 0 && memchr(err, 0, errlen) == NULL)
		abort();
	if (errlen > 1 && err[0] == 0)
		abort();
}

/* Fills the structs of a context from the input bytes, so values and presence bits vary. */
static void make_ctx(const unsigned char *data, size_t size, gpumon_device_info *info,
		     gpumon_device_sample *s, gpumon_process *p, struct qf_ctx *c)
{
	memset(info, 0, sizeof *info);
	memset(s, 0, sizeof *s);
	memset(p, 0, sizeof *p);
	memcpy(s, data, size < sizeof *s ? size : sizeof *s);
	memcpy(p, data, size < sizeof *p ? size : sizeof *p);
	memcpy(info, data, size < sizeof *info ? size : sizeof *info);
	/* the library always terminates its strings */
	info->name[sizeof info->name - 1] = 0;
	info->uuid[sizeof info->uuid - 1] = 0;
	info->pci_bus_id[sizeof info->pci_bus_id - 1] = 0;
	p->name[sizeof p->name - 1] = 0;
	c->info = info;
	c->sample = s;
	c->sample_status = size > 0 ? -(int)(data[0] % 12) : 0;
	c->driver_version = size > 1 && (data[1] & 1) ? "580.159.04" : NULL;
	c->gpu_count = size > 2 ? data[2] : 0;
	c->proc = p;
	/* property fields: presence masks and values from the input too; the strings terminated */
	static gpumon_device_props props;
	memset(&props, 0, sizeof props);
	memcpy(&props, data, size < sizeof props ? size : sizeof props);
	props.serial[sizeof props.serial - 1] = 0;
	props.vbios[sizeof props.vbios - 1] = 0;
	c->props = size > 3 && (data[3] & 1) ? &props : NULL;
	c->props_status = size > 3 ? -(int)((data[3] >> 1) % 12) : 0;
	c->timestamp = size > 1 && (data[1] & 2) ? "2026/12/03 08:49:06.061" : NULL;
}

static void render(const struct qf_list *l, enum qf_table t, const struct qf_ctx *c, size_t len)
{
	char buf[600];
	if (l->n > QF_MAX_FIELDS)
		abort();
	for (unsigned i = 0; i < l->n; i++) {
		const struct qf_field *f = qf_field_get(l->id[i]);
		if (!f || f->table != t)
			abort();
		struct qf_value v;
		qf_value_get(f, c, &v);
		if (v.kind != QV_TEXT && v.kind != QV_UINT && v.kind != QV_CENTI && !qf_value_marker(v.kind))
			abort();
		for (int nounits = 0; nounits < 2; nounits++) {
			qf_csv_value(f, &v, nounits, buf, len);
			if (len > 0 && !memchr(buf, 0, len))
				abort();
			qf_csv_header(f, buf, len);
			if (len > 0 && (!memchr(buf, 0, len) || (len > 1 && buf[0] == 0)))
				abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	size_t errlen = size % 97; /* every buffer size from none to a short line */
	char err[97];
	size_t len = size % 600;

	gpumon_device_info info;
	gpumon_device_sample sample;
	gpumon_process proc;
	struct qf_ctx c;
	make_ctx(data, size, &info, &sample, &proc, &c);

	for (int t = QF_TABLE_GPU; t <= QF_TABLE_APPS; t++) {
		struct qf_list l;
		if (qf_parse_list(text, (enum qf_table)t, &l, err, errlen) == 0)
			render(&l, (enum qf_table)t, &c, len);
		else
			check_err(err, errlen);
		(void)qf_list_sample_bits(&l);
	}

	struct qf_format fmt;
	if (qf_parse_format(text, &fmt, err, errlen) == 0) {
		if (fmt.json && (fmt.noheader || fmt.nounits))
			abort();
	} else {
		check_err(err, errlen);
	}

	unsigned period = 0;
	if (qf_parse_period("-l", text, &period, err, errlen) == 0) {
		if (period == 0 || period > 999999999u)
			abort();
	} else {
		check_err(err, errlen);
	}
	free(text);
	return 0;
}
