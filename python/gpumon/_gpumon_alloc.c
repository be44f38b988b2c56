/* SPDX-License-Identifier: MIT */
/* _gpumon_alloc.c — the library's allocator plan for the package: alloc_plan() returns the variables
 * and notes gpumon_alloc_plan_build decides (worded with limit_pool()'s keywords), so that
 * limit_pool() and `gpumon run` set the same variables for the same settings; size_parse() and
 * framework_bits() read a size and a framework's name as `gpumon run` reads them. */
#include "_gpumon.h"

#include <stdlib.h>
#include <string.h>

/* env (a sequence of "NAME=VALUE" str, or None) as a NULL-terminated array of copies in *out
 * (free_env it). Returns 0, or -1 with an exception set. */
static int take_env(PyObject *env, char ***out)
{
	*out = NULL;
	if (env == Py_None)
		return 0;
	Py_ssize_t n = PySequence_Check(env) && !PyUnicode_Check(env) ? PySequence_Size(env) : -1;
	if (n < 0) {
		PyErr_Clear();
		PyErr_SetString(PyExc_ValueError, "env must be a sequence of 'NAME=VALUE' strings");
		return -1;
	}
	char **a = calloc((size_t)n + 1, sizeof *a);
	if (!a) {
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = PySequence_GetItem(env, i);
		PyObject *b = o && PyUnicode_Check(o) ? PyUnicode_AsUTF8String(o) : NULL;
		const char *s = b ? PyBytes_AsString(b) : NULL;
		a[i] = s ? strdup(s) : NULL;
		Py_XDECREF(b);
		Py_XDECREF(o);
		if (!a[i]) {
			for (Py_ssize_t k = 0; k < i; k++)
				free(a[k]);
			free(a);
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError, "env must be a sequence of 'NAME=VALUE' strings");
			return -1;
		}
	}
	*out = a;
	return 0;
}

static void free_env(char **a)
{
	for (size_t i = 0; a && a[i]; i++)
		free(a[i]);
	free(a);
}

/* The plan as ([(name, value)], [(note, no_effect)]). */
static PyObject *plan_object(const gpumon_alloc_plan *p)
{
	PyObject *vars = PyList_New((Py_ssize_t)p->nvars), *notes = PyList_New((Py_ssize_t)p->nnotes);
	for (size_t i = 0; vars && i < p->nvars; i++) {
		PyObject *t = Py_BuildValue("(ss)", p->vars[i].name, p->vars[i].value);
		if (!t) {
			Py_CLEAR(vars);
			break;
		}
		PyList_SetItem(vars, (Py_ssize_t)i, t);
	}
	for (size_t i = 0; notes && i < p->nnotes; i++) {
		PyObject *t = Py_BuildValue("(sO)", p->notes[i], p->no_effect[i] ? Py_True : Py_False);
		if (!t) {
			Py_CLEAR(notes);
			break;
		}
		PyList_SetItem(notes, (Py_ssize_t)i, t);
	}
	PyObject *res = vars && notes ? Py_BuildValue("(OO)", vars, notes) : NULL;
	Py_XDECREF(vars);
	Py_XDECREF(notes);
	return res;
}

/* alloc_plan(frameworks=0, limit=0, fraction=0.0, no_prealloc=False, expandable=False, max_split=0,
 * gc_threshold=0.0, paddle_strategy=None, gpu_total=0, env=None) */
PyObject *gpx_alloc_plan(PyObject *mod, PyObject *args, PyObject *kw)
{
	(void)mod;
	static char *kwlist[] = {"frameworks", "limit", "fraction", "no_prealloc", "expandable", "max_split",
				 "gc_threshold", "paddle_strategy", "gpu_total", "env", NULL};
	gpumon_alloc_opts o = {.size = sizeof o, .flags = GPUMON_ALLOC_PYTHON_NAMES};
	unsigned long long limit = 0, split = 0, total = 0;
	PyObject *env = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|IKdppKdzKO:alloc_plan", kwlist, &o.frameworks, &limit, &o.fraction,
					 &o.no_prealloc, &o.expandable, &split, &o.gc_threshold, &o.paddle_strategy,
					 &total, &env))
		return NULL;
	o.limit_bytes = limit;
	o.max_split_bytes = split;
	o.gpu_total_bytes = total;
	char err[256];
	if (gpumon_alloc_check(&o, err, sizeof err)) {
		PyErr_SetString(PyExc_ValueError, err);
		return NULL;
	}
	char **envp;
	if (take_env(env, &envp))
		return NULL;
	gpumon_alloc_plan p;
	int st = gpumon_alloc_plan_build(&o, envp, &p);
	free_env(envp);
	if (st)
		return gpx_raise(st, "the allocator plan could not be made");
	PyObject *res = plan_object(&p);
	gpumon_alloc_plan_free(&p);
	return res;
}

/* size_parse(text) -> bytes, or None when the text is not a size */
PyObject *gpx_size_parse(PyObject *mod, PyObject *arg)
{
	(void)mod;
	PyObject *b = PyUnicode_Check(arg) ? PyUnicode_AsUTF8String(arg) : NULL;
	const char *s = b ? PyBytes_AsString(b) : NULL;
	uint64_t v = 0;
	int st = s ? gpumon_size_parse(s, &v) : GPUMON_E_INVAL;
	Py_XDECREF(b);
	if (!s) {
		PyErr_Clear();
		PyErr_SetString(PyExc_TypeError, "size_parse takes a str");
		return NULL;
	}
	if (st)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLongLong(v);
}

/* framework_bits(name) -> the GPUMON_FW_* bits of a framework's name, 0 when unknown */
PyObject *gpx_framework_bits(PyObject *mod, PyObject *arg)
{
	(void)mod;
	PyObject *b = PyUnicode_Check(arg) ? PyUnicode_AsUTF8String(arg) : NULL;
	const char *s = b ? PyBytes_AsString(b) : NULL;
	unsigned bits = s ? gpumon_framework_bits(s) : 0;
	Py_XDECREF(b);
	if (!s) {
		PyErr_Clear();
		PyErr_SetString(PyExc_TypeError, "framework_bits takes a str");
		return NULL;
	}
	return PyLong_FromUnsignedLong(bits);
}
