/* SPDX-License-Identifier: MIT */
/* _gpumon_export.c — the Exporter type of the extension: libgpumon's Prometheus exporter
 * (gpumon_exporter_*) serving /metrics from inside a training process, with the framework's
 * allocator figures pushed to it at each sample. The same code as `gpumon serve`. */
#include "_gpumon.h"

#include <stdio.h>
#include <string.h>

typedef struct {
	PyObject_HEAD gpumon_exporter *e;
	PyObject *nvml; /* the Nvml object whose handle the exporter samples (kept alive, closed after) */
} ExporterObject;

/* A connection limit given as keyword (None: the library's default, as gpumon serve without the
 * option): a whole number in the range gpumon serve's option takes (cli/cmd_serve.c). */
static int exp_limit(PyObject *v, const char *name, unsigned long lo, unsigned long hi, unsigned *out)
{
	if (v == NULL || v == Py_None)
		return 0;
	unsigned long x = 0;
	int ok = PyLong_Check(v) && !PyBool_Check(v);
	if (ok) {
		x = PyLong_AsUnsignedLong(v);
		if (PyErr_Occurred()) {
			PyErr_Clear();
			ok = 0;
		}
	}
	if (!ok || x < lo || x > hi) {
		PyErr_Format(PyExc_ValueError, "%s must be a whole number from %lu to %lu or None, got %R", name, lo,
			     hi, v);
		return -1;
	}
	*out = (unsigned)x;
	return 0;
}

static int exp_init(PyObject *op, PyObject *args, PyObject *kw)
{
	ExporterObject *self = (ExporterObject *)op;
	static char *kwlist[] = {"nvml", "listen", "processes", "max_connections", "max_connections_per_ip",
				 "timeout", "keepalive", NULL};
	PyObject *nvml, *max_conn = NULL, *per_ip = NULL, *timeout = NULL, *keepalive = NULL;
	const char *listen = NULL;
	int processes = 0; /* as gpumon serve: series per owner, per-pid series only when asked */
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|zi$OOOO:Exporter", kwlist, &nvml, &listen, &processes,
					 &max_conn, &per_ip, &timeout, &keepalive))
		return -1;
	gpumon_exporter_config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.size = sizeof cfg;
	/* gpumon serve's --max-connections, --max-connections-per-ip, --timeout, --keepalive: the
	 * same ranges; 0 in the config is the library's default, keepalive 0 closes after each response */
	if (exp_limit(max_conn, "max_connections", 1, GPUMON_EXPORTER_CONNECTIONS_MAX, &cfg.max_connections) ||
	    exp_limit(per_ip, "max_connections_per_ip", 1, GPUMON_EXPORTER_CONNECTIONS_MAX, &cfg.max_connections_per_ip) ||
	    exp_limit(timeout, "timeout", 1, GPUMON_EXPORTER_SECONDS_MAX, &cfg.timeout_s) ||
	    exp_limit(keepalive, "keepalive", 0, GPUMON_EXPORTER_SECONDS_MAX, &cfg.keepalive_s))
		return -1;
	cfg.no_keepalive = keepalive != NULL && keepalive != Py_None && cfg.keepalive_s == 0;
	int is = PyObject_IsInstance(nvml, gpx_nvml_type);
	if (is <= 0) {
		if (!is)
			PyErr_SetString(PyExc_TypeError, "Exporter needs an Nvml object");
		return -1;
	}
	if (processes < -1) {
		PyErr_SetString(PyExc_ValueError,
				"processes must be >= -1 (0: per-owner series only; N: also the N largest processes "
				"one by one; -1: no process list at all)");
		return -1;
	}
	gpumon *g = gpx_nvml_handle(nvml);
	if (!g)
		return -1;
	if (self->e) {
		gpumon_exporter_destroy(self->e);
		self->e = NULL;
	}
	cfg.listen = listen;
	cfg.max_processes = processes > 0 ? (unsigned)processes : 0;
	cfg.no_processes = processes == -1;
	cfg.no_energy = 1;
	gpumon_exporter *e = NULL;
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = gpumon_exporter_create(g, &cfg, &e);
	Py_END_ALLOW_THREADS
	if (rc) {
		gpx_raise(rc, e ? gpumon_exporter_errmsg(e) : gpumon_errmsg(g));
		gpumon_exporter_destroy(e); /* a failed create may hand back one holding the message */
		return -1;
	}
	self->e = e;
	Py_XDECREF(self->nvml);
	self->nvml = Py_NewRef(nvml);
	return 0;
}

static void exp_stop(ExporterObject *self)
{
	gpumon_exporter *e = self->e;
	self->e = NULL;
	if (e) {
		Py_BEGIN_ALLOW_THREADS
		gpumon_exporter_destroy(e);
		Py_END_ALLOW_THREADS
	}
	Py_CLEAR(self->nvml);
}

static void exp_dealloc(PyObject *op)
{
	exp_stop((ExporterObject *)op);
	gpx_free_self(op);
}

static gpumon_exporter *exp_get(ExporterObject *self)
{
	if (!self->e)
		PyErr_SetString(PyExc_ValueError, "the exporter is closed");
	return self->e;
}

static PyObject *exp_address(PyObject *op, PyObject *unused)
{
	(void)unused;
	gpumon_exporter *e = exp_get((ExporterObject *)op);
	if (!e)
		return NULL;
	char buf[128];
	gpumon_exporter_address(e, buf, sizeof buf);
	return PyUnicode_FromString(buf);
}

/* framework(t_ns, pid, device, step, allocated, reserved, max_allocated, limit, framework) */
static PyObject *exp_framework(PyObject *op, PyObject *args)
{
	gpumon_exporter *e = exp_get((ExporterObject *)op);
	gpumon_framework_sample f;
	if (!e || gpx_parse_framework(args, &f))
		return NULL;
	int rc = gpumon_exporter_framework(e, &f);
	if (rc)
		return gpx_raise(rc, "the exporter refused the framework sample");
	Py_RETURN_NONE;
}

static PyObject *exp_close(PyObject *op, PyObject *unused)
{
	(void)unused;
	exp_stop((ExporterObject *)op);
	Py_RETURN_NONE;
}

static PyMethodDef exp_methods[] = {
    {"address", exp_address, METH_NOARGS, "address() -> 'ADDR:PORT' the exporter listens on."},
    {"framework", exp_framework, METH_VARARGS,
     "framework(t_ns, pid, device, step, allocated, reserved, max_allocated, limit, framework) -- "
     "publish the allocator's figures (None: unknown) as gpumon_framework_*_bytes."},
    {"close", exp_close, METH_NOARGS, "close() -- stop serving (idempotent)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot exp_slots[] = {
    {Py_tp_doc, (void *)"Exporter(nvml, listen='127.0.0.1:19400', processes=0, *, max_connections=None, "
			 "max_connections_per_ip=None, timeout=None, keepalive=None) -- libgpumon's Prometheus "
			 "exporter (/metrics, /healthz) in this process; port 0 picks a free port; processes: 0 "
			 "series per owner only (as gpumon serve), N also the N largest processes by pid, -1 "
			 "no process list. The limits are gpumon serve's options of the same names (None: its "
			 "defaults 1024, 64, 10 s, 120 s; keepalive=0: close after each response)."},
    {Py_tp_init, (void *)exp_init},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_dealloc, (void *)exp_dealloc},
    {Py_tp_methods, exp_methods},
    {0, NULL},
};

static PyType_Spec exp_spec = {"gpumon._gpumon.Exporter", sizeof(ExporterObject), 0, Py_TPFLAGS_DEFAULT,
			       exp_slots};

int gpx_add_export_type(PyObject *m)
{
	PyObject *t = PyType_FromSpec(&exp_spec);
	if (!t)
		return -1;
	if (PyModule_AddObject(m, "Exporter", t)) {
		Py_DECREF(t);
		return -1;
	}
	return 0;
}
