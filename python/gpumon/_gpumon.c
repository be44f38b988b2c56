/* SPDX-License-Identifier: MIT */
/* _gpumon.c — the C extension under the Python package: thin types over gpumon.h for GPUMonitor,
 * built against Python's limited API (3.9) so one build loads on every later CPython. Here the
 * NVML handle and the module; the run model and report() are in _gpumon_model.c, the writers
 * (TensorBoard, recordings) in _gpumon_io.c, the exporter in _gpumon_export.c, what concerns
 * out-of-memory (messages, figures, the allocator's snapshot) in _gpumon_oom.c, the batch-size
 * fit in _gpumon_fit.c. */
#include "_gpumon.h"

#include <stdio.h>
#include <string.h>

/* ---- errors ---------------------------------------------------------------------------------- */

PyObject *gpx_nvml_type;  /* the Nvml type, for the writers' argument checks */
PyObject *gpx_error_type; /* gpumon._gpumon.Error, a RuntimeError subclass for driver failures */

PyObject *gpx_raise(int status, const char *msg)
{
	const char *m = msg && *msg ? msg : gpumon_strerror(status);
	switch (status) {
	case GPUMON_E_INVAL:
	case GPUMON_E_NOT_FOUND:
	case GPUMON_E_AMBIGUOUS: PyErr_SetString(PyExc_ValueError, m); break;
	case GPUMON_E_NOMEM: PyErr_NoMemory(); break;
	case GPUMON_E_EXISTS: PyErr_SetString(PyExc_FileExistsError, m); break;
	case GPUMON_E_IO: PyErr_SetString(PyExc_OSError, m); break;
	default: {
		/* str(e) is the message; e.status the libgpumon status */
		PyObject *e = PyObject_CallFunction(gpx_error_type, "s", m);
		PyObject *st = PyLong_FromLong(status);
		if (e && st && !PyObject_SetAttrString(e, "status", st))
			PyErr_SetObject(gpx_error_type, e);
		Py_XDECREF(st);
		Py_XDECREF(e);
	}
	}
	return NULL;
}

/* An int or None (absent) from a present bit. */
static PyObject *opt_u64(int present, uint64_t v)
{
	if (!present)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLongLong(v);
}

/* The method table of a heap type's object frees it through its type, as heap types must. */
void gpx_free_self(PyObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);
	freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
	f(self);
	Py_DECREF(tp);
}

/* ---- Nvml: a gpumon handle ---------------------------------------------------------------------- */

typedef struct {
	PyObject_HEAD gpumon *g;
} NvmlObject;

static gpumon *nvml_get(NvmlObject *self)
{
	if (!self->g)
		PyErr_SetString(PyExc_ValueError, "the NVML handle is closed");
	return self->g;
}

gpumon *gpx_nvml_handle(PyObject *obj)
{
	return nvml_get((NvmlObject *)obj);
}

static int nvml_init(PyObject *op, PyObject *args, PyObject *kw)
{
	NvmlObject *self = (NvmlObject *)op;
	static char *kwlist[] = {NULL};
	if (!PyArg_ParseTupleAndKeywords(args, kw, ":Nvml", kwlist))
		return -1;
	if (self->g) {
		gpumon_destroy(self->g);
		self->g = NULL;
	}
	gpumon *g = NULL;
	int rc = gpumon_create(&g);
	if (rc) {
		char msg[600];
		snprintf(msg, sizeof msg, "%s", g ? gpumon_errmsg(g) : gpumon_strerror(rc));
		gpumon_destroy(g);
		gpx_raise(rc, msg);
		return -1;
	}
	self->g = g;
	return 0;
}

static void nvml_dealloc(PyObject *op)
{
	NvmlObject *self = (NvmlObject *)op;
	gpumon_destroy(self->g);
	self->g = NULL;
	gpx_free_self(op);
}

static PyObject *nvml_close(PyObject *op, PyObject *unused)
{
	(void)unused;
	NvmlObject *self = (NvmlObject *)op;
	gpumon_destroy(self->g);
	self->g = NULL;
	Py_RETURN_NONE;
}

static PyObject *nvml_device_count(PyObject *op, PyObject *unused)
{
	(void)unused;
	gpumon *g = nvml_get((NvmlObject *)op);
	return g ? PyLong_FromUnsignedLong(gpumon_device_count(g)) : NULL;
}

static PyObject *nvml_driver_version(PyObject *op, PyObject *unused)
{
	(void)unused;
	gpumon *g = nvml_get((NvmlObject *)op);
	char buf[96];
	if (!g)
		return NULL;
	if (gpumon_driver_version(g, buf, sizeof buf))
		Py_RETURN_NONE;
	return PyUnicode_FromString(buf);
}

static PyObject *nvml_device_info(PyObject *op, PyObject *args)
{
	unsigned dev;
	gpumon_device_info di;
	gpumon *g = nvml_get((NvmlObject *)op);
	if (!g || !PyArg_ParseTuple(args, "I:device_info", &dev))
		return NULL;
	int rc = gpumon_device_info_get(g, dev, &di);
	if (rc) {
		char msg[128];
		snprintf(msg, sizeof msg, "no GPU at NVML index %u (this machine has %u)", dev,
			 gpumon_device_count(g));
		return gpx_raise(rc, msg);
	}
	return Py_BuildValue(
	    "{s:I,s:N,s:N,s:N,s:N,s:O}", "index", di.index, "name",
	    di.present & GPUMON_INFO_NAME ? PyUnicode_FromString(di.name) : Py_NewRef(Py_None), "uuid",
	    di.present & GPUMON_INFO_UUID ? PyUnicode_FromString(di.uuid) : Py_NewRef(Py_None), "pci_bus_id",
	    di.present & GPUMON_INFO_PCI_BUS_ID ? PyUnicode_FromString(di.pci_bus_id) : Py_NewRef(Py_None),
	    "memory_total_bytes", opt_u64(di.present & GPUMON_INFO_MEMORY_TOTAL, di.memory_total_bytes),
	    "lost", di.lost ? Py_True : Py_False);
}

static PyObject *nvml_device_find(PyObject *op, PyObject *args)
{
	const char *spec;
	unsigned dev;
	gpumon *g = nvml_get((NvmlObject *)op);
	if (!g || !PyArg_ParseTuple(args, "s:device_find", &spec))
		return NULL;
	int rc = gpumon_device_find(g, spec, &dev);
	if (rc)
		return gpx_raise(rc, gpumon_errmsg(g));
	return PyLong_FromUnsignedLong(dev);
}

/*
 * sample(dev, want) -> (t_ns, memory_api, total, used, free, reserved, util_gpu_pct,
 * util_memory_pct, temperature_c, power_mw); a field the driver did not give is None.
 * A tuple, not a dict: this is on the sampling path.
 */
static PyObject *nvml_sample(PyObject *op, PyObject *args)
{
	unsigned dev, want = GPUMON_F_MEMORY | GPUMON_F_MEM_RESERVED | GPUMON_F_UTIL_GPU;
	gpumon_device_sample s;
	gpumon *g = nvml_get((NvmlObject *)op);
	if (!g || !PyArg_ParseTuple(args, "I|I:sample", &dev, &want))
		return NULL;
	int rc = gpumon_device_sample_read(g, dev, want, &s);
	if (rc)
		return gpx_raise(rc, gpumon_errmsg(g));
	unsigned p = s.present;
	return Py_BuildValue("(KINNNNNNNN)", (unsigned long long)s.t_ns, s.memory_api,
			     opt_u64(p & GPUMON_F_MEMORY, s.memory_total_bytes),
			     opt_u64(p & GPUMON_F_MEMORY, s.memory_used_bytes),
			     opt_u64(p & GPUMON_F_MEMORY, s.memory_free_bytes),
			     opt_u64(p & GPUMON_F_MEM_RESERVED, s.memory_reserved_bytes),
			     opt_u64(p & GPUMON_F_UTIL_GPU, s.util_gpu_pct),
			     opt_u64(p & GPUMON_F_UTIL_MEMORY, s.util_memory_pct),
			     opt_u64(p & GPUMON_F_TEMPERATURE, s.temperature_c),
			     opt_u64(p & GPUMON_F_POWER, s.power_mw));
}

/*
 * process_used(dev, pid) -> bytes the process pid holds on dev, or None when it is not listed,
 * the driver does not say, or the driver has no process call.
 */
static PyObject *nvml_process_used(PyObject *op, PyObject *args)
{
	unsigned dev, pid;
	gpumon_process *list = NULL;
	size_t n = 0;
	gpumon *g = nvml_get((NvmlObject *)op);
	if (!g || !PyArg_ParseTuple(args, "II:process_used", &dev, &pid))
		return NULL;
	int rc = gpumon_process_list(g, dev, &list, &n);
	if (rc == GPUMON_E_NOT_SUPPORTED || rc == GPUMON_E_NO_PERMISSION)
		Py_RETURN_NONE;
	if (rc)
		return gpx_raise(rc, gpumon_errmsg(g));
	PyObject *res = NULL;
	for (size_t i = 0; i < n && !res; i++)
		if (list[i].pid == pid && (list[i].flags & GPUMON_PROC_USED_KNOWN))
			res = PyLong_FromUnsignedLongLong(list[i].used_bytes);
	gpumon_free(list);
	if (!res)
		Py_RETURN_NONE;
	return res;
}

static PyMethodDef nvml_methods[] = {
    {"close", nvml_close, METH_NOARGS, "close() -- shut NVML down for this handle (idempotent)."},
    {"device_count", nvml_device_count, METH_NOARGS, "device_count() -> number of GPUs."},
    {"driver_version", nvml_driver_version, METH_NOARGS, "driver_version() -> str or None."},
    {"device_info", nvml_device_info, METH_VARARGS,
     "device_info(index) -> dict: index, name, uuid, pci_bus_id, memory_total_bytes, lost."},
    {"device_find", nvml_device_find, METH_VARARGS,
     "device_find(spec) -> NVML index of the GPU named by an index, UUID (or prefix) or PCI bus id."},
    {"sample", nvml_sample, METH_VARARGS,
     "sample(index[, want]) -> (t_ns, memory_api, total, used, free, reserved, util_gpu_pct, "
     "util_memory_pct, temperature_c, power_mw); None where the driver gives no value."},
    {"process_used", nvml_process_used, METH_VARARGS,
     "process_used(index, pid) -> bytes pid holds on the GPU, or None when unknown."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot nvml_slots[] = {
    {Py_tp_doc, (void *)"Nvml() -- a libgpumon handle: NVML loaded and initialised."},
    {Py_tp_init, (void *)nvml_init},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_dealloc, (void *)nvml_dealloc},
    {Py_tp_methods, nvml_methods},
    {0, NULL},
};

static PyType_Spec nvml_spec = {"gpumon._gpumon.Nvml", sizeof(NvmlObject), 0, Py_TPFLAGS_DEFAULT, nvml_slots};

/* ---- module ---------------------------------------------------------------------------------------- */

static PyObject *mod_version(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyUnicode_FromString(gpumon_version());
}

/* words_bytes(n): the library's figure for a byte count ("1.50 GiB"), so that the package's lines
   say sizes as gpumon's other front ends do */
static PyObject *mod_words_bytes(PyObject *m, PyObject *arg)
{
	(void)m;
	unsigned long long n = PyLong_AsUnsignedLongLong(arg);
	if (n == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	char buf[64];
	return PyUnicode_FromString(gpumon_words_bytes(n, buf, sizeof buf));
}

static PyMethodDef module_methods[] = {
    {"version", mod_version, METH_NOARGS, "version() -> libgpumon's version string."},
    {"words_bytes", mod_words_bytes, METH_O,
     "words_bytes(n) -> the library's words for n bytes (an int >= 0): '512 B', '42.0 MiB', '1.50 GiB'."},
    {"words_alert", gpx_words_alert, METH_VARARGS,
     "words_alert(model, i) -> the library's words for the i-th entry of model.alerts()."},
    {"words_verdict", gpx_words_verdict, METH_VARARGS,
     "words_verdict(model, now_s=-1) -> the library's sentence for model.verdict(), or None."},
    {"report", gpx_report, METH_VARARGS,
     "report(path) -> the JSON document (text) of a gpumon recording, as `gpumon report PATH --json`."},
    {"snapshot_condense", (PyCFunction)(void (*)(void))gpx_snapshot_condense, METH_VARARGS | METH_KEYWORDS,
     "snapshot_condense(json_text, device=-1, request=0, pid=0) -> str: torch's allocator snapshot "
     "(the JSON of torch.cuda.memory._snapshot()) condensed by libgpumon, as its JSON; ValueError with "
     "the library's message when the text is not such a snapshot."},
    {"oom_figures", (PyCFunction)(void (*)(void))gpx_oom_figures, METH_VARARGS | METH_KEYWORDS,
     "oom_figures(framework=, pid=, device=, request=, capacity=, free=, process=, allocated=, "
     "reserved=, cap=, largest_free=, peak=) -> str: the figures of an out-of-memory as libgpumon "
     "encodes them (an oom_figures event's text); bytes, None where unknown."},
    {"oom_message_match", gpx_oom_message_match, METH_O,
     "oom_message_match(text) -> the framework's name when a line of text says it ran out of GPU "
     "memory (libgpumon's reading), else None."},
    {"oom_message_parse", gpx_oom_message_parse, METH_O,
     "oom_message_parse(text) -> dict of the figures an out-of-memory message holds (request, device, "
     "capacity, free, process, allocated, reserved, cap, largest_free, peak, framework, others), or None."},
    {"fit_batch", (PyCFunction)(void (*)(void))gpx_fit_batch, METH_VARARGS | METH_KEYWORDS,
     "fit_batch(runs, room_bytes, multiple_of=1, fixed_bytes=None) -> dict: libgpumon's fit of the runs' "
     "peaks on their batch sizes (gpumon_fit_batch): shape ('linear', 'quadratic' or 'none'), fixed_bytes, "
     "per_sample_bytes, per_sample2_bytes, misfit, margin_bytes, max_batch, predicted_peak_bytes, "
     "extrapolated, note. A run is a dict or a tuple (batch, peak_bytes[, allocated_peak_bytes, "
     "reserved_peak_bytes, failed]). ValueError with the library's words for runs it refuses."},
    {"fit_next", (PyCFunction)(void (*)(void))gpx_fit_next, METH_VARARGS | METH_KEYWORDS,
     "fit_next(runs, room_bytes, first, multiple_of=1) -> int: the next batch size worth measuring, 0 "
     "when the runs are enough (gpumon_fit_next)."},
    {"fit_run_from", (PyCFunction)(void (*)(void))gpx_fit_run_from, METH_VARARGS | METH_KEYWORDS,
     "fit_run_from(batch, failed=False, nvml_peak=None, nvml=None, reserved=None, allocated_peak=None, "
     "reserved_peak=None) -> dict: a measured run as fit_batch takes it (batch, peak_bytes, "
     "allocated_peak_bytes, reserved_peak_bytes, failed), its peak by gpumon_fit_run_from."},
    {"job_room", (PyCFunction)(void (*)(void))gpx_job_room, METH_VARARGS | METH_KEYWORDS,
     "job_room(free, process=None, reserved=None, cap=None) -> dict (room_bytes, allocator_bytes, "
     "outside_bytes): what a process may still take on its GPU (gpumon_job_room_get); None when free is "
     "None."},
    {"alloc_plan", (PyCFunction)(void (*)(void))gpx_alloc_plan, METH_VARARGS | METH_KEYWORDS,
     "alloc_plan(frameworks=0, limit=0, fraction=0.0, no_prealloc=False, expandable=False, max_split=0, "
     "gc_threshold=0.0, paddle_strategy=None, gpu_total=0, env=None) -> ([(name, value)], [(note, "
     "no_effect)]): the variables and notes of libgpumon's allocator plan, the one gpumon run uses, "
     "worded with limit_pool()'s keywords; ValueError with the library's words for a conflict."},
    {"size_parse", gpx_size_parse, METH_O,
     "size_parse(text) -> bytes of '8G', '512MiB', '1.5GB' (binary units) or plain digits; None when not a size."},
    {"framework_bits", gpx_framework_bits, METH_O,
     "framework_bits(name) -> the library's bits of a framework's name (torch, paddle, jax, tf, all ...); 0 unknown."},
    {"outside_bytes", gpx_outside_bytes, METH_VARARGS,
     "outside_bytes(nvml, reserved) -> int: what a process holds outside its allocator (CUDA context, "
     "libraries), NVML's figure minus the reserve (gpumon_placed_split); None when either is None or "
     "NVML's figure lags below the reserve."},
    {NULL, NULL, 0, NULL},
};

static int add_type(PyObject *m, const char *name, PyType_Spec *spec)
{
	PyObject *t = PyType_FromSpec(spec);
	if (!t)
		return -1;
	if (spec == &nvml_spec)
		gpx_nvml_type = t;
	if (PyModule_AddObject(m, name, t)) {
		Py_DECREF(t);
		return -1;
	}
	return 0;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_gpumon",
    "libgpumon for the gpumon package (use the package, not this).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__gpumon(void);
PyMODINIT_FUNC PyInit__gpumon(void)
{
	PyObject *m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	if (!gpx_error_type) {
		gpx_error_type = PyErr_NewExceptionWithDoc(
		    "gpumon._gpumon.Error",
		    "libgpumon failed: no NVIDIA driver, the driver did not answer, or a GPU was lost. "
		    "e.status is libgpumon's status code.",
		    PyExc_RuntimeError, NULL);
		if (!gpx_error_type)
			goto fail;
	}
	Py_INCREF(gpx_error_type);
	if (PyModule_AddObject(m, "Error", gpx_error_type)) {
		Py_DECREF(gpx_error_type);
		goto fail;
	}
	if (add_type(m, "Nvml", &nvml_spec) || gpx_add_model_type(m) || gpx_add_io_types(m) ||
	    gpx_add_export_type(m))
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
