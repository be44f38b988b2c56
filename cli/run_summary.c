/* SPDX-License-Identifier: MIT */
/* run_summary.c — the end summary of `gpumon run`: per GPU the job's peak and average against the
 * others', per reporting process the framework's peaks, its leak verdict and the memory NVML sees
 * that the framework does not account for, then the job's peak, the NVML verdict and, after an
 * out-of-memory death, the forensics (run_oom.c). */
#include <string.h>

#include "cli.h"
#include "run_oom.h"
#include "run_socket.h"
#include "run_state.h"
#include "run_verdict.h"

/* The GPU NVML lists pid on, when it is on exactly one; -1 otherwise. */
static int only_gpu_of(const struct run *r, unsigned pid)
{
	int dev = -1;
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid) {
			if (dev >= 0 && (unsigned)dev != r->procs[i].dev)
				return -1;
			dev = (int)r->procs[i].dev;
		}
	return dev;
}

void run_summary_fw_sample(struct run *r, struct fw_acc *f, const gpumon_framework_sample *s)
{
	unsigned dev;
	f->device = s->device;
	if (s->allocated_known) {
		f->last_allocated = s->allocated_bytes;
		f->last_allocated_known = 1;
	}
	if (!s->reserved_known)
		return;
	f->last_reserved = s->reserved_bytes;
	f->last_reserved_known = 1;
	if (s->device < 0) {
		/* no device said: the GPU NVML lists the process on, when that is one */
		int only = only_gpu_of(r, f->pid);
		if (only < 0) {
			snprintf(f->ua_why, sizeof f->ua_why, "the framework did not say its device");
			return;
		}
		dev = (unsigned)only;
	} else if (run_oom_map_device(r, s->device, &dev, f->ua_why, sizeof f->ua_why)) {
		return;
	}
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == f->pid && r->procs[i].dev == dev && r->procs[i].used) {
			f->ua_known = 1;
			f->ua_dev = dev;
			f->ua_nvml = r->procs[i].used;
			f->ua_reserved = s->reserved_bytes;
			return;
		}
	if (!f->ua_known)
		snprintf(f->ua_why, sizeof f->ua_why, "NVML lists no memory of pid %u on GPU %u", f->pid, dev);
}

static void print_unaccounted(FILE *out, const struct fw_acc *f)
{
	char a[32], b[32], c[32];
	if (!f->last_reserved_known)
		return;
	if (!f->ua_known) {
		fprintf(out, "  unaccounted (pid %u): unknown: %s\n", f->pid, f->ua_why);
		return;
	}
	cli_format_bytes(b, sizeof b, f->ua_nvml);
	cli_format_bytes(c, sizeof c, f->ua_reserved);
	if (f->ua_nvml >= f->ua_reserved)
		fprintf(out, "  unaccounted (pid %u): %s on GPU %u (NVML %s - reserved %s: CUDA context, "
			     "libraries' workspaces, other allocators)\n",
			f->pid, cli_format_bytes(a, sizeof a, f->ua_nvml - f->ua_reserved), f->ua_dev, b, c);
	else
		fprintf(out, "  unaccounted (pid %u): none seen on GPU %u (NVML %s, below reserved %s: the two "
			     "were read at different moments)\n", f->pid, f->ua_dev, b, c);
}

static void print_gpu(const struct run *r, unsigned d)
{
	char a[32], b[32], c[32];
	const struct gpu_acc *g = &r->gpus[d];
	gpumon_device_info info;
	if (!g->sampled || gpumon_device_info_get(r->g, d, &info) != GPUMON_OK)
		return;
	long double span = r->end_ns > r->start_ns ? (long double)(r->end_ns - r->start_ns) : 1;
	long double integral = g->job_integral;
	if (g->last_t && r->end_ns > g->last_t)
		integral += (long double)g->job_now * (long double)(r->end_ns - g->last_t);
	if (g->job_peak) {
		fprintf(stderr, "  GPU %u %s: job peak %s at %.2f s (other processes held %s then)", d, info.uuid,
			cli_format_bytes(a, sizeof a, g->job_peak), (double)(g->job_peak_t - r->start_ns) / 1e9,
			cli_format_bytes(b, sizeof b, g->others_at_peak));
		fprintf(stderr, ", average %s", cli_format_bytes(c, sizeof c, (uint64_t)(integral / span)));
	} else {
		/* not "0 B": the driver never listed a process of the job with memory here */
		fprintf(stderr, "  GPU %u %s: no process of the job held memory here", d, info.uuid);
	}
	fprintf(stderr, "; other processes peak %s", cli_format_bytes(c, sizeof c, g->others_peak));
	fprintf(stderr, "; GPU used peak %s\n", cli_format_bytes(b, sizeof b, g->used_peak));
}

void run_summary_print(const struct run *r, const char *path, const gpumon_sampler_stats *ss)
{
	char a[32], b[32], who[32];
	double secs = (double)(r->end_ns - r->start_ns) / 1e9;
	fprintf(stderr, "\ngpumon run summary\n  recording: %s%s\n", path,
		r->rec_failed ? " (stopped early, see above)" : "");
	fprintf(stderr, "  job exited with status %d after %.1f s\n", r->status, secs);
	for (unsigned d = 0; d < r->ngpus; d++)
		print_gpu(r, d);
	for (size_t i = 0; i < r->nfw; i++) {
		const struct fw_acc *f = &r->fw[i];
		if (!f->has_allocated && !f->has_reserved)
			continue;
		fprintf(stderr, "  framework peak (%s%s%s, pid %u):", f->framework[0] ? f->framework : "unknown",
			f->version[0] ? " " : "", f->version, f->pid);
		if (f->has_allocated)
			fprintf(stderr, " allocated %s", cli_format_bytes(a, sizeof a, f->peak_allocated));
		if (f->has_reserved)
			fprintf(stderr, " reserved %s", cli_format_bytes(b, sizeof b, f->peak_reserved));
		fprintf(stderr, "\n");
		print_unaccounted(stderr, f);
		snprintf(who, sizeof who, "pid %u", f->pid);
		run_verdict_print(stderr, f->leak, who, "the allocated floor");
	}
	run_oom_print(stderr, r);
	for (size_t i = 0; i < r->plan.nvars; i++)
		fprintf(stderr, "  set %s=%s\n", r->plan.vars[i].name, r->plan.vars[i].value);
	for (size_t i = 0; i < r->plan.nnotes; i++)
		fprintf(stderr, "  note: %s\n", r->plan.notes[i]);
	if (ss->dropped)
		fprintf(stderr, "  dropped records: %llu (the recording misses some samples)\n",
			(unsigned long long)ss->dropped);
	if (r->srv) {
		struct run_server_stats st;
		run_server_stats_get(r->srv, &st);
		if (st.malformed || st.unknown)
			fprintf(stderr, "  socket: %llu malformed and %llu unknown messages ignored\n",
				(unsigned long long)st.malformed, (unsigned long long)st.unknown);
	}
}
