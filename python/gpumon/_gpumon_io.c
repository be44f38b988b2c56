/* SPDX-License-Identifier: MIT */
/* _gpumon_io.c — the extension's writers: TfEvents (TensorBoard event files written by
 * libgpumon) and Recording (a gpumon SQLite recording of framework samples, device samples and
 * events). Each wraps one libgpumon object; errors become OSError naming the file. */
#include "_gpumon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- TfEvents ------------------------------------------------------------------------------------ */

typedef struct {
	PyObject_HEAD gpumon_tfevents *w;
} TfEventsObject;

static int tfe_init(PyObject *op, PyObject *args, PyObject *kw)
{
	TfEventsObject *self = (TfEventsObject *)op;
	static char *kwlist[] = {"logdir", "wall_time", NULL};
	const char *dir;
	double wall_time = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|d:TfEvents", kwlist, &dir, &wall_time))
		return -1;
	gpumon_tfevents_destroy(self->w);
	self->w = NULL;
	gpumon_tfevents *w = NULL;
	int rc = gpumon_tfevents_create(dir, wall_time, &w);
	if (rc) {
		gpx_raise(rc, gpumon_tfevents_errmsg(w));
		gpumon_tfevents_destroy(w);
		return -1;
	}
	self->w = w;
	return 0;
}

static void tfe_dealloc(PyObject *op)
{
	gpumon_tfevents_destroy(((TfEventsObject *)op)->w);
	gpx_free_self(op);
}

static gpumon_tfevents *tfe_get(TfEventsObject *self)
{
	if (!self->w)
		PyErr_SetString(PyExc_ValueError, "the TensorBoard writer is closed");
	return self->w;
}

static PyObject *tfe_scalar(PyObject *op, PyObject *args)
{
	const char *tag;
	long long step;
	double wall_time, value;
	gpumon_tfevents *w = tfe_get((TfEventsObject *)op);
	if (!w || !PyArg_ParseTuple(args, "sLdd:scalar", &tag, &step, &wall_time, &value))
		return NULL;
	int rc = gpumon_tfevents_scalar(w, tag, step, wall_time, (float)value);
	if (rc)
		return gpx_raise(rc, gpumon_tfevents_errmsg(w));
	Py_RETURN_NONE;
}

static PyObject *tfe_flush(PyObject *op, PyObject *unused)
{
	(void)unused;
	gpumon_tfevents *w = tfe_get((TfEventsObject *)op);
	if (!w)
		return NULL;
	int rc = gpumon_tfevents_flush(w);
	if (rc)
		return gpx_raise(rc, gpumon_tfevents_errmsg(w));
	Py_RETURN_NONE;
}

static PyObject *tfe_close(PyObject *op, PyObject *unused)
{
	(void)unused;
	TfEventsObject *self = (TfEventsObject *)op;
	if (!self->w)
		Py_RETURN_NONE;
	char msg[600];
	snprintf(msg, sizeof msg, "%s", gpumon_tfevents_errmsg(self->w));
	int rc = gpumon_tfevents_flush(self->w);
	gpumon_tfevents_destroy(self->w);
	self->w = NULL;
	if (rc)
		return gpx_raise(rc, msg);
	Py_RETURN_NONE;
}

static PyObject *tfe_path(PyObject *op, void *closure)
{
	(void)closure;
	TfEventsObject *self = (TfEventsObject *)op;
	if (!self->w)
		Py_RETURN_NONE;
	return PyUnicode_DecodeFSDefault(gpumon_tfevents_path(self->w));
}

static PyMethodDef tfe_methods[] = {
    {"scalar", tfe_scalar, METH_VARARGS,
     "scalar(tag, step, wall_time, value) -- append one scalar (stored as float32)."},
    {"flush", tfe_flush, METH_NOARGS, "flush() -- make what was written visible to readers."},
    {"close", tfe_close, METH_NOARGS, "close() -- flush and close the file (idempotent)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tfe_getset[] = {
    {"path", tfe_path, NULL, "the event file's path (None once closed)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot tfe_slots[] = {
    {Py_tp_doc, (void *)"TfEvents(logdir, wall_time=0) -- a new TensorBoard event file in logdir."},
    {Py_tp_init, (void *)tfe_init},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_dealloc, (void *)tfe_dealloc},
    {Py_tp_methods, tfe_methods},
    {Py_tp_getset, tfe_getset},
    {0, NULL},
};

static PyType_Spec tfe_spec = {"gpumon._gpumon.TfEvents", sizeof(TfEventsObject), 0, Py_TPFLAGS_DEFAULT,
			       tfe_slots};

/* ---- Recording ----------------------------------------------------------------------------------- */

typedef struct {
	PyObject_HEAD gpumon_recording *r;
	PyObject *nvml; /* the Nvml object whose handle the recording was created with (kept alive) */
	gpumon_process *procs; /* processes(): the last list of procs_dev, sorted by pid */
	size_t nprocs;
	unsigned procs_dev;
} RecordingObject;

static int rec_init(PyObject *op, PyObject *args, PyObject *kw)
{
	RecordingObject *self = (RecordingObject *)op;
	static char *kwlist[] = {"nvml", "path", "command", NULL};
	PyObject *nvml;
	const char *path, *command = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "Os|z:Recording", kwlist, &nvml, &path, &command))
		return -1;
	int is = PyObject_IsInstance(nvml, gpx_nvml_type);
	if (is <= 0) {
		if (!is)
			PyErr_SetString(PyExc_TypeError, "Recording needs an Nvml object");
		return -1;
	}
	gpumon *g = gpx_nvml_handle(nvml);
	if (!g)
		return -1;
	if (self->r) {
		gpumon_recording_destroy(self->r);
		self->r = NULL;
	}
	gpumon_free(self->procs); /* a new file starts with no process known */
	self->procs = NULL;
	self->nprocs = 0;
	gpumon_run_meta info = {.size = sizeof info, .kind = "run", .command = command, .job_pid = (unsigned)getpid()};
	gpumon_recording *r = NULL;
	int rc = gpumon_recording_create(g, path, &info, &r);
	if (rc) {
		char msg[600];
		snprintf(msg, sizeof msg, "%s", r ? gpumon_recording_errmsg(r) : "");
		gpumon_recording_destroy(r);
		gpx_raise(rc, msg);
		return -1;
	}
	self->r = r;
	Py_XDECREF(self->nvml);
	self->nvml = Py_NewRef(nvml);
	return 0;
}

static void rec_dealloc(PyObject *op)
{
	RecordingObject *self = (RecordingObject *)op;
	gpumon_recording_destroy(self->r);
	self->r = NULL;
	Py_CLEAR(self->nvml);
	gpumon_free(self->procs);
	self->procs = NULL;
	gpx_free_self(op);
}

static gpumon_recording *rec_get(RecordingObject *self)
{
	if (!self->r)
		PyErr_SetString(PyExc_ValueError, "the recording is closed");
	return self->r;
}

int gpx_opt_u64(PyObject *o, uint64_t *v, int *known, const char *what)
{
	*v = 0;
	*known = 0;
	if (o == Py_None)
		return 0;
	unsigned long long x = PyLong_AsUnsignedLongLong(o);
	if (x == (unsigned long long)-1 && PyErr_Occurred()) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "%s must be a non-negative integer or None", what);
		return -1;
	}
	*v = x;
	*known = 1;
	return 0;
}

int gpx_parse_framework(PyObject *args, gpumon_framework_sample *f)
{
	unsigned long long t_ns;
	unsigned pid;
	int device;
	long long step;
	PyObject *a, *res, *mx, *lim;
	const char *fw;
	int limit_known;
	if (!PyArg_ParseTuple(args, "KIiLOOOOs:framework", &t_ns, &pid, &device, &step, &a, &res, &mx, &lim, &fw))
		return -1;
	memset(f, 0, sizeof *f);
	f->t_ns = t_ns;
	f->pid = pid;
	f->device = device;
	f->step = step;
	snprintf(f->framework, sizeof f->framework, "%s", fw);
	if (gpx_opt_u64(a, &f->allocated_bytes, &f->allocated_known, "allocated") ||
	    gpx_opt_u64(res, &f->reserved_bytes, &f->reserved_known, "reserved") ||
	    gpx_opt_u64(mx, &f->max_allocated_bytes, &f->max_allocated_known, "max_allocated") ||
	    gpx_opt_u64(lim, &f->limit_bytes, &limit_known, "limit"))
		return -1;
	return 0;
}

/* framework(t_ns, pid, device, step, allocated, reserved, max_allocated, limit, framework) */
static PyObject *rec_framework(PyObject *op, PyObject *args)
{
	gpumon_recording *r = rec_get((RecordingObject *)op);
	gpumon_framework_sample f;
	if (!r || gpx_parse_framework(args, &f))
		return NULL;
	gpumon_record fr = {.kind = GPUMON_REC_FRAMEWORK, .t_ns = f.t_ns, .framework = f};
	int rc = gpumon_recording_write(r, &fr, 1);
	if (rc)
		return gpx_raise(rc, gpumon_recording_errmsg(r));
	Py_RETURN_NONE;
}

/* device(dev, t_ns, memory_api, total, used, free, reserved, util_gpu_pct): one device record */
static PyObject *rec_device(PyObject *op, PyObject *args)
{
	gpumon_recording *r = rec_get((RecordingObject *)op);
	unsigned dev, api;
	unsigned long long t_ns;
	PyObject *tot, *used, *fr, *res, *util;
	uint64_t v[5];
	int known[5];
	if (!r ||
	    !PyArg_ParseTuple(args, "IKIOOOOO:device", &dev, &t_ns, &api, &tot, &used, &fr, &res, &util))
		return NULL;
	PyObject *in[5] = {tot, used, fr, res, util};
	static const char *names[5] = {"total", "used", "free", "reserved", "util_gpu_pct"};
	for (int i = 0; i < 5; i++)
		if (gpx_opt_u64(in[i], &v[i], &known[i], names[i]))
			return NULL;
	gpumon_record rec;
	memset(&rec, 0, sizeof rec);
	rec.kind = GPUMON_REC_DEVICE;
	rec.dev = dev;
	rec.t_ns = t_ns;
	rec.sample.t_ns = t_ns;
	rec.sample.memory_api = api;
	if (known[0] && known[1] && known[2]) {
		rec.sample.present |= GPUMON_F_MEMORY;
		rec.sample.memory_total_bytes = v[0];
		rec.sample.memory_used_bytes = v[1];
		rec.sample.memory_free_bytes = v[2];
	}
	if (known[3]) {
		rec.sample.present |= GPUMON_F_MEM_RESERVED;
		rec.sample.memory_reserved_bytes = v[3];
	}
	if (known[4]) {
		rec.sample.present |= GPUMON_F_UTIL_GPU;
		rec.sample.util_gpu_pct = (unsigned)v[4];
	}
	rec.used_min_bytes = rec.used_max_bytes = v[1];
	rec.used_max_t_ns = t_ns;
	rec.interval_samples = 1;
	int rc = gpumon_recording_write(r, &rec, 1);
	if (rc)
		return gpx_raise(rc, gpumon_recording_errmsg(r));
	Py_RETURN_NONE;
}

static int proc_by_pid(const void *a, const void *b)
{
	unsigned x = ((const gpumon_process *)a)->pid, y = ((const gpumon_process *)b)->pid;
	return (x > y) - (x < y);
}

static int proc_record(gpumon_record *out, int kind, unsigned dev, uint64_t t_ns, const gpumon_process *p)
{
	memset(out, 0, sizeof *out);
	out->kind = kind;
	out->dev = dev;
	out->t_ns = t_ns;
	out->process = p; /* list or old: both outlive the write below */
	return 1;
}

/* processes(dev, t_ns) -> number of processes listed on dev, or None when the driver does not
 * list them: the device's processes (this one and everybody else's), written as the sampler writes
 * them: a record when one appears or its memory changes, and one when it is gone. */
static PyObject *rec_processes(PyObject *op, PyObject *args)
{
	RecordingObject *self = (RecordingObject *)op;
	gpumon_recording *r = rec_get(self);
	unsigned dev;
	unsigned long long t_ns;
	if (!r || !PyArg_ParseTuple(args, "IK:processes", &dev, &t_ns))
		return NULL;
	gpumon *g = gpx_nvml_handle(self->nvml);
	if (!g) { /* NVML was shut for this process (it stopped answering): no more lists */
		PyErr_Clear();
		Py_RETURN_NONE;
	}
	gpumon_process *list = NULL;
	size_t n = 0;
	int rc = gpumon_process_list(g, dev, &list, &n);
	if (rc) /* not listed this time (not supported, refused, a driver hiccup): nothing to record;
		   only a failed write is the recording's error */
		Py_RETURN_NONE;
	if (n > 1)
		qsort(list, n, sizeof *list, proc_by_pid);
	const gpumon_process *old = self->procs_dev == dev ? self->procs : NULL;
	size_t nold = old ? self->nprocs : 0;
	gpumon_record *recs = PyMem_Malloc((n + nold + 1) * sizeof *recs);
	if (!recs) {
		gpumon_free(list);
		return PyErr_NoMemory();
	}
	size_t i = 0, j = 0, k = 0;
	unsigned known = GPUMON_PROC_USED_KNOWN;
	while (i < n || j < nold) {
		if (j == nold || (i < n && list[i].pid < old[j].pid)) {
			k += proc_record(&recs[k], GPUMON_REC_PROCESS, dev, t_ns, &list[i++]);
		} else if (i == n || old[j].pid < list[i].pid) {
			k += proc_record(&recs[k], GPUMON_REC_PROCESS_GONE, dev, t_ns, &old[j++]);
		} else {
			if ((list[i].flags & known) != (old[j].flags & known) || list[i].used_bytes != old[j].used_bytes)
				k += proc_record(&recs[k], GPUMON_REC_PROCESS, dev, t_ns, &list[i]);
			i++;
			j++;
		}
	}
	rc = gpumon_recording_write(r, recs, k);
	PyMem_Free(recs);
	if (rc) {
		gpumon_free(list);
		return gpx_raise(rc, gpumon_recording_errmsg(r));
	}
	gpumon_free(self->procs);
	self->procs = list;
	self->nprocs = n;
	self->procs_dev = dev;
	return PyLong_FromSize_t(n);
}

static PyObject *rec_event(PyObject *op, PyObject *args)
{
	gpumon_recording *r = rec_get((RecordingObject *)op);
	unsigned long long t_ns;
	const char *kind, *text = NULL;
	if (!r || !PyArg_ParseTuple(args, "Ks|z:event", &t_ns, &kind, &text))
		return NULL;
	gpumon_record ev = {.kind = GPUMON_REC_EVENT, .t_ns = t_ns, .event_kind = kind, .event_text = text};
	int rc = gpumon_recording_write(r, &ev, 1);
	if (rc)
		return gpx_raise(rc, gpumon_recording_errmsg(r));
	Py_RETURN_NONE;
}

static PyObject *rec_commit(PyObject *op, PyObject *unused)
{
	(void)unused;
	gpumon_recording *r = rec_get((RecordingObject *)op);
	if (!r)
		return NULL;
	int rc = gpumon_recording_commit(r);
	if (rc)
		return gpx_raise(rc, gpumon_recording_errmsg(r));
	Py_RETURN_NONE;
}

static PyObject *rec_close(PyObject *op, PyObject *args)
{
	RecordingObject *self = (RecordingObject *)op;
	int status = -1;
	if (!PyArg_ParseTuple(args, "|i:close", &status))
		return NULL;
	if (!self->r)
		Py_RETURN_NONE;
	char msg[600];
	snprintf(msg, sizeof msg, "%s", gpumon_recording_errmsg(self->r));
	int rc = gpumon_recording_finish(self->r, status);
	gpumon_recording_destroy(self->r);
	self->r = NULL;
	Py_CLEAR(self->nvml);
	if (rc)
		return gpx_raise(rc, msg);
	Py_RETURN_NONE;
}

static PyMethodDef rec_methods[] = {
    {"framework", rec_framework, METH_VARARGS,
     "framework(t_ns, pid, device, step, allocated, reserved, max_allocated, limit, framework) -- a "
     "framework sample (None: unknown; limit: the allocator's cap, None or 0 when none is known)."},
    {"device", rec_device, METH_VARARGS,
     "device(dev, t_ns, memory_api, total, used, free, reserved, util_gpu_pct) -- a device sample."},
    {"processes", rec_processes, METH_VARARGS,
     "processes(dev, t_ns) -> the processes on the GPU (this one and others), recorded when they appear, "
     "change or leave; None when the driver did not list them this time."},
    {"event", rec_event, METH_VARARGS, "event(t_ns, kind, text=None) -- an event (marker, step, alert ...)."},
    {"commit", rec_commit, METH_NOARGS, "commit() -- commit what is pending."},
    {"close", rec_close, METH_VARARGS, "close(exit_status=-1) -- finish the file (idempotent)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot rec_slots[] = {
    {Py_tp_doc, (void *)"Recording(nvml, path, command=None) -- a new gpumon recording (SQLite)."},
    {Py_tp_init, (void *)rec_init},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_dealloc, (void *)rec_dealloc},
    {Py_tp_methods, rec_methods},
    {0, NULL},
};

static PyType_Spec rec_spec = {"gpumon._gpumon.Recording", sizeof(RecordingObject), 0, Py_TPFLAGS_DEFAULT,
			       rec_slots};

int gpx_add_io_types(PyObject *m)
{
	PyType_Spec *specs[2] = {&tfe_spec, &rec_spec};
	const char *names[2] = {"TfEvents", "Recording"};
	for (int i = 0; i < 2; i++) {
		PyObject *t = PyType_FromSpec(specs[i]);
		if (!t)
			return -1;
		if (PyModule_AddObject(m, names[i], t)) {
			Py_DECREF(t);
			return -1;
		}
	}
	return 0;
}
