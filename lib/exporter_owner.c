/* SPDX-License-Identifier: MIT */
/* exporter_owner.c — the exporter's series that do not churn: every process's owner (Kubernetes
 * pod and container, Slurm job, container, else user; from gpumon_process.owner) and, for a
 * distributed worker, its rank made into labels once, and at each render the processes of each GPU
 * summed by owner and rank, so that jobs coming and going add no series while their owner stays.
 * Also the GPU of a framework sample, for its gpu/uuid. */
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "exporter.h"

#define ID_DIGITS 12 /* a container id as `docker ps` shows it */

/* Owner kinds, as the label owner_kind says them (docs/metrics.md) */
enum { K_POD, K_SLURM, K_CONTAINER, K_USER, K_UNRESOLVED };
static const char *const kind_names[] = {"pod", "slurm", "container", "user", "unresolved"};

/* The level the node knows, the most specific first; a pid of another PID namespace has no owner
 * the node can tell, and none is guessed. */
static int owner_kind(const gpumon_process *p)
{
	unsigned o = p->owner.present;
	if (o & GPUMON_OWNER_POD)
		return K_POD;
	if (o & GPUMON_OWNER_SLURM)
		return K_SLURM;
	if (o & GPUMON_OWNER_CONTAINER)
		return K_CONTAINER;
	if ((o & GPUMON_OWNER_UNRESOLVED) || (p->flags & GPUMON_PROC_FOREIGN))
		return K_UNRESOLVED;
	return K_USER;
}

static void label(struct prom_buf *b, const char *name, const char *value, size_t max)
{
	gpumon__prom_printf(b, ",%s=\"", name);
	gpumon__prom_label_value(b, value, max);
	gpumon__prom_puts(b, "\"");
}

/* A string of the buffer, or NULL (out of memory); the buffer is freed. */
static char *take_string(struct prom_buf *b)
{
	char *s = b->p && !b->failed ? strdup(b->p) : NULL;
	gpumon__prom_free(b);
	return s;
}

int gpumon__exporter_owner_labels(const gpumon_exporter *e, struct eproc *ep, const gpumon_process *p)
{
	(void)e;
	const gpumon_owner *o = &p->owner;
	int k = owner_kind(p);
	struct prom_buf b = {0};
	gpumon__prom_printf(&b, "owner_kind=\"%s\"", kind_names[k]);
	int named = k == K_POD && (o->present & GPUMON_OWNER_POD_NAMES);
	if (named) {
		label(&b, "namespace", o->k8s_namespace, sizeof o->k8s_namespace);
		label(&b, "pod", o->pod, sizeof o->pod);
		label(&b, "container", o->container, sizeof o->container);
	} else if (k == K_POD) { /* the pod's names are not readable here (no /var/log/pods) */
		label(&b, "pod_uid", o->pod_uid, sizeof o->pod_uid);
	} else if (k == K_SLURM) { /* the job, its steps together: a step per srun would churn */
		label(&b, "slurm_job", o->slurm_job, sizeof o->slurm_job);
	} else if (k == K_CONTAINER) {
		char id[ID_DIGITS + 1];
		size_t n = strnlen(o->container_id, ID_DIGITS);
		memcpy(id, o->container_id, n);
		id[n] = 0;
		label(&b, "container_id", id, sizeof id);
	}
	if (k != K_UNRESOLVED)
		label(&b, "user", (p->flags & GPUMON_PROC_USER_KNOWN) ? p->user : "", sizeof p->user);
	/* each rank of a distributed job a series of its own, which the same ranks of the owner's next
	   job take again; a process that is no worker keeps the owner's series, without the label. The
	   job's id is not a label: a new one each run would be a new series each run */
	int rank = gpumon_process_rank(p);
	if (rank >= 0)
		gpumon__prom_printf(&b, ",rank=\"%d\"", rank);
	if (!(ep->pub.owner = take_string(&b)))
		return GPUMON_E_NOMEM;
	if (!named)
		return GPUMON_OK;
	label(&b, "namespace", o->k8s_namespace, sizeof o->k8s_namespace);
	label(&b, "pod", o->pod, sizeof o->pod);
	label(&b, "container", o->container, sizeof o->container);
	return (ep->pub.dcgm_owner = take_string(&b)) ? GPUMON_OK : GPUMON_E_NOMEM;
}

static int by_gpu_owner(const void *a, const void *b)
{
	const struct prom_proc *x = *(const struct prom_proc *const *)a, *y = *(const struct prom_proc *const *)b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return strcmp(x->owner, y->owner);
}

static int by_key(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Whether the model's verdict on process p alerts (what gpumon_model_process_verdict says). */
static int alerts(const gpumon_model *m, const struct mproc *p)
{
	gpumon_leak_result r;
	/* a verdict that alerts has given its alert (a live model checks at every point): the flag
	   saves evaluating the thousands that never did; a run's model gives no process alerts */
	if (!p->present || !p->leak || (!p->alerted && !m->kind_run))
		return 0;
	gpumon_leak_result_get(p->leak, &r);
	return r.alert;
}

/* Marks the processes whose leak verdict alerts, from one pass over the model's processes (a
 * lookup per process would cost the square of thousands). */
static void mark_leaks(const gpumon_exporter *e, const struct prom_proc *const *shown, size_t n)
{
	const gpumon_model *m = e->model;
	size_t nalert = 0;
	for (size_t i = 0; i < n; i++)
		((struct prom_proc *)shown[i])->owner_leak = 0;
	for (size_t i = 0; m && i < m->nprocs; i++)
		nalert += alerts(m, &m->procs[i]) != 0;
	if (!nalert)
		return;
	uint64_t *keys = malloc(nalert * sizeof *keys);
	if (!keys) /* out of memory: the flags stay 0 this time, the next render tries again */
		return;
	size_t k = 0;
	for (size_t i = 0; i < m->nprocs && k < nalert; i++) {
		const struct mproc *p = &m->procs[i];
		if (alerts(m, p))
			keys[k++] = (uint64_t)p->dev << 32 | p->pid;
	}
	qsort(keys, k, sizeof *keys, by_key);
	for (size_t i = 0; i < n; i++) {
		uint64_t key = (uint64_t)shown[i]->dev << 32 | shown[i]->pid;
		((struct prom_proc *)shown[i])->owner_leak = bsearch(&key, keys, k, sizeof *keys, by_key) != NULL;
	}
	free(keys);
}

/* dcgm-exporter's pod labels for each GPU: those of the one named pod container holding every
 * process on it (as dcgm-exporter gives a GPU the pod it is assigned to), else none. */
static void dcgm_owners(gpumon_exporter *e, const struct prom_proc *const *sorted, size_t n)
{
	for (unsigned d = 0; d < e->ngpus; d++)
		e->gpus[d].dcgm_owner = "";
	for (size_t i = 0; i < n;) {
		unsigned dev = sorted[i]->dev;
		const char *pod = sorted[i]->dcgm_owner;
		size_t j = i;
		for (; j < n && sorted[j]->dev == dev; j++)
			if (!pod || !sorted[j]->dcgm_owner || strcmp(pod, sorted[j]->dcgm_owner))
				pod = NULL;
		if (pod && dev < e->ngpus)
			e->gpus[dev].dcgm_owner = pod;
		i = j;
	}
}

size_t gpumon__exporter_owners(gpumon_exporter *e, const struct prom_proc *const *shown, size_t n)
{
	if (!n) {
		dcgm_owners(e, shown, 0);
		return 0;
	}
	if (n > e->cap_owners) {
		struct prom_owner *o = realloc(e->owners, n * sizeof *o);
		if (!o)
			return 0;
		e->owners = o;
		e->cap_owners = n;
	}
	memcpy(e->oorder, shown, n * sizeof *shown);
	if (n > 1)
		qsort(e->oorder, n, sizeof *e->oorder, by_gpu_owner);
	mark_leaks(e, e->oorder, n);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct prom_proc *p = e->oorder[i];
		struct prom_owner *o = &e->owners[k ? k - 1 : 0];
		if (!k || o->dev != p->dev || strcmp(o->labels, p->owner)) {
			o = &e->owners[k++];
			*o = (struct prom_owner){.dev = p->dev, .labels = p->owner};
		}
		o->nprocs++;
		o->leak_alert |= p->owner_leak;
		if (p->used_known) {
			o->used_known = 1;
			/* a GPU's memory fits in 63 bits: so does a sum of what its processes hold */
			o->used_bytes += p->used_bytes;
		}
	}
	dcgm_owners(e, e->oorder, n);
	return k;
}

int gpumon__exporter_framework_gpu(const gpumon_exporter *e, const gpumon_framework_sample *f)
{
	/* with CUDA_VISIBLE_DEVICES the run model maps the index as gpumon report does */
	if (e->model && e->model->cvd) {
		int d = gpumon__model_map_device(e->model, f->pid, f->device);
		return d >= 0 && (unsigned)d < e->ngpus ? d : -1;
	}
	/* without it, CUDA's order may differ from NVML's: only a process NVML lists on one GPU, or a
	   machine of one GPU, tells which */
	int only = -1;
	for (size_t i = 0; i < e->nprocs; i++)
		if (e->procs[i].pub.pid == f->pid)
			only = only == -1 ? (int)e->procs[i].pub.dev : -2;
	if (only >= 0)
		return only;
	return e->ngpus == 1 ? 0 : -1;
}
