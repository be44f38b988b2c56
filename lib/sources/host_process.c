/* SPDX-License-Identifier: MIT */
/* host_process.c — the one reader of /proc/PID/stat, /proc/PID/status and /proc/PID/environ for any
 * process on the machine: its CPU time, resident memory, start time, user and, for a distributed
 * worker, its rank from the launcher's variables; and the process tree below a pid. Every read goes
 * to GPUMON_PROC_ROOT when set, so a front end in a container sees the host's processes. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../internal.h"

#define DEFAULT_MAX_PROCS 1000000
#define ENV_CHUNK 4096             /* one read of the environment */
#define ENV_ENTRY_MAX 4096         /* an entry longer than this is no variable we want: skipped */
#define ENV_READ_MAX (16u << 20)   /* an environment is read this far at most */

/* Parses a decimal number of at most 20 digits at s..end; returns the end, or NULL when none. */
static const char *parse_u64(const char *s, const char *end, uint64_t *v)
{
	const char *p = s;
	uint64_t x = 0;
	while (p < end && *p >= '0' && *p <= '9') {
		unsigned d = (unsigned)(*p - '0');
		if (x > (UINT64_MAX - d) / 10)
			return NULL;
		x = x * 10 + d;
		p++;
	}
	*v = x;
	return p == s ? NULL : p;
}

int gpumon__proc_stat_parse(const char *buf, size_t len, struct gpumon__proc_stat *out)
{
	const char *end = buf + len, *p, *close = NULL;
	uint64_t v;
	p = parse_u64(buf, end, &v);
	if (!p || v == 0 || v > UINT_MAX || end - p < 2 || p[0] != ' ' || p[1] != '(')
		return -1;
	memset(out, 0, sizeof *out);
	out->pid = (unsigned)v;
	for (const char *q = p + 2; q < end; q++)
		if (*q == ')')
			close = q;
	/* after the name: " S PPID ..." (the state is one character) */
	if (!close || end - close < 5 || close[1] != ' ' || close[3] != ' ')
		return -1;
	out->state = close[2];
	/* fields 4 (ppid) to 24 (rss), proc(5); 5 to 13 and 16 to 21 are not used but must be numbers
	   (a few, such as priority, may be negative) */
	uint64_t f[25];
	p = close + 4;
	for (int k = 4; k <= 24; k++) {
		if (k > 4) {
			if (p >= end || *p != ' ')
				return -1;
			p++;
		}
		if (p < end && *p == '-' && k >= 5)
			p++;
		if (!(p = parse_u64(p, end, &f[k])))
			return -1;
	}
	if (p < end && *p != ' ' && *p != '\n')
		return -1;
	if (f[4] > UINT_MAX)
		return -1;
	out->ppid = (unsigned)f[4];
	out->utime = f[14];
	out->stime = f[15];
	out->start = f[22];
	out->rss_pages = f[24];
	return 0;
}

int gpumon__proc_stat_read(unsigned pid, struct gpumon__proc_stat *out)
{
	/* 52 fields of up to 20 digits and a name of up to 64 bytes fit */
	char buf[2048];
	ssize_t n = gpumon__procfs_read(pid, "stat", buf, sizeof buf);
	if (n <= 0 || gpumon__proc_stat_parse(buf, (size_t)n, out) != 0 || out->pid != pid)
		return -1;
	return 0;
}

/* Whether the proc root numbers pids as our PID namespace does: /proc itself, or a /proc whose
 * `self` link names our pid (the kernel resolves it in the namespace of that mount). */
static int root_is_own(void)
{
	const char *root = gpumon__proc_root();
	if (!strcmp(root, "/proc"))
		return 1;
	char path[4096], link[32];
	if ((size_t)snprintf(path, sizeof path, "%s/self", root) >= sizeof path)
		return 0;
	ssize_t n = readlink(path, link, sizeof link - 1);
	if (n <= 0)
		return 0;
	link[n] = 0;
	char buf[32];
	snprintf(buf, sizeof buf, "%ld", (long)getpid());
	return !strcmp(link, buf);
}

/* ---- the environment of a distributed worker --------------------------------------------------- */

/* Which launcher's variables, strongest first (torchrun under srun has both its own and Slurm's). */
enum { L_TORCH, L_SLURM, L_OMPI, L_PMIX, L_COUNT };
enum { F_RANK, F_LOCAL, F_WORLD, F_NODE, F_COUNT };

struct env_vars {
	int v[L_COUNT][F_COUNT];       /* -1: not set */
	char job[L_COUNT][64];         /* "" : not set */
	unsigned seen;                 /* 1 << L_*: a variable of that launcher was set */
	char master_addr[64], master_port[8];
};

#define F_JOB (-1)
#define F_MASTER_ADDR (-2)
#define F_MASTER_PORT (-3)

static const struct {
	const char *name;
	int launcher, field; /* field F_JOB: the job id; F_MASTER_*: the rendezvous */
} env_names[] = {
	{"RANK", L_TORCH, F_RANK},
	{"LOCAL_RANK", L_TORCH, F_LOCAL},
	{"WORLD_SIZE", L_TORCH, F_WORLD},
	{"GROUP_RANK", L_TORCH, F_NODE},
	{"TORCHELASTIC_RUN_ID", L_TORCH, F_JOB},
	{"MASTER_ADDR", L_TORCH, F_MASTER_ADDR},
	{"MASTER_PORT", L_TORCH, F_MASTER_PORT},
	{"SLURM_PROCID", L_SLURM, F_RANK},
	{"SLURM_LOCALID", L_SLURM, F_LOCAL},
	{"SLURM_NTASKS", L_SLURM, F_WORLD},
	{"SLURM_NODEID", L_SLURM, F_NODE},
	{"SLURM_JOB_ID", L_SLURM, F_JOB},
	{"OMPI_COMM_WORLD_RANK", L_OMPI, F_RANK},
	{"OMPI_COMM_WORLD_LOCAL_RANK", L_OMPI, F_LOCAL},
	{"OMPI_COMM_WORLD_SIZE", L_OMPI, F_WORLD},
	{"PMIX_RANK", L_PMIX, F_RANK},
};

/* A rank or size: decimal digits only, at most INT_MAX; -1 otherwise. */
static int parse_count(const char *s, size_t len)
{
	uint64_t v = 0;
	const char *end = parse_u64(s, s + len, &v);
	return end == s + len && v <= INT_MAX ? (int)v : -1;
}

/* One NAME=VALUE entry of len bytes (not NUL-terminated). */
static void env_entry(struct env_vars *e, const char *s, size_t len)
{
	const char *eq = memchr(s, '=', len);
	if (!eq || eq == s)
		return;
	size_t nlen = (size_t)(eq - s), vlen = len - nlen - 1;
	for (size_t i = 0; i < sizeof env_names / sizeof env_names[0]; i++) {
		if (strlen(env_names[i].name) != nlen || memcmp(env_names[i].name, s, nlen) != 0)
			continue;
		int l = env_names[i].launcher, f = env_names[i].field;
		if (f < 0) {
			/* an id or address is shown and written: printable ASCII only, and torchrun's
			   "none" is none; the rendezvous alone says no worker */
			char *dst = f == F_JOB ? e->job[l] : f == F_MASTER_ADDR ? e->master_addr : e->master_port;
			size_t cap = f == F_JOB ? sizeof e->job[l] : f == F_MASTER_ADDR ? sizeof e->master_addr
											 : sizeof e->master_port;
			int ok = vlen > 0 && vlen < cap && !(vlen == 4 && !memcmp(eq + 1, "none", 4));
			for (size_t k = 0; ok && k < vlen; k++)
				ok = eq[1 + k] > ' ' && eq[1 + k] < 127 && (f != F_MASTER_PORT || (eq[1 + k] >= '0' && eq[1 + k] <= '9'));
			if (ok) {
				memcpy(dst, eq + 1, vlen);
				dst[vlen] = 0;
				if (f == F_JOB)
					e->seen |= 1u << l;
			}
		} else {
			int v = parse_count(eq + 1, vlen);
			if (v >= 0) {
				e->v[l][env_names[i].field] = v;
				e->seen |= 1u << l;
			}
		}
		return;
	}
}

/* Reads the pid's environment entry by entry in a fixed buffer; 0, or -1 when it cannot be read
 * (another user's process, gone, not a file). */
static int env_read(unsigned pid, struct env_vars *e)
{
	int fd = gpumon__procfs_open(pid, "environ");
	if (fd < 0)
		return -1;
	char *buf = malloc(ENV_ENTRY_MAX + ENV_CHUNK);
	if (!buf) {
		close(fd);
		return -1;
	}
	size_t have = 0, total = 0;
	int skipping = 0, rc = 0; /* skipping: the rest of an entry too long to keep */
	for (;;) {
		ssize_t r = read(fd, buf + have, ENV_CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = -1;
		if (r <= 0)
			break;
		total += (size_t)r;
		have += (size_t)r;
		size_t start = 0;
		for (char *z; (z = memchr(buf + start, 0, have - start)) != NULL; start = (size_t)(z - buf) + 1) {
			if (!skipping)
				env_entry(e, buf + start, (size_t)(z - buf) - start);
			skipping = 0;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (have > ENV_ENTRY_MAX) {
			skipping = 1;
			have = 0;
		}
		if (total >= ENV_READ_MAX)
			break;
	}
	if (rc == 0 && have && !skipping) /* a last entry without its NUL */
		env_entry(e, buf, have);
	free(buf);
	close(fd);
	return rc;
}

int gpumon__env_rank(unsigned pid, gpumon_rank *out)
{
	struct env_vars e;
	memset(&e, 0, sizeof e);
	memset(e.v, 0xff, sizeof e.v); /* -1 each */
	memset(out, 0, sizeof *out);
	out->rank = out->local_rank = out->world_size = out->node_rank = -1;
	if (env_read(pid, &e) != 0)
		return -1;
	static const char *const names[L_COUNT] = {"torchrun", "slurm", "mpi", "mpi"};
	for (int l = 0; l < L_COUNT; l++)
		if (e.seen & (1u << l)) {
			out->rank = e.v[l][F_RANK];
			out->local_rank = e.v[l][F_LOCAL];
			out->world_size = e.v[l][F_WORLD];
			out->node_rank = e.v[l][F_NODE];
			snprintf(out->launcher, sizeof out->launcher, "%s", names[l]);
			break;
		}
	/* torchrun's id when it has one, else the Slurm job it runs in */
	for (int l = 0; l < L_COUNT; l++)
		if (e.job[l][0]) {
			snprintf(out->job_id, sizeof out->job_id, "%s", e.job[l]);
			break;
		}
	if (e.master_addr[0] && out->launcher[0])
		snprintf(out->master, sizeof out->master, "%s%s%s", e.master_addr, e.master_port[0] ? ":" : "",
			 e.master_port);
	return 0;
}

/* ---- the public calls --------------------------------------------------------------------------- */

static void fill_user(gpumon_host_process *h, unsigned pid)
{
	char status[4096];
	if (gpumon__procfs_read(pid, "status", status, sizeof status) <= 0)
		return;
	const char *line = strstr(status, "\nUid:");
	if (!line || sscanf(line + 5, "%u", &h->uid) != 1)
		return;
	gpumon__user_name(h->uid, h->user, sizeof h->user);
	h->present |= GPUMON_HOST_USER;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int gpumon_host_process_read(unsigned pid, unsigned fields, gpumon_host_process *out)
{
	gpumon_host_process h;
	if (!out || out->size < offsetof(gpumon_host_process, present) + sizeof out->present ||
	    out->size > sizeof h || pid == 0 || (fields & ~(unsigned)(GPUMON_HOST_USER | GPUMON_HOST_RANK)))
		return GPUMON_E_INVAL;
	unsigned size = out->size;
	memset(&h, 0, sizeof h);
	h.size = size;
	h.pid = pid;
	h.rank.rank = h.rank.local_rank = h.rank.world_size = h.rank.node_rank = -1;
	struct gpumon__proc_stat st;
	if (gpumon__proc_stat_read(pid, &st) != 0)
		return GPUMON_E_NOT_FOUND;
	long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	hz = hz > 0 ? hz : 100;
	page = page > 0 ? page : 4096;
	h.present = GPUMON_HOST_STAT;
	h.ppid = st.ppid;
	h.state = st.state;
	h.start_ticks = st.start;
	h.cpu_ns = (st.utime + st.stime) * (1000000000u / (uint64_t)hz);
	h.rss_bytes = st.rss_pages * (uint64_t)page;
	/* boot time on the wall clock: now less the time since boot, as both clocks say now */
	uint64_t wall = clock_ns(CLOCK_REALTIME), boot = clock_ns(CLOCK_BOOTTIME);
	uint64_t since_boot = st.start / (uint64_t)hz * 1000000000u + st.start % (uint64_t)hz * (1000000000u / (uint64_t)hz);
	if (wall > boot)
		h.start_wall_ns = wall - boot + since_boot;
	if (root_is_own())
		h.present |= GPUMON_HOST_OWN_PIDS;
	if (fields & GPUMON_HOST_USER)
		fill_user(&h, pid);
	if ((fields & GPUMON_HOST_RANK) && gpumon__env_rank(pid, &h.rank) == 0)
		h.present |= GPUMON_HOST_RANK;
	memcpy(out, &h, size);
	return 0;
}

/* Every (pid, ppid) of the proc root, at most max; returns the count, or a negative status. */
struct pair {
	unsigned pid, ppid;
};

static int is_pid_name(const char *s)
{
	if (!*s || strlen(s) > 10)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int scan_all(struct pair **out, size_t *count, size_t max)
{
	DIR *d = opendir(gpumon__proc_root());
	if (!d)
		return GPUMON_E_IO;
	struct pair *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max) {
		struct gpumon__proc_stat st;
		unsigned long pid;
		if (!is_pid_name(e->d_name) || (pid = strtoul(e->d_name, NULL, 10)) == 0 || pid > UINT_MAX ||
		    gpumon__proc_stat_read((unsigned)pid, &st) != 0)
			continue; /* not a process, or gone since the listing */
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 512;
			struct pair *nv = nc <= SIZE_MAX / sizeof *nv ? realloc(v, nc * sizeof *nv) : NULL;
			if (!nv) {
				free(v);
				closedir(d);
				return GPUMON_E_NOMEM;
			}
			v = nv;
			cap = nc;
		}
		v[n].pid = st.pid;
		v[n++].ppid = st.ppid;
	}
	closedir(d);
	*out = v;
	*count = n;
	return 0;
}

static int cmp_pid(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

static int cmp_ppid(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	return x->ppid < y->ppid ? -1 : x->ppid > y->ppid;
}

/* Index of the first pair whose parent is ppid in v (sorted by ppid), or n. */
static size_t first_child(const struct pair *v, size_t n, unsigned ppid)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].ppid < ppid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int gpumon_host_process_tree(unsigned root, size_t max_procs, unsigned **pids, size_t *count)
{
	if (!pids || !count || root == 0)
		return GPUMON_E_INVAL;
	*pids = NULL;
	*count = 0;
	/* the caller signals what this returns: pids of another namespace would reach other processes */
	if (!root_is_own())
		return GPUMON_E_NOT_SUPPORTED;
	struct pair *v = NULL;
	size_t n = 0;
	int rc = scan_all(&v, &n, max_procs ? max_procs : DEFAULT_MAX_PROCS);
	if (rc != 0)
		return rc;
	unsigned *t = malloc((n + 1) * sizeof *t);
	if (!t) {
		free(v);
		return GPUMON_E_NOMEM;
	}
	size_t tn = 0;
	t[tn++] = root;
	qsort(v, n, sizeof *v, cmp_ppid);
	/* the queue is t itself; each pid is queued once since a pid has one parent, and the walk stops
	   at n + 1 entries whatever /proc said (a pid reused mid-scan cannot loop it) */
	for (size_t head = 0; head < tn; head++) {
		unsigned p = t[head];
		for (size_t i = first_child(v, n, p); i < n && v[i].ppid == p && tn <= n; i++)
			if (v[i].pid != root && v[i].pid != p)
				t[tn++] = v[i].pid;
	}
	free(v);
	qsort(t, tn, sizeof *t, cmp_pid);
	size_t w = 0; /* drop duplicates a racing scan could produce */
	for (size_t i = 0; i < tn; i++)
		if (w == 0 || t[w - 1] != t[i])
			t[w++] = t[i];
	*pids = t;
	*count = w;
	return 0;
}
