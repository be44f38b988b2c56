/* SPDX-License-Identifier: MIT */
/* run_inside.c — the inside view of `gpumon run`: writes the embedded bootstrap where the job's
 * Python finds it first, chooses the gpumon package the bootstrap imports, and turns what the
 * monitor inside the job sends into records (the library reads and encodes the figures and the
 * snapshot; this file only moves them). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpumon/gpumon.h>

#include "cli.h"
#include "inside_bootstrap.h" /* generated from python/gpumon/_bootstrap.py (cmake/embed.cmake) */
#include "run_inside.h"
#include "run_socket.h"
#include "run_state.h"


#define MODULE "gpumon/_gpumon.abi3.so" /* a package directory holds it once built */

/* ---- the package the bootstrap imports ----------------------------------------------------------- */

static int exists(const char *dir, const char *file)
{
	char path[PATH_MAX];
	return snprintf(path, sizeof path, "%s/%s", dir, file) < (int)sizeof path && access(path, R_OK) == 0;
}

/* The build tree's python directory, when this program is the build tree's. */
static int from_build_tree(const char *exe, char *out, size_t len)
{
#ifdef GPUMON_BUILD_DIR
	char build[PATH_MAX];
	size_t n;
	if (!realpath(GPUMON_BUILD_DIR, build) || strncmp(exe, build, n = strlen(build)) || exe[n] != '/')
		return 0;
	if (!exists(GPUMON_BUILD_DIR "/python", MODULE))
		return 0;
	return snprintf(out, len, "%s", GPUMON_BUILD_DIR "/python") < (int)len;
#else
	(void)exe, (void)out, (void)len;
	return 0;
#endif
}

/* The parent of the Python package this program sits in: pip's wheel lays it out as
 * .../site-packages/gpumon/bin/gpumon (setup.py). */
static int from_wheel(const char *exe, char *out, size_t len)
{
	char pkg[PATH_MAX];
	const char *slash = strrchr(exe, '/');
	size_t n = slash ? (size_t)(slash - exe) : 0; /* exe's directory: .../gpumon/bin */
	if (n < 4 || n >= sizeof pkg || strncmp(exe + n - 4, "/bin", 4))
		return 0;
	memcpy(pkg, exe, n - 4);
	pkg[n - 4] = 0; /* .../gpumon */
	slash = strrchr(pkg, '/');
	if (!slash || strcmp(slash, "/gpumon") || !exists(pkg, "__init__.py") || !exists(pkg, "_gpumon.abi3.so"))
		return 0;
	n = (size_t)(slash - pkg);
	return snprintf(out, len, "%.*s", (int)(n ? n : 1), n ? pkg : "/") < (int)len;
}

/* The package `make install` put under the prefix this program was configured with. */
static int from_install(char *out, size_t len)
{
#ifdef GPUMON_PYTHON_INSTALL_PATH
	if (GPUMON_PYTHON_INSTALL_PATH[0] && exists(GPUMON_PYTHON_INSTALL_PATH, MODULE))
		return snprintf(out, len, "%s", GPUMON_PYTHON_INSTALL_PATH) < (int)len;
#endif
	(void)out, (void)len;
	return 0;
}

/* Where `import gpumon` finds this program's package, or 0. The program's own place decides first
 * (a build tree, a wheel): a package installed elsewhere may be another version. */
static int package_dir(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = 0;
		if (from_build_tree(exe, out, len) || from_wheel(exe, out, len))
			return 1;
	}
	return from_install(out, len);
}

/* ---- the bootstrap and the job's variables ---------------------------------------------------------- */

static int write_bootstrap(const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX];
	const unsigned char *p = inside_bootstrap_py;
	size_t left = inside_bootstrap_py_len;
	int e = 0;
	snprintf(path, sizeof path, "%s/sitecustomize.py", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		e = errno;
	while (fd >= 0 && left && !e) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			e = w < 0 ? errno : ENOSPC;
			break;
		}
		p += w;
		left -= (size_t)w;
	}
	if (fd >= 0 && close(fd) != 0 && !e)
		e = errno;
	if (e) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
		if (fd >= 0)
			unlink(path);
		return -1;
	}
	return 0;
}

/* "DIR" or "DIR:OLD" in new memory, or NULL. */
static char *python_path(const char *dir, char *const *envp)
{
	const char *old = NULL;
	for (size_t i = 0; envp && envp[i]; i++)
		if (!strncmp(envp[i], "PYTHONPATH=", 11))
			old = envp[i] + 11;
	size_t len = strlen(dir) + (old ? strlen(old) : 0) + 2;
	char *s = malloc(len);
	if (s)
		snprintf(s, len, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
	return s;
}

int run_inside_prepare(struct run_inside *in, const char *dir, char *const *envp, char *err, size_t errlen)
{
	char pkg[PATH_MAX];
	int have_pkg = package_dir(pkg, sizeof pkg);
	char *path = python_path(dir, envp), *pkgdir = have_pkg ? strdup(pkg) : NULL;
	in->on = 0;
	in->nvars = 0;
	if (!path || (have_pkg && !pkgdir)) {
		snprintf(err, errlen, "out of memory");
		free(path);
		free(pkgdir);
		return -1;
	}
	if (write_bootstrap(dir, err, errlen)) {
		free(path);
		free(pkgdir);
		return -1;
	}
	/* the names are gpumon's while the view is on: one inherited from an outer run is replaced */
	in->vars[in->nvars++] = (gpumon_env_var){(char *)"PYTHONPATH", path};
	in->vars[in->nvars++] = (gpumon_env_var){(char *)"GPUMON_INSIDE", (char *)"1"};
	in->vars[in->nvars++] = (gpumon_env_var){(char *)"GPUMON_INSIDE_HISTORY", in->history ? (char *)"1" : NULL};
	in->vars[in->nvars++] = (gpumon_env_var){(char *)"GPUMON_INSIDE_PYTHONPATH", pkgdir};
	in->on = 1;
	return 0;
}

void run_inside_free(struct run_inside *in)
{
	if (!in->nvars)
		return;
	free(in->vars[0].value);
	free(in->vars[3].value);
	in->nvars = 0;
}

/* ---- what the monitor inside the job sends ---------------------------------------------------------- */

static void emit_event(struct run *r, uint64_t t, const char *kind, const char *text)
{
	gpumon_record e = {.kind = GPUMON_REC_EVENT, .t_ns = t, .event_kind = kind, .event_text = text};
	run_emit(r, &e, 1);
}

/* An out-of-memory the monitor saw, with its allocator's figures then: an oom_figures event, a sign
 * of out-of-memory as an `oom` event is (within the same bound). */
static int on_oom(struct run *r, const struct run_msg *m, unsigned pid, uint64_t t)
{
	gpumon_oom_figures f = m->fig;
	f.pid = pid;
	f.device = -1;
	char *text = NULL;
	snprintf(f.framework, sizeof f.framework, "%s", m->framework);
	if (m->has & RUN_HAS_DEVICE) {
		f.device = m->device;
		f.known |= GPUMON_FIG_DEVICE;
	}
	int st = gpumon_oom_figures_encode(&f, &text);
	if (st != GPUMON_OK) /* refused (a framework name that is not printable ASCII): malformed; else
				out of memory: this sign is lost, the job goes on */
		return st == GPUMON_E_INVAL ? -1 : 0;
	if (r->oom_events < MAX_OOM_EVENTS) {
		r->oom_events++;
		emit_event(r, t, GPUMON_EVENT_OOM_FIGURES, text);
	}
	gpumon_free(text);
	return 0;
}

/* The allocator's snapshot, condensed inside the job: read back by the library (a text it cannot
 * read makes the line malformed), given the sender's pid when it names none, and recorded as the
 * library writes it. */
static int on_snapshot(struct run *r, const struct run_msg *m, unsigned pid, uint64_t t)
{
	gpumon_alloc_snapshot s;
	char *text = NULL;
	if (gpumon_snapshot_decode(m->snapshot, m->snapshot_len, &s) != GPUMON_OK)
		return -1;
	if (r->inside.snapshots >= RUN_INSIDE_MAX_SNAPSHOTS) {
		r->inside.snapshots_dropped++;
		return 0;
	}
	if (!s.pid)
		s.pid = pid;
	int st = gpumon_snapshot_encode(&s, &text);
	if (st != GPUMON_OK) /* what decode took, encode takes: out of memory, lost; the job goes on */
		return st == GPUMON_E_INVAL ? -1 : 0;
	r->inside.snapshots++;
	emit_event(r, t, GPUMON_EVENT_SNAPSHOT, text);
	gpumon_free(text);
	return 0;
}

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Whether the reason is said for the first time in this run (and remembers it). */
static int first_time(struct run_inside *in, const char *reason)
{
	uint64_t h = hash(reason);
	for (size_t i = 0; i < in->ntold; i++)
		if (in->told[i] == h)
			return 0;
	if (in->ntold == RUN_INSIDE_MAX_REASONS)
		return 0; /* a job that finds that many reasons has said enough */
	in->told[in->ntold++] = h;
	return 1;
}

/* What the bootstrap did in a process: a note always; "off" said on stderr too, once per reason (a
 * job of 8 workers that all turn it off for one reason says it once). */
static int on_inside(struct run *r, const struct run_msg *m, unsigned pid, uint64_t t)
{
	char text[64 + sizeof m->framework + sizeof m->fw_version + sizeof m->text];
	const char *reason = m->text[0] ? m->text : "no reason given";
	if (m->inside_on) {
		int n = snprintf(text, sizeof text, "inside view on for pid %u", pid);
		if (m->framework[0])
			snprintf(text + n, sizeof text - (size_t)n, ": %s%s%s", m->framework, m->fw_version[0] ? " " : "",
				 m->fw_version);
		emit_event(r, t, GPUMON_EVENT_NOTE, text);
		return 0;
	}
	snprintf(text, sizeof text, "inside view off for pid %u: %s", pid, reason);
	emit_event(r, t, GPUMON_EVENT_NOTE, text);
	if (first_time(&r->inside, reason) && !r->o->quiet) {
		char safe[4 * sizeof m->text + 1]; /* the job's words on gpumon's terminal: no escapes */
		fprintf(stderr, "%s: note: the inside view is off for pid %u: %s; the job runs untouched (gpumon run "
			"--no-inside turns the bootstrap off)\n", cli_progname, pid, cli_safe_text(safe, sizeof safe, reason));
	}
	return 0;
}

int run_inside_msg(struct run *r, const struct run_msg *m, unsigned pid, uint64_t t)
{
	switch (m->type) {
	case RUN_MSG_OOM: return on_oom(r, m, pid, t);
	case RUN_MSG_SNAPSHOT: return on_snapshot(r, m, pid, t);
	case RUN_MSG_INSIDE: return on_inside(r, m, pid, t);
	default: return 0;
	}
}
