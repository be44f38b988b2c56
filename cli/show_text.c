/* SPDX-License-Identifier: MIT */
/* show_text.c — `gpumon show` as text that fits the terminal: every line goes through a pen that
 * counts display columns and stops at the width, so nothing wraps; when the width is short, the
 * parts that matter least are left out first (docs in `gpumon show --help` and gpumon(1)). */
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "show.h"

#define BAR_MAX 40   /* the bar's width when there is room */
#define BAR_MIN 10   /* below this the bar says too little: the figures keep the room */
#define USER_W 10
#define PID_W 7      /* Linux pids go up to 4194304 */
#define MEM_W 8      /* "1023 GiB" */
#define CMD_MIN 20   /* the command is cut down to this before other columns go */
#define OWNER_MAX 48 /* "pod NAMESPACE/POD": Kubernetes names run long */
#define OWNER_MIN 12

/* SGR colours, as gpustat uses them */
#define C_HOST "1"
#define C_INDEX "36"
#define C_NAME "34"
#define C_UTIL "32"
#define C_POWER "35"
#define C_USER "90"
#define C_OWNER "36"
#define C_MEM "33"
#define C_DIM "2"

/* ---- counting columns ------------------------------------------------------------------------- */

/* Columns the character at s takes on the terminal, and its length in bytes (*n). The text is
 * valid UTF-8 (cli_safe_text's, or our own). Where the locale is not UTF-8, or the character's
 * width is not known, it counts as 2: too narrow a count would wrap the line. */
static int char_cols(const show_style *st, const unsigned char *s, size_t *n)
{
	unsigned c = s[0];
	if (c < 0x80) {
		*n = 1;
		return 1;
	}
	size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
	unsigned cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80) { /* cannot happen after cli_safe_text; never read past it */
			*n = i;
			return 2;
		}
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	*n = len;
	if (!st->utf8 || len == 1)
		return 2;
	int w = wcwidth((wchar_t)cp);
	return w < 0 ? 2 : w;
}

/* The bytes of s that fit in max columns (whole characters); their columns in *cols. */
static size_t fit(const show_style *st, const char *s, int max, int *cols)
{
	size_t at = 0;
	int used = 0;
	while (s[at]) {
		size_t n;
		int w = char_cols(st, (const unsigned char *)s + at, &n);
		if (used + w > max)
			break;
		used += w;
		at += n;
	}
	*cols = used;
	return at;
}

static int text_cols(const show_style *st, const char *s)
{
	int cols;
	fit(st, s, 1 << 30, &cols);
	return cols;
}

/* ---- the pen: one line, never wider than the width -------------------------------------------- */

typedef struct pen {
	const show_style *st;
	int left; /* columns left on the line */
} pen;

static pen pen_line(const show_style *st)
{
	return (pen){st, st->width};
}

/* Prints as much of s as fits, in colour when one is given and colour is on. */
static void put(pen *p, const char *color, const char *s)
{
	int cols;
	size_t n = fit(p->st, s, p->left, &cols);
	if (!n)
		return;
	if (color && p->st->color)
		printf("\033[%sm%.*s\033[0m", color, (int)n, s);
	else
		printf("%.*s", (int)n, s);
	p->left -= cols;
}

/* n blanks, as many as fit. */
static void pad(pen *p, int n)
{
	if (n > p->left)
		n = p->left;
	if (n > 0) {
		printf("%*s", n, "");
		p->left -= n;
	}
}

/* s cut to width columns and padded with blanks to it, on the left when right is set. */
static void put_field(pen *p, const char *color, const char *s, int width, int right)
{
	int cols;
	size_t n = fit(p->st, s, width, &cols);
	char cut[1024];
	snprintf(cut, sizeof cut, "%.*s", (int)(n < sizeof cut ? n : sizeof cut - 1), s);
	if (right)
		pad(p, width - cols);
	put(p, color, cut);
	if (!right)
		pad(p, width - cols);
}

static void end_line(void)
{
	putchar('\n');
}

/* One line of the text in full, cut at the width. */
static void line(const show_style *st, const char *color, const char *s)
{
	pen p = pen_line(st);
	put(&p, color, s);
	end_line();
}

/* A line made of parts separated by sep; while it is too wide, the part with the highest drop
 * rank is left out (0: never), and what is still too wide at the end is cut. */
struct part {
	const char *text;
	const char *color;
	int drop;
};

static void put_parts(const show_style *st, const char *indent, struct part *parts, size_t n, const char *sep)
{
	int total = text_cols(st, indent), sep_w = text_cols(st, sep);
	int shown[8] = {0};
	for (size_t i = 0; i < n && i < 8; i++) {
		shown[i] = 1;
		total += text_cols(st, parts[i].text) + (i ? sep_w : 0);
	}
	while (total > st->width) {
		size_t worst = n;
		for (size_t i = 0; i < n && i < 8; i++)
			if (shown[i] && parts[i].drop && (worst == n || parts[i].drop < parts[worst].drop))
				worst = i;
		if (worst == n)
			break;
		shown[worst] = 0;
		total -= text_cols(st, parts[worst].text) + sep_w;
	}
	pen p = pen_line(st);
	put(&p, NULL, indent);
	int first = 1;
	for (size_t i = 0; i < n && i < 8; i++) {
		if (!shown[i])
			continue;
		if (!first)
			put(&p, NULL, sep);
		put(&p, parts[i].color, parts[i].text);
		first = 0;
	}
	end_line();
}

/* ---- GPUs ------------------------------------------------------------------------------------- */

static void header(const show_model *m, const show_style *st)
{
	char host[256], drv[112], gpus[32];
	cli_safe_text(host, sizeof host, m->host);
	snprintf(drv, sizeof drv, "driver %s", m->driver[0] ? m->driver : "n/a");
	snprintf(gpus, sizeof gpus, "%u GPU%s", m->gpu_count, m->gpu_count == 1 ? "" : "s");
	struct part parts[] = {{host, C_HOST, 0}, {m->when, NULL, 2}, {drv, NULL, 1}, {gpus, NULL, 3}};
	put_parts(st, "", parts, 4, "  ");
	if (m->replay[0]) { /* a replay says so before any figure: these are not this machine's GPUs now */
		char file[256], line[400];
		cli_safe_text(file, sizeof file, m->replay);
		snprintf(line, sizeof line, "REPLAY of %s at %.1f s of %.1f s (recorded, not now)",
			 file, m->replay_at_s, m->replay_span_s);
		struct part rp[] = {{line, C_HOST, 0}};
		put_parts(st, "", rp, 1, "  ");
	}
}

/* Colour of memory in use, by how full the GPU is. */
static const char *fill_color(const gpumon_device_sample *s)
{
	if (!s->memory_total_bytes)
		return C_MEM;
	double f = (double)s->memory_used_bytes / (double)s->memory_total_bytes;
	return f >= 0.8 ? "1;31" : f >= 0.5 ? "33" : "32";
}

/* The bar: '#' used, '%' driver-reserved, '.' free, rounded up so that any use shows. */
static void put_bar(pen *p, const gpumon_device_sample *s, unsigned width)
{
	char used[BAR_MAX + 1], res[BAR_MAX + 1], free_[BAR_MAX + 1];
	uint64_t total = s->memory_total_bytes ? s->memory_total_bytes : 1;
	uint64_t reserved = (s->present & GPUMON_F_MEM_RESERVED) ? s->memory_reserved_bytes : 0;
	uint64_t uw = (s->memory_used_bytes > total ? total : s->memory_used_bytes) * width;
	unsigned used_w = (unsigned)((uw + total - 1) / total);
	unsigned res_w = (unsigned)(((reserved > total ? total : reserved) * width + total - 1) / total);
	if (used_w > width)
		used_w = width;
	if (res_w > width - used_w)
		res_w = width - used_w;
	memset(res, '%', res_w), res[res_w] = 0;
	memset(used, '#', used_w), used[used_w] = 0;
	memset(free_, '.', width - used_w - res_w), free_[width - used_w - res_w] = 0;
	put(p, NULL, "[");
	put(p, C_DIM, res);
	put(p, fill_color(s), used);
	put(p, NULL, free_);
	put(p, NULL, "]");
}

/* "  memory [bar] 15.0 GiB used + 615 MiB reserved of 140 GiB": the bar takes what the figures
 * leave, up to BAR_MAX; below BAR_MIN the reserved figure goes, then the bar. */
/* "  memory [bar] used + reserved of total"; indent is "  " on a GPU, "    " on a MIG device. */
static void memory_line(const show_style *st, const gpumon_device_sample *s, const char *indent)
{
	char lead[16], lead_bar[24];
	snprintf(lead, sizeof lead, "%smemory ", indent);
	snprintf(lead_bar, sizeof lead_bar, "%smemory [] ", indent);
	char used[32], res[32], total[32], full[128], brief[96];
	cli_format_bytes(used, sizeof used, s->memory_used_bytes);
	cli_format_bytes(total, sizeof total, s->memory_total_bytes);
	if (s->present & GPUMON_F_MEM_RESERVED)
		snprintf(full, sizeof full, " used + %s reserved of %s",
			 cli_format_bytes(res, sizeof res, s->memory_reserved_bytes), total);
	else
		snprintf(full, sizeof full, " used (includes driver-reserved) of %s", total);
	snprintf(brief, sizeof brief, " used of %s", total);
	const char *rest = full;
	int room = st->width - text_cols(st, lead_bar) - text_cols(st, used) - text_cols(st, full);
	if (room < BAR_MIN) {
		rest = brief;
		room = st->width - text_cols(st, lead_bar) - text_cols(st, used) - text_cols(st, brief);
	}
	pen p = pen_line(st);
	put(&p, NULL, lead);
	if (room >= BAR_MIN) {
		put_bar(&p, s, room > BAR_MAX ? BAR_MAX : (unsigned)room);
		put(&p, NULL, " ");
	}
	put(&p, fill_color(s), used);
	put(&p, NULL, rest);
	end_line();
}

static void figures_line(const show_style *st, const gpumon_device_sample *s)
{
	char util[24] = "util   n/a", mu[24] = "mem-util   n/a", temp[24] = "temp n/a", power[32] = "power n/a";
	if (s->present & GPUMON_F_UTIL_GPU)
		snprintf(util, sizeof util, "util %3u %%", s->util_gpu_pct);
	if (s->present & GPUMON_F_UTIL_MEMORY)
		snprintf(mu, sizeof mu, "mem-util %3u %%", s->util_memory_pct);
	if (s->present & GPUMON_F_TEMPERATURE)
		snprintf(temp, sizeof temp, "temp %u C", s->temperature_c);
	if (s->present & GPUMON_F_POWER)
		snprintf(power, sizeof power, "power %.1f W", s->power_mw / 1000.0);
	const char *tc = !(s->present & GPUMON_F_TEMPERATURE) ? NULL : s->temperature_c >= 80 ? "1;31" : "31";
	struct part parts[] = {{util, C_UTIL, 0}, {mu, NULL, 3}, {temp, tc, 2}, {power, C_POWER, 1}};
	put_parts(st, "  ", parts, 4, "   ");
}

/* A warning when the card's memory health calls for one (the library decides; words say it). */
static void health_line(const show_style *st, const show_gpu *gpu)
{
	char words[512], msg[560];
	if (!gpu->health_problems)
		return;
	gpumon_words_health(gpu->health_problems, &gpu->health, words, sizeof words);
	/* one problem a line, so that a narrow terminal cuts none of them short */
	for (char *part = words, *next; part && *part; part = next) {
		next = strstr(part, "; ");
		if (next) {
			*next = 0;
			next += 2;
		}
		snprintf(msg, sizeof msg, "  ! memory health: %s", part);
		line(st, "1;31", msg);
	}
}

/* A MIG device, under its GPU: its profile, instance ids, UUID and its own memory (utilisation,
 * temperature and power are the GPU's, shown above). */
static void mig_block(const show_gpu *gpu, const show_style *st)
{
	const gpumon_device_info *d = &gpu->info;
	char what[64], ids[64];
	snprintf(what, sizeof what, "MIG %s", d->mig_profile[0] ? d->mig_profile : "n/a");
	snprintf(ids, sizeof ids, "GPU %u  gi %u ci %u", d->parent, d->gpu_instance_id, d->compute_instance_id);
	struct part parts[] = {{what, C_NAME, 0}, {ids, NULL, 2}, {(d->present & GPUMON_INFO_UUID) ? d->uuid : "n/a", NULL, 1}};
	put_parts(st, "  ", parts, 3, "  ");
	if (gpu->status != GPUMON_OK) {
		char msg[300];
		snprintf(msg, sizeof msg, "    memory n/a (%s)", gpu->status == GPUMON_E_LOST ? "lost" : gpu->error);
		line(st, NULL, msg);
		return;
	}
	memory_line(st, &gpu->s, "    ");
}

static void gpu_block(const show_gpu *gpu, const show_style *st)
{
	const gpumon_device_info *d = &gpu->info;
	if (d->mig) {
		mig_block(gpu, st);
		return;
	}
	char idx[16], name[sizeof d->name * 4];
	snprintf(idx, sizeof idx, "GPU %u", d->index);
	cli_safe_text(name, sizeof name, (d->present & GPUMON_INFO_NAME) ? d->name : "n/a");
	struct part parts[] = {{idx, C_INDEX, 0},
			       {name, C_NAME, 0},
			       {(d->present & GPUMON_INFO_PCI_BUS_ID) ? d->pci_bus_id : "n/a", NULL, 1},
			       {(d->present & GPUMON_INFO_UUID) ? d->uuid : "n/a", NULL, 2}};
	put_parts(st, "", parts, 4, "  ");
	if (gpu->status == GPUMON_E_LOST) {
		line(st, "1;31", "  GPU is lost: it has fallen off the bus or needs a reset");
		return;
	}
	if (gpu->status != GPUMON_OK) {
		char msg[300];
		snprintf(msg, sizeof msg, "  memory n/a (%s)", gpu->error);
		line(st, NULL, msg);
		return;
	}
	memory_line(st, &gpu->s, "  ");
	figures_line(st, &gpu->s);
	health_line(st, gpu);
}

/* ---- processes -------------------------------------------------------------------------------- */

/* Which columns of the process table fit, and how wide the owner is. */
struct columns {
	int gpu, user, owner; /* owner: its width, 0 when left out */
};

static int fixed_cols(const struct columns *c)
{
	return 2 + (c->gpu ? 3 + 2 : 0) + PID_W + 2 + (c->user ? USER_W + 2 : 0) + MEM_W + 2 +
	       (c->owner ? c->owner + 2 : 0);
}

/* The command is cut first (down to CMD_MIN), then the owner narrowed and left out, then the
 * user, then the GPU; what is still too wide is cut at the end of the line. */
static struct columns choose_columns(const show_model *m, const show_style *st)
{
	struct columns c = {1, 1, 0};
	for (size_t i = 0; i < m->n_rows; i++) {
		int w = text_cols(st, m->rows[i].owner);
		if (w > c.owner)
			c.owner = w;
	}
	if (c.owner) {
		if (c.owner < 5)
			c.owner = 5; /* the header's word */
		if (c.owner > OWNER_MAX)
			c.owner = OWNER_MAX;
		int over = fixed_cols(&c) + CMD_MIN - st->width;
		if (over > 0)
			c.owner = c.owner - over >= OWNER_MIN ? c.owner - over : 0;
	}
	if (fixed_cols(&c) + CMD_MIN > st->width)
		c.user = 0;
	if (fixed_cols(&c) + CMD_MIN > st->width)
		c.gpu = 0;
	return c;
}

static void table_row(const show_style *st, const struct columns *c, const char *gpu, const char *pid,
		      const char *user, const char *mem, const char *mem_color, const char *owner, const char *cmd)
{
	pen p = pen_line(st);
	put(&p, NULL, "  ");
	if (c->gpu) {
		put_field(&p, C_INDEX, gpu, 3, 1);
		put(&p, NULL, "  ");
	}
	put_field(&p, NULL, pid, PID_W, 1);
	put(&p, NULL, "  ");
	if (c->user) {
		put_field(&p, C_USER, user, USER_W, 0);
		put(&p, NULL, "  ");
	}
	put_field(&p, mem_color, mem, MEM_W, 1);
	put(&p, NULL, "  ");
	if (c->owner) {
		put_field(&p, C_OWNER, owner, c->owner, 0);
		put(&p, NULL, "  ");
	}
	put(&p, NULL, cmd);
	end_line();
}

static void process_row(const show_style *st, const struct columns *c, const show_row *r)
{
	const gpumon_process *p = &r->p;
	char gpu[16], pid[16], mem[32], user[sizeof p->user * 4], cmd[sizeof p->cmdline * 4 + 16];
	size_t at = 0;
	snprintf(gpu, sizeof gpu, "%u", r->gpu);
	snprintf(pid, sizeof pid, "%u", p->pid);
	/* the mark before the command, so that cutting the command never cuts it */
	if ((p->flags & GPUMON_PROC_GRAPHICS) && !(p->flags & GPUMON_PROC_COMPUTE))
		at = (size_t)snprintf(cmd, sizeof cmd, "[graphics] ");
	/* another user's text: shown with its control characters escaped */
	cli_safe_text(user, sizeof user, (p->flags & GPUMON_PROC_USER_KNOWN) ? p->user : "n/a");
	/* a pid of another PID namespace: NVML's name as watch and query show it, the mark after it,
	   so that a narrow terminal cuts the mark, not the name */
	int foreign = !(p->flags & GPUMON_PROC_CMDLINE_KNOWN) && (p->flags & GPUMON_PROC_FOREIGN);
	cli_safe_text(cmd + at, sizeof cmd - at, (p->flags & GPUMON_PROC_CMDLINE_KNOWN) ? p->cmdline
					   : (p->flags & GPUMON_PROC_NAME_KNOWN) ? p->name
					   : foreign ? "" : "n/a");
	size_t end = strlen(cmd);
	if (foreign)
		snprintf(cmd + end, sizeof cmd - end, "%s(other PID namespace)", end > at ? "  " : "");
	if (p->flags & GPUMON_PROC_USED_KNOWN)
		cli_format_bytes(mem, sizeof mem, p->used_bytes);
	else
		snprintf(mem, sizeof mem, "n/a");
	table_row(st, c, gpu, pid, user, mem, (p->flags & GPUMON_PROC_USED_KNOWN) ? C_MEM : NULL, r->owner, cmd);
}

static void processes(const show_model *m, const show_style *st)
{
	static const char *const order[] = {"largest first", "by pid", "by user, then largest first",
					    "by GPU, then largest first"};
	char title[256], who[96] = "";
	int unsupported = 0;
	for (unsigned k = 0; k < m->n_gpus; k++)
		unsupported |= m->gpus[k].procs == SHOW_PROCS_UNSUPPORTED;
	if (m->user) {
		char u[80];
		snprintf(who, sizeof who, " of %s", cli_safe_text(u, sizeof u, m->user));
	}
	snprintf(title, sizeof title, "Processes%s holding GPU memory (%s)", who, order[m->sort]);
	end_line();
	line(st, NULL, title);
	if (m->n_rows == 0) {
		line(st, NULL, unsupported ? "  n/a: the driver does not list processes" : "  none");
		return;
	}
	struct columns c = choose_columns(m, st);
	table_row(st, &c, "GPU", "PID", "USER", "MEMORY", NULL, "OWNER", "COMMAND");
	for (size_t i = 0; i < m->n_rows; i++)
		process_row(st, &c, &m->rows[i]);
}

void show_text(const show_model *m, const show_style *st)
{
	header(m, st);
	if (m->gpu_count == 0)
		line(st, NULL, "No NVIDIA GPU found.");
	for (unsigned k = 0; k < m->n_gpus; k++)
		gpu_block(&m->gpus[k], st);
	if (m->processes && m->n_gpus)
		processes(m, st);
}
