/* SPDX-License-Identifier: MIT */
/* _gpumon_model.c — the extension's Model type (libgpumon's run model, fed record by record by
 * GPUMonitor, which asks it for alerts and the verdict instead of deciding them, as dicts of the
 * document's keys made from its typed answers), the library's words on them, and report(path), a
 * recording read into a model and returned as its JSON document, as `gpumon report --json`. */
#include "_gpumon.h"

#include <stdio.h>
#include <string.h>

typedef struct {
	PyObject_HEAD gpumon_model *m;
} ModelObject;

static int model_init(PyObject *op, PyObject *args, PyObject *kw)
{
	ModelObject *self = (ModelObject *)op;
	static char *kwlist[] = {"kind", "command", "job_pid", "limit", "headroom", "cuda_visible_devices",
				 "timelines", "oom_within_steps", NULL};
	const char *kind = NULL, *command = NULL, *cvd = NULL;
	unsigned job_pid = 0;
	unsigned long long limit = 0;
	double headroom = 0, oom_within = 0;
	int timelines = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|zzIKdzpd:Model", kwlist, &kind, &command, &job_pid, &limit,
					 &headroom, &cvd, &timelines, &oom_within))
		return -1;
	if (!(headroom >= 0 && headroom < 1)) {
		char msg[96];
		snprintf(msg, sizeof msg, "headroom must be a share of the GPU's memory in [0, 1), got %g", headroom);
		PyErr_SetString(PyExc_ValueError, msg);
		return -1;
	}
	gpumon_model_destroy(self->m);
	self->m = NULL;
	gpumon_run_meta meta = {.size = sizeof meta, .kind = kind, .command = command, .job_pid = job_pid,
				.exit_status = -1};
	gpumon_model_config cfg = GPUMON_CONFIG_INIT(gpumon_model_config);
	cfg.flags = timelines ? GPUMON_MODEL_TIMELINES : 0;
	cfg.meta = &meta;
	cfg.limit_bytes = limit;
	cfg.cuda_visible_devices = cvd;
	cfg.headroom_share = headroom;
	cfg.oom_within_steps = oom_within;
	int rc = gpumon_model_create(&cfg, &self->m);
	if (rc) {
		gpx_raise(rc, "could not create the run model");
		return -1;
	}
	return 0;
}

static void model_dealloc(PyObject *op)
{
	gpumon_model_destroy(((ModelObject *)op)->m);
	gpx_free_self(op);
}

static gpumon_model *model_get(PyObject *op)
{
	gpumon_model *m = ((ModelObject *)op)->m;
	if (!m)
		PyErr_SetString(PyExc_ValueError, "the model is not initialised");
	return m;
}

/* Feeds one record, raising with the model's message when it is refused. */
static PyObject *feed(gpumon_model *m, const gpumon_record *r)
{
	int rc = gpumon_model_add(m, r, 1);
	if (rc)
		return gpx_raise(rc, gpumon_model_errmsg(m));
	Py_RETURN_NONE;
}

/* A str or None into buf (truncated); sets *known. Returns 0, or -1 with TypeError. */
static int opt_str(PyObject *o, char *buf, size_t len, int *known, const char *what)
{
	*known = 0;
	buf[0] = 0;
	if (o == Py_None)
		return 0;
	/* PyUnicode_AsUTF8AndSize is not in the limited API of 3.9: a bytes copy instead */
	PyObject *b = PyUnicode_Check(o) ? PyUnicode_AsUTF8String(o) : NULL;
	const char *s = b ? PyBytes_AsString(b) : NULL;
	if (!s) {
		Py_XDECREF(b);
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_TypeError, "%s must be a str or None", what);
		return -1;
	}
	snprintf(buf, len, "%s", s);
	Py_DECREF(b);
	*known = 1;
	return 0;
}

/* add_device(index, name=None, uuid=None, total=None) */
static PyObject *model_add_device(PyObject *op, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"index", "name", "uuid", "total", NULL};
	gpumon_model *m = model_get(op);
	unsigned index;
	PyObject *name = Py_None, *uuid = Py_None, *total = Py_None;
	if (!m || !PyArg_ParseTupleAndKeywords(args, kw, "I|OOO:add_device", kwlist, &index, &name, &uuid, &total))
		return NULL;
	gpumon_device_info di;
	memset(&di, 0, sizeof di);
	di.index = index;
	int known;
	if (opt_str(name, di.name, sizeof di.name, &known, "name"))
		return NULL;
	di.present |= known ? GPUMON_INFO_NAME : 0;
	if (opt_str(uuid, di.uuid, sizeof di.uuid, &known, "uuid"))
		return NULL;
	di.present |= known ? GPUMON_INFO_UUID : 0;
	if (gpx_opt_u64(total, &di.memory_total_bytes, &known, "total"))
		return NULL;
	di.present |= known ? GPUMON_INFO_MEMORY_TOTAL : 0;
	int rc = gpumon_model_device(m, &di);
	if (rc)
		return gpx_raise(rc, "the model refused the device (index too large?)");
	Py_RETURN_NONE;
}

/* device(t_ns, dev, used, free, total, reserved=None): a DEVICE record of its memory figures. */
static PyObject *model_device(PyObject *op, PyObject *args)
{
	gpumon_model *m = model_get(op);
	unsigned long long t_ns, used, fr, total;
	unsigned dev;
	PyObject *res = Py_None;
	if (!m || !PyArg_ParseTuple(args, "KIKKK|O:device", &t_ns, &dev, &used, &fr, &total, &res))
		return NULL;
	gpumon_record r;
	memset(&r, 0, sizeof r);
	r.kind = GPUMON_REC_DEVICE;
	r.dev = dev;
	r.t_ns = r.sample.t_ns = t_ns;
	r.sample.present = GPUMON_F_MEMORY;
	r.sample.memory_api = GPUMON_MEMAPI_V1;
	r.sample.memory_used_bytes = used;
	r.sample.memory_free_bytes = fr;
	r.sample.memory_total_bytes = total;
	int known;
	if (gpx_opt_u64(res, &r.sample.memory_reserved_bytes, &known, "reserved"))
		return NULL;
	if (known) {
		r.sample.present |= GPUMON_F_MEM_RESERVED;
		r.sample.memory_api = GPUMON_MEMAPI_V2;
	}
	/* interval_samples 0: one sample, no extremes between records */
	return feed(m, &r);
}

/* process(t_ns, dev, pid, used, user=None, command=None): a PROCESS record (used None: listed,
 * figure not available). */
static PyObject *model_process(PyObject *op, PyObject *args)
{
	gpumon_model *m = model_get(op);
	unsigned long long t_ns;
	unsigned dev, pid;
	PyObject *used, *user = Py_None, *command = Py_None;
	if (!m || !PyArg_ParseTuple(args, "KIIO|OO:process", &t_ns, &dev, &pid, &used, &user, &command))
		return NULL;
	gpumon_record r;
	gpumon_process p;
	memset(&r, 0, sizeof r);
	memset(&p, 0, sizeof p);
	r.kind = GPUMON_REC_PROCESS;
	r.dev = dev;
	r.t_ns = t_ns;
	r.process = &p;
	p.pid = pid;
	p.flags = GPUMON_PROC_COMPUTE;
	int known;
	if (gpx_opt_u64(used, &p.used_bytes, &known, "used"))
		return NULL;
	p.flags |= known ? GPUMON_PROC_USED_KNOWN : 0;
	if (opt_str(user, p.user, sizeof p.user, &known, "user"))
		return NULL;
	p.flags |= known ? GPUMON_PROC_USER_KNOWN : 0;
	if (opt_str(command, p.cmdline, sizeof p.cmdline, &known, "command"))
		return NULL;
	p.flags |= known ? GPUMON_PROC_CMDLINE_KNOWN : 0;
	return feed(m, &r);
}

/* framework(t_ns, pid, device, step, allocated, reserved, max_allocated, limit, framework) */
static PyObject *model_framework(PyObject *op, PyObject *args)
{
	gpumon_model *m = model_get(op);
	gpumon_record r;
	memset(&r, 0, sizeof r);
	if (!m || gpx_parse_framework(args, &r.framework))
		return NULL;
	r.kind = GPUMON_REC_FRAMEWORK;
	r.t_ns = r.framework.t_ns;
	return feed(m, &r);
}

/* event(t_ns, kind, text=None) */
static PyObject *model_event(PyObject *op, PyObject *args)
{
	gpumon_model *m = model_get(op);
	unsigned long long t_ns;
	const char *kind, *text = NULL;
	if (!m || !PyArg_ParseTuple(args, "Ks|z:event", &t_ns, &kind, &text))
		return NULL;
	gpumon_record r = {.kind = GPUMON_REC_EVENT, .t_ns = t_ns, .event_kind = kind, .event_text = text};
	return feed(m, &r);
}

/* job(t_ns, pid): pid belongs to the job */
static PyObject *model_job(PyObject *op, PyObject *args)
{
	gpumon_model *m = model_get(op);
	unsigned long long t_ns;
	unsigned pid;
	if (!m || !PyArg_ParseTuple(args, "KI:job", &t_ns, &pid))
		return NULL;
	gpumon_process p = {.pid = pid};
	gpumon_record r;
	memset(&r, 0, sizeof r);
	r.kind = GPUMON_REC_JOB;
	r.t_ns = t_ns;
	r.process = &p;
	return feed(m, &r);
}

/* dict[key] = v, v a new reference (NULL: a failure already raised). Returns 0 or -1. */
static int set_new(PyObject *d, const char *key, PyObject *v)
{
	int rc = v ? PyDict_SetItemString(d, key, v) : -1;
	Py_XDECREF(v);
	return rc;
}

static PyObject *int_or_none(int known, long long v)
{
	return known ? PyLong_FromLongLong(v) : Py_NewRef(Py_None);
}

static PyObject *float_or_none(int known, double v)
{
	return known ? PyFloat_FromDouble(v) : Py_NewRef(Py_None);
}

/* s as str, None for ""; a name cut inside a character (not UTF-8) has its bytes above ASCII said
 * as '?', as the document says it. */
static PyObject *str_or_none(const char *s, size_t cap)
{
	if (!s[0])
		return Py_NewRef(Py_None);
	PyObject *u = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strnlen(s, cap), NULL);
	if (u || !PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
		return u;
	PyErr_Clear();
	char ascii[64];
	size_t n = 0;
	for (; n + 1 < sizeof ascii && n < cap && s[n]; n++)
		ascii[n] = (unsigned char)s[n] >= 0x80 ? '?' : s[n];
	ascii[n] = 0;
	return PyUnicode_FromString(ascii);
}

static PyObject *seconds(const gpumon_model *m, int known, uint64_t t_ns)
{
	return float_or_none(known, gpumon_model_seconds(m, t_ns));
}

/* The series a verdict is about, keyed as the document's "series" object. */
static PyObject *series_dict(const gpumon_verdict *v)
{
	int fw = v->series == GPUMON_SERIES_FRAMEWORK;
	PyObject *d = PyDict_New();
	if (!d || set_new(d, "kind", PyUnicode_FromString(gpumon_series_name(v->series))) ||
	    set_new(d, "dev", int_or_none(v->dev >= 0, v->dev)) || set_new(d, "pid", int_or_none(v->pid >= 0, v->pid)) ||
	    set_new(d, "device", int_or_none(fw && v->device >= 0, v->device)) ||
	    set_new(d, "segment", int_or_none(fw, v->segment)) ||
	    set_new(d, "framework", fw ? str_or_none(v->framework, sizeof v->framework) : Py_NewRef(Py_None)) ||
	    set_new(d, "rank", int_or_none(v->rank >= 0, v->rank))) {
		Py_XDECREF(d);
		return NULL;
	}
	return d;
}

/* A verdict as a dict with the keys and values of the document's verdict objects ("leak", each of
 * "series" and the leak alerts): what is not available is None. */
static PyObject *verdict_dict(const gpumon_model *m, const gpumon_verdict *v)
{
	const gpumon_leak_result *r = &v->leak;
	int leak = r->verdict == GPUMON_LEAK_SUSPECTED;
	const char *room = gpumon_room_name(v->room);
	PyObject *d = PyDict_New();
	if (!d || set_new(d, "verdict", PyUnicode_FromString(gpumon_leak_verdict_name(r->verdict))) ||
	    set_new(d, "series", series_dict(v)) ||
	    set_new(d, "rate_bytes_per_step", float_or_none(leak && r->rate_bytes_per_step > 0, r->rate_bytes_per_step)) ||
	    set_new(d, "rate_bytes_per_second", float_or_none(leak, r->rate_bytes_per_second)) ||
	    set_new(d, "start_step", int_or_none(leak && r->start_step >= 0, r->start_step)) ||
	    set_new(d, "start_time", seconds(m, leak && r->start_t_ns, r->start_t_ns)) ||
	    set_new(d, "confidence", float_or_none(r->verdict != GPUMON_LEAK_INSUFFICIENT_DATA, r->confidence)) ||
	    set_new(d, "floor_bytes", int_or_none(leak, (long long)r->floor_bytes)) ||
	    set_new(d, "points", PyLong_FromUnsignedLongLong(r->points)) ||
	    set_new(d, "alert", PyBool_FromLong(r->alert)) ||
	    set_new(d, "alert_time", seconds(m, r->alert && r->alert_t_ns, r->alert_t_ns)) ||
	    set_new(d, "room", room ? PyUnicode_FromString(room) : Py_NewRef(Py_None)) ||
	    set_new(d, "room_bytes", int_or_none(room != NULL, (long long)v->room_bytes)) ||
	    set_new(d, "steps_to_oom", float_or_none(leak && v->steps_to_oom >= 0, v->steps_to_oom)) ||
	    set_new(d, "seconds_to_oom", float_or_none(leak && v->seconds_to_oom >= 0, v->seconds_to_oom))) {
		Py_XDECREF(d);
		return NULL;
	}
	return d;
}

/* An alert as the document's "alerts" entry: a leak's or a projection's verdict with the alert's
 * moment and kind, or a headroom alert's GPU and figures. */
static PyObject *alert_dict(const gpumon_model *m, const gpumon_alert *a)
{
	int judged = a->kind == GPUMON_ALERT_LEAK || a->kind == GPUMON_ALERT_OOM_PROJECTED;
	PyObject *d = judged ? verdict_dict(m, &a->verdict) : PyDict_New();
	if (!d || set_new(d, "time", PyFloat_FromDouble(gpumon_model_seconds(m, a->t_ns))) ||
	    set_new(d, "kind", PyUnicode_FromString(gpumon_alert_name(a->kind))) ||
	    set_new(d, "live", PyBool_FromLong(a->live)) || set_new(d, "dev", int_or_none(a->dev >= 0, a->dev)) ||
	    (a->kind == GPUMON_ALERT_HEADROOM &&
	     (set_new(d, "free_bytes", PyLong_FromUnsignedLongLong(a->free_bytes)) ||
	      set_new(d, "total_bytes", PyLong_FromUnsignedLongLong(a->total_bytes))))) {
		Py_XDECREF(d);
		return NULL;
	}
	return d;
}

/* The model's alert that is the i-th of the document's "alerts" (which leave LIMIT alerts to the
 * front end that acted on them, so the two counts differ). Returns 1 and fills *a, or 0. */
static int document_alert(const gpumon_model *m, size_t i, gpumon_alert *a)
{
	for (size_t k = 0; gpumon_model_alerts(m, k, a, 1) > 0; k++)
		if (a->kind != GPUMON_ALERT_LIMIT && i-- == 0)
			return 1;
	return 0;
}

/* alerts(start=0) -> the document's "alerts" entries from index start on: the alerts the model
 * gave since a front end last asked. */
static PyObject *model_alerts(PyObject *op, PyObject *args)
{
	gpumon_model *m = model_get(op);
	Py_ssize_t start = 0;
	if (!m || !PyArg_ParseTuple(args, "|n:alerts", &start))
		return NULL;
	if (start < 0) {
		PyErr_SetString(PyExc_ValueError, "start must be >= 0");
		return NULL;
	}
	PyObject *list = PyList_New(0);
	gpumon_alert a;
	for (size_t i = (size_t)start; list && document_alert(m, i, &a); i++) {
		PyObject *d = alert_dict(m, &a);
		if (!d || PyList_Append(list, d)) {
			Py_XDECREF(d);
			Py_CLEAR(list);
			break;
		}
		Py_DECREF(d);
	}
	return list;
}

/* verdict() -> the document's "leak" object (None when no series was fed) */
static PyObject *model_verdict(PyObject *op, PyObject *unused)
{
	(void)unused;
	gpumon_model *m = model_get(op);
	gpumon_verdict v;
	if (!m)
		return NULL;
	if (gpumon_model_verdict(m, &v) != GPUMON_OK)
		Py_RETURN_NONE;
	return verdict_dict(m, &v);
}

/* document(timeline=False) -> the JSON text */
static PyObject *model_document(PyObject *op, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"timeline", NULL};
	gpumon_model *m = model_get(op);
	int timeline = 0;
	if (!m || !PyArg_ParseTupleAndKeywords(args, kw, "|p:document", kwlist, &timeline))
		return NULL;
	char *text = NULL;
	int rc = gpumon_model_document(m, timeline ? GPUMON_DOC_TIMELINE : 0, &text);
	if (rc)
		return gpx_raise(rc, "could not make the model's document");
	PyObject *s = PyUnicode_FromString(text);
	gpumon_free(text);
	return s;
}

/* finish(end_t_ns=0, exit_status=-1) */
static PyObject *model_finish(PyObject *op, PyObject *args)
{
	gpumon_model *m = model_get(op);
	unsigned long long end = 0;
	int status = -1;
	if (!m || !PyArg_ParseTuple(args, "|Ki:finish", &end, &status))
		return NULL;
	int rc = gpumon_model_finish(m, end, status);
	if (rc)
		return gpx_raise(rc, gpumon_model_errmsg(m));
	Py_RETURN_NONE;
}

static PyMethodDef model_methods[] = {
    {"add_device", (PyCFunction)(void (*)(void))model_add_device, METH_VARARGS | METH_KEYWORDS,
     "add_device(index, name=None, uuid=None, total=None) -- declare a GPU (NVML index)."},
    {"device", model_device, METH_VARARGS,
     "device(t_ns, dev, used, free, total, reserved=None) -- a DEVICE record (bytes)."},
    {"process", model_process, METH_VARARGS,
     "process(t_ns, dev, pid, used, user=None, command=None) -- a PROCESS record (used None: unknown)."},
    {"framework", model_framework, METH_VARARGS,
     "framework(t_ns, pid, device, step, allocated, reserved, max_allocated, limit, framework) -- a "
     "FRAMEWORK record (None: unknown; limit: the allocator's cap, None or 0 when none is known)."},
    {"event", model_event, METH_VARARGS, "event(t_ns, kind, text=None) -- an EVENT record."},
    {"job", model_job, METH_VARARGS, "job(t_ns, pid) -- a JOB record: pid belongs to the job."},
    {"alerts", model_alerts, METH_VARARGS,
     "alerts(start=0) -> list of the document's alert entries from index start on."},
    {"verdict", model_verdict, METH_NOARGS, "verdict() -> the document's \"leak\" object, or None."},
    {"document", (PyCFunction)(void (*)(void))model_document, METH_VARARGS | METH_KEYWORDS,
     "document(timeline=False) -> the model's JSON document (docs/report.md)."},
    {"finish", model_finish, METH_VARARGS, "finish(end_t_ns=0, exit_status=-1) -- the end of the input."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot model_slots[] = {
    {Py_tp_doc, (void *)"Model(kind=None, command=None, job_pid=0, limit=0, headroom=0.0, "
			 "cuda_visible_devices=None, timelines=False, oom_within_steps=0) -- libgpumon's run model."},
    {Py_tp_init, (void *)model_init},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_dealloc, (void *)model_dealloc},
    {Py_tp_methods, model_methods},
    {0, NULL},
};

static PyType_Spec model_spec = {"gpumon._gpumon.Model", sizeof(ModelObject), 0, Py_TPFLAGS_DEFAULT, model_slots};

/* ---- the library's words ----------------------------------------------------------------------- */

static PyObject *model_type;

/* The model of a Model argument; NULL with TypeError or ValueError set. */
static gpumon_model *model_arg(PyObject *o)
{
	if (!model_type || !PyObject_IsInstance(o, model_type)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "model must be a gpumon._gpumon.Model");
		return NULL;
	}
	return model_get(o);
}

PyObject *gpx_words_alert(PyObject *mod, PyObject *args)
{
	(void)mod;
	PyObject *o;
	Py_ssize_t i;
	gpumon_model *m;
	gpumon_alert a;
	char buf[1024];
	if (!PyArg_ParseTuple(args, "On:words_alert", &o, &i) || !(m = model_arg(o)))
		return NULL;
	if (i < 0 || !document_alert(m, (size_t)i, &a)) {
		PyErr_Format(PyExc_IndexError, "the model has no alert %zd", i);
		return NULL;
	}
	return PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strlen(gpumon_words_alert(m, &a, buf, sizeof buf)), "replace");
}

PyObject *gpx_words_verdict(PyObject *mod, PyObject *args)
{
	(void)mod;
	PyObject *o;
	double now_s = -1;
	gpumon_model *m;
	gpumon_verdict v;
	char buf[1024];
	if (!PyArg_ParseTuple(args, "O|d:words_verdict", &o, &now_s) || !(m = model_arg(o)))
		return NULL;
	if (gpumon_model_verdict(m, &v) != GPUMON_OK)
		Py_RETURN_NONE;
	return PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strlen(gpumon_words_verdict(m, &v, now_s, buf, sizeof buf)),
				    "replace");
}

/* ---- report(path) ------------------------------------------------------------------------------- */

/* The recording's document as text, made as `gpumon report PATH --json` makes it: no timelines.
 * Returns a new string (gpumon_free) or NULL with *rc and msg set. A walk that failed part way
 * still gives a document: what was read, with the loss named in source.damage. */
static char *report_text(const char *path, int *rc, char *msg, size_t len)
{
	gpumon_reader *rd = NULL;
	gpumon_model *m = NULL;
	char *text = NULL;
	*rc = gpumon_reader_create(path, &rd);
	if (*rc) {
		snprintf(msg, len, "%s", rd ? gpumon_reader_errmsg(rd) : "");
		gpumon_reader_destroy(rd);
		return NULL;
	}
	gpumon_model_config cfg = GPUMON_CONFIG_INIT(gpumon_model_config);
	cfg.source = path;
	cfg.source_type = "recording";
	*rc = gpumon_model_create(&cfg, &m);
	if (!*rc) {
		int st = gpumon_model_load(m, rd);
		if (st == GPUMON_E_NOMEM) {
			*rc = st;
			snprintf(msg, len, "%s", gpumon_model_errmsg(m));
		} else if (st && !gpumon_reader_damage(rd)[0]) {
			/* the walk failed without naming a loss: the document says so, as `gpumon report` does */
			const char *why = gpumon_model_errmsg(m)[0] ? gpumon_model_errmsg(m) : gpumon_strerror(st);
			*rc = gpumon_model_damage(m, why);
		}
	}
	if (!*rc && !gpumon_model_samples(m)) {
		/* a document of nothing would read as a run that held no memory: refused, as `gpumon report`
		   refuses it, with what was lost */
		const char *lost = gpumon_reader_damage(rd)[0] ? gpumon_reader_damage(rd) : gpumon_model_errmsg(m);
		snprintf(msg, len, "%s: nothing could be read: %s", path, lost[0] ? lost : "the recording holds no samples");
		*rc = GPUMON_E_INVAL;
	}
	if (!*rc)
		*rc = gpumon_model_finish(m, 0, -1);
	if (!*rc)
		*rc = gpumon_model_document(m, 0, &text);
	gpumon_model_destroy(m);
	gpumon_reader_destroy(rd);
	return text;
}

PyObject *gpx_report(PyObject *mod, PyObject *args)
{
	(void)mod;
	PyObject *bpath = NULL;
	if (!PyArg_ParseTuple(args, "O&:report", PyUnicode_FSConverter, &bpath))
		return NULL;
	const char *path = PyBytes_AsString(bpath);
	if (!path) {
		Py_DECREF(bpath);
		return NULL;
	}
	char msg[600] = "";
	int rc;
	char *text;
	Py_BEGIN_ALLOW_THREADS
	text = report_text(path, &rc, msg, sizeof msg);
	Py_END_ALLOW_THREADS
	Py_DECREF(bpath);
	if (!text)
		return gpx_raise(rc ? rc : GPUMON_E_NOMEM, msg);
	PyObject *s = PyUnicode_FromString(text);
	gpumon_free(text);
	return s;
}

int gpx_add_model_type(PyObject *m)
{
	PyObject *t = PyType_FromSpec(&model_spec);
	if (!t)
		return -1;
	if (PyModule_AddObject(m, "Model", t)) {
		Py_DECREF(t);
		return -1;
	}
	Py_XDECREF(model_type); /* kept for the words_* functions' argument check */
	model_type = Py_NewRef(t);
	return 0;
}
