/* SPDX-License-Identifier: MIT */
/* _gpumon.h — what the C files of the extension share: the error mapping, the heap-type
 * deallocation helper, and access to an Nvml object's handle. Limited API only. */
#ifndef GPUMON_PY_GPUMON_H
#define GPUMON_PY_GPUMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "gpumon/gpumon.h"

/* The module keeps to the limited API of 3.9 (python/CMakeLists.txt); Python.h of 3.9 has no
 * Py_NewRef, which later ones define for every Py_LIMITED_API. */
#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *gpx_new_ref(PyObject *o)
{
	Py_INCREF(o);
	return o;
}
#define Py_NewRef(o) gpx_new_ref((PyObject *)(o))
#endif

/* The module's exception for driver failures (a RuntimeError subclass). */
extern PyObject *gpx_error_type;

/* Raises the Python exception that fits status (ValueError for bad arguments and unknown
 * devices, OSError / FileExistsError for files, MemoryError, else gpx_error_type) with msg, or
 * the status's description when msg is empty. Returns NULL. */
PyObject *gpx_raise(int status, const char *msg);

/* tp_dealloc's last step for the extension's heap types. */
void gpx_free_self(PyObject *self);

/* The Nvml type (set when the module is initialised). */
extern PyObject *gpx_nvml_type;

/* The gpumon handle of an Nvml object; NULL with ValueError set when it is closed. */
gpumon *gpx_nvml_handle(PyObject *nvml);

/* Adds TfEvents and Recording to the module m. Returns 0 or -1 with an exception set. */
int gpx_add_io_types(PyObject *m);

/* Adds Exporter to the module m. Returns 0 or -1 with an exception set. */
int gpx_add_export_type(PyObject *m);

/* Adds Model (the run model) to the module m. Returns 0 or -1 with an exception set. */
int gpx_add_model_type(PyObject *m);

/* report(path) -> the JSON document of a recording, as `gpumon report PATH --json` gives it. */
PyObject *gpx_report(PyObject *mod, PyObject *args);

/* The library's words on a Model m (_gpumon_model.c): words_alert(m, i) -> gpumon_words_alert of the
 * document's alert i (IndexError when there is none); words_verdict(m, now_s=-1) ->
 * gpumon_words_verdict of the run's verdict, or None when no series was fed. */
PyObject *gpx_words_alert(PyObject *mod, PyObject *args);
PyObject *gpx_words_verdict(PyObject *mod, PyObject *args);

/* Out-of-memory (_gpumon_oom.c): snapshot_condense(json_text, device=-1, request=0, pid=0),
 * oom_figures(**figures), oom_message_match(text), oom_message_parse(text). */
PyObject *gpx_snapshot_condense(PyObject *mod, PyObject *args, PyObject *kw);
PyObject *gpx_oom_figures(PyObject *mod, PyObject *args, PyObject *kw);
PyObject *gpx_oom_message_match(PyObject *mod, PyObject *arg);
PyObject *gpx_oom_message_parse(PyObject *mod, PyObject *arg);

/* The batch-size fit (_gpumon_fit.c): fit_batch(runs, room_bytes, multiple_of=1, fixed_bytes=None)
 * -> dict of gpumon_fit's fields; fit_next(runs, room_bytes, first, multiple_of=1) -> int. */
PyObject *gpx_fit_batch(PyObject *mod, PyObject *args, PyObject *kw);
PyObject *gpx_fit_next(PyObject *mod, PyObject *args, PyObject *kw);
/* fit_run_from(batch, failed=False, nvml_peak=None, nvml=None, reserved=None, allocated_peak=None,
 * reserved_peak=None) -> a run's dict; job_room(free, process=None, reserved=None, cap=None) -> dict
 * or None (free unknown). */
PyObject *gpx_fit_run_from(PyObject *mod, PyObject *args, PyObject *kw);
PyObject *gpx_job_room(PyObject *mod, PyObject *args, PyObject *kw);
/* outside_bytes(nvml, reserved) -> int or None (gpumon_placed_split) */
PyObject *gpx_outside_bytes(PyObject *mod, PyObject *args);

/* The allocator plan (_gpumon_alloc.c): alloc_plan(...) -> ([(name, value)], [(note, no_effect)]);
 * size_parse(text) -> int or None; framework_bits(name) -> int. */
PyObject *gpx_alloc_plan(PyObject *mod, PyObject *args, PyObject *kw);
PyObject *gpx_size_parse(PyObject *mod, PyObject *arg);
PyObject *gpx_framework_bits(PyObject *mod, PyObject *arg);

/* An optional non-negative integer argument: None -> *known = 0; else *v and *known = 1. Returns
 * 0, or -1 with ValueError naming `what`. */
int gpx_opt_u64(PyObject *o, uint64_t *v, int *known, const char *what);

/* The arguments (t_ns, pid, device, step, allocated, reserved, max_allocated, limit, framework) of
 * a framework sample, None meaning unknown (limit: the allocator's cap, None or 0 when none is
 * known), into *f. Returns 0, or -1 with an exception set. */
int gpx_parse_framework(PyObject *args, gpumon_framework_sample *f);

#endif
