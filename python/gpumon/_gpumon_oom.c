/* SPDX-License-Identifier: MIT */
/* _gpumon_oom.c — what the extension offers about out-of-memory: the library's reading of a
 * framework's message (whether a text says it ran out, and its figures), the figures of the moment
 * as the library encodes them for a recording, and an allocator's snapshot condensed by the library.
 * The package hands the library the framework's own words and figures; it reads none of them. */
#include "_gpumon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A str (as UTF-8) or bytes argument as a new bytes object whose buffer *buf (of *len bytes) stays
 * valid while it lives, or NULL with TypeError. */
static PyObject *text_arg(PyObject *o, const char *what, char **buf, Py_ssize_t *len)
{
	PyObject *b;
	if (PyUnicode_Check(o))
		b = PyUnicode_AsUTF8String(o);
	else if (PyBytes_Check(o))
		b = Py_NewRef(o);
	else {
		PyErr_Format(PyExc_TypeError, "%s must be a str or bytes", what);
		return NULL;
	}
	if (b && PyBytes_AsStringAndSize(b, buf, len)) {
		Py_DECREF(b);
		return NULL;
	}
	return b;
}

/* A new str from a buffer the library allocated, which is freed. */
static PyObject *take_text(char *text)
{
	PyObject *s = PyUnicode_FromString(text);
	gpumon_free(text);
	return s;
}

/* snapshot_condense(json_text, device=-1, request=0, pid=0) -> str */
PyObject *gpx_snapshot_condense(PyObject *mod, PyObject *args, PyObject *kw)
{
	(void)mod;
	static char *kwlist[] = {"json_text", "device", "request", "pid", NULL};
	PyObject *text;
	int device = -1;
	unsigned long long request = 0;
	unsigned pid = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iKI:snapshot_condense", kwlist, &text, &device, &request, &pid))
		return NULL;
	if (device < -1) {
		PyErr_Format(PyExc_ValueError, "device must be -1 (every device) or a device index, got %d", device);
		return NULL;
	}
	char *buf;
	Py_ssize_t len;
	PyObject *b = text_arg(text, "json_text", &buf, &len);
	if (!b)
		return NULL;
	gpumon_alloc_snapshot *s = calloc(1, sizeof *s);
	if (!s) {
		Py_DECREF(b);
		return PyErr_NoMemory();
	}
	char err[256] = "", *out = NULL;
	int rc;
	/* a snapshot of a big job is megabytes of JSON: the other threads run meanwhile (b stays
	 * referenced, and bytes do not change) */
	Py_BEGIN_ALLOW_THREADS
	rc = gpumon_snapshot_condense(buf, (size_t)len, device, (uint64_t)request, s, err, sizeof err);
	if (!rc) {
		s->pid = pid;
		rc = gpumon_snapshot_encode(s, &out);
	}
	Py_END_ALLOW_THREADS
	free(s);
	Py_DECREF(b);
	if (rc)
		return gpx_raise(rc, err);
	return take_text(out);
}


/* One keyword of oom_figures() into *f. Returns 0, or -1 with an exception set. */
static int put_figure(gpumon_oom_figures *f, const char *key, PyObject *v)
{
	if (v == Py_None)
		return 0;
	if (!strcmp(key, "framework")) {
		PyObject *b = PyUnicode_Check(v) ? PyUnicode_AsUTF8String(v) : NULL;
		const char *s = b ? PyBytes_AsString(b) : NULL;
		if (s)
			snprintf(f->framework, sizeof f->framework, "%s", s);
		Py_XDECREF(b);
		if (!s && !PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "framework must be a str or None");
		return s ? 0 : -1;
	}
	uint64_t x;
	int known;
	if (gpx_opt_u64(v, &x, &known, key))
		return -1;
	if (!strcmp(key, "pid") || !strcmp(key, "device")) {
		if (x > (!strcmp(key, "pid") ? 0x7fffffffu : 65535u)) {
			PyErr_Format(PyExc_ValueError, "%s out of range", key);
			return -1;
		}
		if (!strcmp(key, "pid")) {
			f->pid = (unsigned)x;
		} else {
			f->device = (int)x;
			f->known |= GPUMON_FIG_DEVICE;
		}
		return 0;
	}
	for (unsigned bit = 1; bit; bit <<= 1) /* the figures by the library's names */
		if (gpumon_oom_figure_name(bit) && !strcmp(key, gpumon_oom_figure_name(bit))) {
			*gpumon_oom_figure_field(f, bit) = x;
			f->known |= bit;
			return 0;
		}
	PyErr_Format(PyExc_TypeError, "oom_figures() got an unexpected keyword argument '%s'", key);
	return -1;
}

/* oom_figures(framework=None, pid=None, device=None, request=None, ...) -> str */
PyObject *gpx_oom_figures(PyObject *mod, PyObject *args, PyObject *kw)
{
	(void)mod;
	if (PyTuple_Size(args) != 0) {
		PyErr_SetString(PyExc_TypeError, "oom_figures() takes keyword arguments only");
		return NULL;
	}
	gpumon_oom_figures f;
	memset(&f, 0, sizeof f);
	PyObject *key, *value;
	Py_ssize_t pos = 0;
	while (kw && PyDict_Next(kw, &pos, &key, &value)) {
		PyObject *b = PyUnicode_AsUTF8String(key);
		const char *k = b ? PyBytes_AsString(b) : NULL;
		int bad = !k || put_figure(&f, k, value);
		Py_XDECREF(b);
		if (bad)
			return NULL;
	}
	char *out = NULL;
	int rc = gpumon_oom_figures_encode(&f, &out);
	if (rc)
		return gpx_raise(rc, "could not encode the out-of-memory figures");
	return take_text(out);
}

/* oom_message_match(text) -> the framework's name when a line of text says it ran out of GPU
 * memory, else None. */
PyObject *gpx_oom_message_match(PyObject *mod, PyObject *arg)
{
	(void)mod;
	char *buf;
	Py_ssize_t len;
	PyObject *b = text_arg(arg, "text", &buf, &len);
	if (!b)
		return NULL;
	const char *name = NULL;
	for (Py_ssize_t i = 0; i < len && !name;) {
		const char *nl = memchr(buf + i, '\n', (size_t)(len - i));
		Py_ssize_t end = nl ? nl - buf : len;
		name = gpumon_oom_message_match(buf + i, (size_t)(end - i));
		i = end + 1;
	}
	Py_DECREF(b);
	if (!name)
		Py_RETURN_NONE;
	return PyUnicode_FromString(name);
}

/* oom_message_parse(text) -> dict of the figures the text holds (the `oom` message's names, and
 * "others": [(pid, bytes)]), or None when it holds none. */
PyObject *gpx_oom_message_parse(PyObject *mod, PyObject *arg)
{
	(void)mod;
	char *buf;
	Py_ssize_t len;
	PyObject *b = text_arg(arg, "text", &buf, &len);
	if (!b)
		return NULL;
	gpumon_oom_figures f;
	int n = gpumon_oom_message_parse(buf, (size_t)len, &f);
	Py_DECREF(b);
	if (n < 0)
		return gpx_raise(n, "could not read the message");
	if (n == 0)
		Py_RETURN_NONE;
	PyObject *d = PyDict_New();
	if (!d)
		return NULL;
	int bad = 0;
	for (unsigned bit = 1; bit && !bad; bit <<= 1)
		if ((f.known & bit) && gpumon_oom_figure_name(bit)) {
			PyObject *v = PyLong_FromUnsignedLongLong(*gpumon_oom_figure_field(&f, bit));
			bad = !v || PyDict_SetItemString(d, gpumon_oom_figure_name(bit), v);
			Py_XDECREF(v);
		}
	if (!bad && (f.known & GPUMON_FIG_DEVICE)) {
		PyObject *v = PyLong_FromLong(f.device);
		bad = !v || PyDict_SetItemString(d, "device", v);
		Py_XDECREF(v);
	}
	if (!bad && f.framework[0]) {
		PyObject *v = PyUnicode_FromString(f.framework);
		bad = !v || PyDict_SetItemString(d, "framework", v);
		Py_XDECREF(v);
	}
	if (!bad && f.nothers) {
		PyObject *l = PyList_New(0);
		for (unsigned i = 0; l && i < f.nothers && i < GPUMON_OOM_MAX_OTHERS && !bad; i++) {
			PyObject *t = Py_BuildValue("(IK)", f.others[i].pid, (unsigned long long)f.others[i].bytes);
			bad = !t || PyList_Append(l, t);
			Py_XDECREF(t);
		}
		bad = bad || !l || PyDict_SetItemString(d, "others", l);
		Py_XDECREF(l);
	}
	if (bad) {
		Py_DECREF(d);
		return NULL;
	}
	return d;
}
