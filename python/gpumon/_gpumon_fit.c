/* SPDX-License-Identifier: MIT */
/* _gpumon_fit.c — the library's batch-size fit for the package: fit_batch() and fit_next() take the
 * runs as Python gives them and return what gpumon_fit_batch / gpumon_fit_next decided, so that
 * gpumon.fit(), suggest_batch_size() and `gpumon fit` answer the same runs alike; the run's peak, the
 * room and what a process holds outside its allocator are the library's too. */
#include "_gpumon.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A figure in bytes: an int or a float >= 0 (None: 0, the library's "unknown"). -1 with ValueError
 * naming what and the run. */
static int bytes_arg(PyObject *o, uint64_t *v, const char *what, Py_ssize_t i)
{
	*v = 0;
	if (!o || o == Py_None)
		return 0;
	double d = PyFloat_AsDouble(o);
	if (d == -1.0 && PyErr_Occurred()) {
		PyErr_Clear();
		d = NAN;
	}
	if (!(d >= 0) || d >= 1.8e19) {
		PyErr_Format(PyExc_ValueError, "run %zd: %s must be a number of bytes >= 0", i + 1, what);
		return -1;
	}
	*v = PyLong_Check(o) ? PyLong_AsUnsignedLongLong(o) : (uint64_t)d;
	if (PyErr_Occurred()) {
		PyErr_Clear();
		*v = (uint64_t)d;
	}
	return 0;
}

/* One run from a dict {batch, peak_bytes, allocated_peak_bytes, reserved_peak_bytes, failed} or a
 * tuple (batch, peak_bytes[, allocated_peak_bytes, reserved_peak_bytes, failed]). */
static int take_run(PyObject *o, Py_ssize_t i, gpumon_fit_run *r)
{
	static const char *keys[] = {"batch", "peak_bytes", "allocated_peak_bytes", "reserved_peak_bytes", "failed"};
	PyObject *f[5] = {NULL};
	int dict = PyDict_Check(o), st = -1;
	if (!dict && (!PySequence_Check(o) || PyUnicode_Check(o) || PySequence_Size(o) < 2 || PySequence_Size(o) > 5)) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "run %zd must be a dict or a tuple (batch, peak_bytes[, allocated_peak_bytes, "
					       "reserved_peak_bytes, failed])", i + 1);
		return -1;
	}
	for (int k = 0; k < 5; k++) {
		if (dict) {
			f[k] = PyDict_GetItemString(o, keys[k]); /* borrowed */
			Py_XINCREF(f[k]);
		} else if (k < PySequence_Size(o)) {
			f[k] = PySequence_GetItem(o, k);
			if (!f[k])
				goto out;
		}
	}
	if (!f[0] || !f[1]) {
		PyErr_Format(PyExc_ValueError, "run %zd needs a batch and a peak_bytes", i + 1);
		goto out;
	}
	r->batch = PyFloat_AsDouble(f[0]);
	if (r->batch == -1.0 && PyErr_Occurred()) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "run %zd: the batch must be a number", i + 1);
		goto out;
	}
	if (bytes_arg(f[1], &r->peak_bytes, "peak_bytes", i) ||
	    bytes_arg(f[2], &r->allocated_peak_bytes, "allocated_peak_bytes", i) ||
	    bytes_arg(f[3], &r->reserved_peak_bytes, "reserved_peak_bytes", i))
		goto out;
	r->failed = f[4] ? PyObject_IsTrue(f[4]) : 0;
	st = r->failed < 0 ? -1 : 0;
out:
	for (int k = 0; k < 5; k++)
		Py_XDECREF(f[k]);
	return st;
}

/* The runs into a new array (*n of them; free() it), or NULL with an exception set. */
static gpumon_fit_run *take_runs(PyObject *runs, size_t *n)
{
	Py_ssize_t len = PySequence_Check(runs) && !PyUnicode_Check(runs) ? PySequence_Size(runs) : -1;
	if (len < 0) {
		PyErr_Clear();
		PyErr_SetString(PyExc_ValueError, "runs must be a sequence of runs");
		return NULL;
	}
	gpumon_fit_run *r = calloc(len ? (size_t)len : 1, sizeof *r);
	if (!r)
		return (gpumon_fit_run *)PyErr_NoMemory();
	for (Py_ssize_t i = 0; i < len; i++) {
		PyObject *o = PySequence_GetItem(runs, i);
		int st = o ? take_run(o, i, &r[i]) : -1;
		Py_XDECREF(o);
		if (st) {
			free(r);
			return NULL;
		}
	}
	*n = (size_t)len;
	return r;
}

static int take_config(PyObject *room, unsigned long long mult, PyObject *fixed, gpumon_fit_config *c)
{
	int known;
	if (gpx_opt_u64(room, &c->room_bytes, &known, "room_bytes"))
		return -1;
	if (!known) {
		PyErr_SetString(PyExc_ValueError, "room_bytes must be a non-negative integer");
		return -1;
	}
	if (mult < 1 || mult > 0xFFFFFFFFull) {
		PyErr_Format(PyExc_ValueError, "multiple_of must be at least 1, got %llu", mult);
		return -1;
	}
	c->multiple_of = (unsigned)mult;
	return gpx_opt_u64(fixed, &c->fixed_bytes, &c->fixed_known, "fixed_bytes");
}

static const char *shape_name(int shape)
{
	return shape == GPUMON_FIT_LINEAR ? "linear" : shape == GPUMON_FIT_QUADRATIC ? "quadratic" : "none";
}

/* fit_batch(runs, room_bytes, multiple_of=1, fixed_bytes=None) -> dict */
PyObject *gpx_fit_batch(PyObject *mod, PyObject *args, PyObject *kw)
{
	(void)mod;
	static char *kwlist[] = {"runs", "room_bytes", "multiple_of", "fixed_bytes", NULL};
	PyObject *runs, *room, *fixed = Py_None;
	unsigned long long mult = 1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|KO:fit_batch", kwlist, &runs, &room, &mult, &fixed))
		return NULL;
	gpumon_fit_config c = GPUMON_CONFIG_INIT(gpumon_fit_config);
	if (take_config(room, mult, fixed, &c))
		return NULL;
	size_t n = 0;
	gpumon_fit_run *r = take_runs(runs, &n);
	if (!r)
		return NULL;
	gpumon_fit f = {.size = sizeof f};
	int st = gpumon_fit_batch(r, n, &c, &f);
	free(r);
	if (st)
		return gpx_raise(st, f.note);
	return Py_BuildValue("{s:s,s:d,s:d,s:d,s:d,s:K,s:K,s:K,s:O,s:s}", "shape", shape_name(f.shape), "fixed_bytes",
			     f.fixed_bytes, "per_sample_bytes", f.per_sample_bytes, "per_sample2_bytes",
			     f.per_sample2_bytes, "misfit", f.misfit, "margin_bytes", (unsigned long long)f.margin_bytes,
			     "max_batch", (unsigned long long)f.max_batch, "predicted_peak_bytes",
			     (unsigned long long)f.predicted_peak_bytes, "extrapolated",
			     f.extrapolated ? Py_True : Py_False, "note", f.note);
}

/* fit_next(runs, room_bytes, first, multiple_of=1) -> int */
PyObject *gpx_fit_next(PyObject *mod, PyObject *args, PyObject *kw)
{
	(void)mod;
	static char *kwlist[] = {"runs", "room_bytes", "first", "multiple_of", NULL};
	PyObject *runs, *room;
	unsigned long long first, mult = 1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOK|K:fit_next", kwlist, &runs, &room, &first, &mult))
		return NULL;
	gpumon_fit_config c = GPUMON_CONFIG_INIT(gpumon_fit_config);
	if (take_config(room, mult, Py_None, &c))
		return NULL;
	size_t n = 0;
	gpumon_fit_run *r = take_runs(runs, &n);
	if (!r)
		return NULL;
	uint64_t next = gpumon_fit_next(r, n, &c, first);
	free(r);
	return PyLong_FromUnsignedLongLong(next);
}

/* Bytes from an optional argument (None: 0, the library's "unknown"); -1 with ValueError. */
static int opt_bytes(PyObject *o, uint64_t *v, const char *what)
{
	int known;
	return gpx_opt_u64(o ? o : Py_None, v, &known, what);
}

/* fit_run_from(batch, failed=False, nvml_peak=None, nvml=None, reserved=None, allocated_peak=None,
 * reserved_peak=None) -> the run dict fit_batch takes, its peak by gpumon_fit_run_from */
PyObject *gpx_fit_run_from(PyObject *mod, PyObject *args, PyObject *kw)
{
	(void)mod;
	static char *kwlist[] = {"batch", "failed", "nvml_peak", "nvml", "reserved", "allocated_peak", "reserved_peak",
				 NULL};
	PyObject *batch;
	int failed = 0;
	PyObject *o[5] = {NULL, NULL, NULL, NULL, NULL};
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|pOOOOO:fit_run_from", kwlist, &batch, &failed, &o[0], &o[1], &o[2],
					 &o[3], &o[4]))
		return NULL;
	gpumon_fit_measure m = {.size = sizeof m, .batch = PyFloat_AsDouble(batch), .failed = failed};
	if (m.batch == -1.0 && PyErr_Occurred())
		return NULL;
	if (opt_bytes(o[0], &m.nvml_peak_bytes, "nvml_peak") || opt_bytes(o[1], &m.nvml_bytes, "nvml") ||
	    opt_bytes(o[2], &m.reserved_bytes, "reserved") ||
	    opt_bytes(o[3], &m.allocated_peak_bytes, "allocated_peak") ||
	    opt_bytes(o[4], &m.reserved_peak_bytes, "reserved_peak"))
		return NULL;
	gpumon_fit_run r;
	int st = gpumon_fit_run_from(&m, &r);
	if (st)
		return gpx_raise(st, "the run could not be read");
	/* the allocator's peaks: None where unknown, as the runs' dicts say them */
	PyObject *ap = r.allocated_peak_bytes ? PyLong_FromUnsignedLongLong(r.allocated_peak_bytes) : Py_NewRef(Py_None);
	PyObject *rp = r.reserved_peak_bytes ? PyLong_FromUnsignedLongLong(r.reserved_peak_bytes) : Py_NewRef(Py_None);
	/* the batch as given: the runs keep the caller's numbers */
	PyObject *res = ap && rp ? Py_BuildValue("{s:O,s:K,s:O,s:O,s:O}", "batch", batch, "peak_bytes", (unsigned long long)r.peak_bytes,
						 "allocated_peak_bytes", ap, "reserved_peak_bytes", rp, "failed",
						 r.failed ? Py_True : Py_False)
				 : NULL;
	Py_XDECREF(ap);
	Py_XDECREF(rp);
	return res;
}

/* job_room(free, process=None, reserved=None, cap=None) -> dict (room_bytes, allocator_bytes,
 * outside_bytes) by gpumon_job_room_get, or None when free is None (unknown) */
PyObject *gpx_job_room(PyObject *mod, PyObject *args, PyObject *kw)
{
	(void)mod;
	static char *kwlist[] = {"free", "process", "reserved", "cap", NULL};
	PyObject *fr, *p = Py_None, *res = Py_None, *cap = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO:job_room", kwlist, &fr, &p, &res, &cap))
		return NULL;
	gpumon_job_room_input in = {.size = sizeof in};
	if (gpx_opt_u64(fr, &in.free_bytes, &in.free_known, "free") || opt_bytes(p, &in.process_bytes, "process") ||
	    opt_bytes(res, &in.reserved_bytes, "reserved") || opt_bytes(cap, &in.cap_bytes, "cap"))
		return NULL;
	gpumon_job_room r = {.size = sizeof r};
	int st = gpumon_job_room_get(&in, &r);
	if (st == GPUMON_E_NOT_FOUND)
		Py_RETURN_NONE;
	if (st)
		return gpx_raise(st, "the room could not be told");
	return Py_BuildValue("{s:K,s:K,s:K}", "room_bytes", (unsigned long long)r.room_bytes, "allocator_bytes",
			     (unsigned long long)r.allocator_bytes, "outside_bytes", (unsigned long long)r.outside_bytes);
}

/* outside_bytes(nvml, reserved) -> what a process holds outside its allocator (gpumon_placed_split),
 * None when either is None or NVML's figure lags below the reserve */
PyObject *gpx_outside_bytes(PyObject *mod, PyObject *args)
{
	(void)mod;
	PyObject *nv, *res;
	if (!PyArg_ParseTuple(args, "OO:outside_bytes", &nv, &res))
		return NULL;
	uint64_t n, r;
	int nk, rk;
	if (gpx_opt_u64(nv, &n, &nk, "nvml") || gpx_opt_u64(res, &r, &rk, "reserved"))
		return NULL;
	gpumon_placed p;
	memset(&p, 0, sizeof p);
	gpumon_placed_split(n, r, 0, &p);
	if (!nk || !rk || !p.outside_known)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLongLong(p.outside_bytes);
}
