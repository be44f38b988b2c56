/* SPDX-License-Identifier: MIT */
/* fake_props_calls.c — the fake NVML's calls for device properties, memory health and XID events,
 * answering from the `gpu` property keys and `at T xid` lines (fake_props.h). Not compiled alone:
 * fake_nvml.c includes it, in its full build only, so that it shares that file's call helpers. */

/* nvmlFieldValue_t and nvmlEventData_t as the driver lays them out */
typedef struct {
	unsigned fieldId, scopeId;
	long long timestamp, latencyUsec;
	unsigned valueType;
	nvmlReturn_t nvmlReturn;
	union {
		double dVal;
		unsigned uiVal;
		unsigned long long ullVal;
	} value;
} nvmlFieldValue_t;
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t is 40 bytes");

typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType, eventData;
	unsigned gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

/* An event set: which GPUs take XID events, and the next `at T xid` line to deliver. */
struct fake_event_set {
	unsigned char xid[SCN_MAX_GPUS];
	size_t next;
};
typedef struct fake_event_set *nvmlEventSet_t;

#define FAKE_FI_DEV_MEMORY_TEMP 82u
#define FAKE_EVENT_XID 0x8ull

FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t dev, unsigned *mw);
FAKE_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned *mw);
FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t dev, unsigned *mw);
FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t dev, unsigned *lo, unsigned *hi);
FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t dev, int *mode);
FAKE_API nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t dev, unsigned *pct);
FAKE_API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t dev, int *pstate);
FAKE_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t dev, int count, nvmlFieldValue_t *values);
FAKE_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t dev, unsigned type, unsigned *mhz);
FAKE_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t dev, char *buf, unsigned len);
FAKE_API nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t dev, char *buf, unsigned len);
FAKE_API nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t dev, int *mode);
FAKE_API nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, int *mode);
FAKE_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t dev, unsigned *v);
FAKE_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t dev, unsigned *v);
FAKE_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t dev, unsigned *v);
FAKE_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t dev, unsigned *v);
FAKE_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned *cur, unsigned *pending);
FAKE_API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t dev, int *cur, int *pending);
FAKE_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int type, int counter, unsigned long long *n);
FAKE_API nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t dev, int type, int counter, int location,
						      unsigned long long *n);
FAKE_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t dev, int cause, unsigned *count,
						unsigned long long *addresses);
FAKE_API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev, int *pending);
FAKE_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned *corr, unsigned *unc, unsigned *pending,
						unsigned *failure);
FAKE_API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
FAKE_API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types, nvmlEventSet_t set);
FAKE_API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms);
FAKE_API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);

/* The code a property's value stands for (FP_CODE_FLAG), else SUCCESS. */
static nvmlReturn_t prop_code(const struct call *c, unsigned key)
{
	uint64_t v = c->gpu->props.val[key];
	return v & FP_CODE_FLAG ? (nvmlReturn_t)(v & 0xFFFF) : NVML_SUCCESS;
}

/* A call that reads the properties keys[0..n) (the lock is held on return, as after begin_dev). */
static nvmlReturn_t prop_begin(struct call *c, unsigned fn, nvmlDevice_t dev, int args_ok, const unsigned *keys,
			       size_t n)
{
	nvmlReturn_t r = begin_dev(c, fn, dev, args_ok);
	for (size_t i = 0; r == NVML_SUCCESS && i < n; i++)
		r = prop_code(c, keys[i]);
	return r;
}

/* One unsigned property. */
static nvmlReturn_t prop_uint(unsigned fn, nvmlDevice_t dev, unsigned key, unsigned *out)
{
	struct call c;
	nvmlReturn_t r = prop_begin(&c, fn, dev, out != NULL, &key, 1);
	if (r == NVML_SUCCESS)
		*out = (unsigned)c.gpu->props.val[key];
	return end(r);
}

static nvmlReturn_t prop_int(unsigned fn, nvmlDevice_t dev, unsigned key, int *out)
{
	struct call c;
	nvmlReturn_t r = prop_begin(&c, fn, dev, out != NULL, &key, 1);
	if (r == NVML_SUCCESS)
		*out = (int)c.gpu->props.val[key];
	return end(r);
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t dev, unsigned *mw)
{
	return prop_uint(SCN_FN_POWER_LIMIT, dev, FP_POWER_LIMIT, mw);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned *mw)
{
	return prop_uint(SCN_FN_POWER_ENFORCED, dev, FP_POWER_ENFORCED, mw);
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t dev, unsigned *mw)
{
	return prop_uint(SCN_FN_POWER_DEFAULT, dev, FP_POWER_DEFAULT, mw);
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t dev, unsigned *lo, unsigned *hi)
{
	static const unsigned keys[] = {FP_POWER_MIN, FP_POWER_MAX};
	struct call c;
	nvmlReturn_t r = prop_begin(&c, SCN_FN_POWER_CONSTRAINTS, dev, lo && hi, keys, 2);
	if (r == NVML_SUCCESS) {
		*lo = (unsigned)c.gpu->props.val[FP_POWER_MIN];
		*hi = (unsigned)c.gpu->props.val[FP_POWER_MAX];
	}
	return end(r);
}

nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t dev, int *mode)
{
	return prop_int(SCN_FN_POWER_MODE, dev, FP_POWER_MGMT, mode);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t dev, unsigned *pct)
{
	return prop_uint(SCN_FN_FAN, dev, FP_FAN, pct);
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t dev, int *pstate)
{
	return prop_int(SCN_FN_PSTATE, dev, FP_PSTATE, pstate);
}

/* Only the memory temperature is known; other fields answer NOT_SUPPORTED in their entry. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t dev, int count, nvmlFieldValue_t *values)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_FIELD_VALUES, dev, count >= 0 && (values || count == 0));
	for (int i = 0; r == NVML_SUCCESS && i < count; i++) {
		nvmlFieldValue_t *v = &values[i];
		v->nvmlReturn = (nvmlReturn_t)3; /* NOT_SUPPORTED */
		if (v->fieldId != FAKE_FI_DEV_MEMORY_TEMP)
			continue;
		v->nvmlReturn = prop_code(&c, FP_MEM_TEMP);
		v->valueType = 1; /* unsigned int */
		v->value.uiVal = (unsigned)c.gpu->props.val[FP_MEM_TEMP];
	}
	return end(r);
}

/* Types 0 (graphics), 1 (SM), 2 (memory); others INVALID_ARGUMENT. */
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t dev, unsigned type, unsigned *mhz)
{
	unsigned key = type == 0 ? FP_MAX_GR : type == 1 ? FP_MAX_SM : FP_MAX_MEM;
	struct call c;
	nvmlReturn_t r = prop_begin(&c, SCN_FN_MAX_CLOCK, dev, mhz != NULL && type <= 2, &key, 1);
	if (r == NVML_SUCCESS)
		*mhz = (unsigned)c.gpu->props.val[key];
	return end(r);
}

static nvmlReturn_t prop_text(unsigned fn, nvmlDevice_t dev, unsigned key, char *buf, unsigned len)
{
	struct call c;
	nvmlReturn_t r = prop_begin(&c, fn, dev, buf != NULL, &key, 1);
	if (r == NVML_SUCCESS)
		r = copy_string(buf, len, key == FP_SERIAL ? c.gpu->props.serial : c.gpu->props.vbios);
	return end(r);
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t dev, char *buf, unsigned len)
{
	return prop_text(SCN_FN_SERIAL, dev, FP_SERIAL, buf, len);
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t dev, char *buf, unsigned len)
{
	return prop_text(SCN_FN_VBIOS, dev, FP_VBIOS, buf, len);
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t dev, int *mode)
{
	return prop_int(SCN_FN_COMPUTE_MODE, dev, FP_COMPUTE_MODE, mode);
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, int *mode)
{
	return prop_int(SCN_FN_PERSISTENCE, dev, FP_PERSISTENCE, mode);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t dev, unsigned *v)
{
	return prop_uint(SCN_FN_PCIE_GEN, dev, FP_PCIE_GEN, v);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t dev, unsigned *v)
{
	return prop_uint(SCN_FN_PCIE_GEN_MAX, dev, FP_PCIE_GEN_MAX, v);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t dev, unsigned *v)
{
	return prop_uint(SCN_FN_PCIE_WIDTH, dev, FP_PCIE_WIDTH, v);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t dev, unsigned *v)
{
	return prop_uint(SCN_FN_PCIE_WIDTH_MAX, dev, FP_PCIE_WIDTH_MAX, v);
}

/* Two values of one call: keys[0] into *a, keys[1] into *b. */
static nvmlReturn_t prop_pair(unsigned fn, nvmlDevice_t dev, const unsigned keys[2], unsigned *a, unsigned *b)
{
	struct call c;
	nvmlReturn_t r = prop_begin(&c, fn, dev, a && b, keys, 2);
	if (r == NVML_SUCCESS) {
		*a = (unsigned)c.gpu->props.val[keys[0]];
		*b = (unsigned)c.gpu->props.val[keys[1]];
	}
	return end(r);
}

/* MIG mode: the `mig`/`mig_pending` keys of the GPU (their !CODE included), or a `mig GPU on|off
 * [pending=...]` statement (scenario_mig.c), which turns a mode on where the keys leave it off. */
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned *cur, unsigned *pending)
{
	static const unsigned keys[] = {FP_MIG, FP_MIG_PENDING};
	struct call c;
	nvmlReturn_t r = prop_begin(&c, SCN_FN_MIG_MODE, dev, cur && pending, keys, 2);
	if (r == NVML_SUCCESS) {
		int mc = 0, mp = 0;
		scn_mig_mode(scenario, c.index, &mc, &mp);
		*cur = (unsigned)(c.gpu->props.val[FP_MIG] || mc);
		*pending = (unsigned)(c.gpu->props.val[FP_MIG_PENDING] || mp);
	}
	return end(r);
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t dev, int *cur, int *pending)
{
	static const unsigned keys[] = {FP_ECC, FP_ECC_PENDING};
	return prop_pair(SCN_FN_ECC_MODE, dev, keys, (unsigned *)cur, (unsigned *)pending);
}

/* The ECC count key of first (FP_ECC_CV_*) for error type and counter type (0 or 1 each). */
static unsigned ecc_key(unsigned first, int type, int counter)
{
	return first + (unsigned)(type * 2 + counter);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int type, int counter, unsigned long long *n)
{
	int ok = n && (type == 0 || type == 1) && (counter == 0 || counter == 1);
	unsigned key = ok ? ecc_key(FP_ECC_CV_TOTAL, type, counter) : FP_ECC_CV_TOTAL;
	struct call c;
	nvmlReturn_t r = prop_begin(&c, SCN_FN_ECC_TOTAL, dev, ok, &key, 1);
	if (r == NVML_SUCCESS)
		*n = c.gpu->props.val[key];
	return end(r);
}

/* Locations 2 (DRAM, device memory) and 7 (SRAM); the others are not supported. */
nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t dev, int type, int counter, int location,
					     unsigned long long *n)
{
	int ok = n && (type == 0 || type == 1) && (counter == 0 || counter == 1) && location >= 0 && location <= 7;
	unsigned first = location == 7 ? FP_ECC_CV_SRAM : FP_ECC_CV_DRAM;
	unsigned key = ok ? ecc_key(first, type, counter) : first;
	struct call c;
	nvmlReturn_t r = prop_begin(&c, SCN_FN_ECC_COUNTER, dev, ok, &key, 1);
	if (r == NVML_SUCCESS && location != 2 && location != 7)
		r = (nvmlReturn_t)3; /* NOT_SUPPORTED */
	if (r == NVML_SUCCESS)
		*n = c.gpu->props.val[key];
	return end(r);
}

/* As NVML: a *count below the number of pages gets INSUFFICIENT_SIZE and the number. */
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t dev, int cause, unsigned *count, unsigned long long *addresses)
{
	unsigned key = cause == 1 ? FP_RETIRED_DBE : FP_RETIRED_SBE;
	struct call c;
	nvmlReturn_t r = prop_begin(&c, SCN_FN_RETIRED_PAGES, dev, count && (cause == 0 || cause == 1), &key, 1);
	if (r != NVML_SUCCESS)
		return end(r);
	unsigned pages = (unsigned)c.gpu->props.val[key];
	if (*count < pages || (pages && !addresses)) {
		*count = pages;
		return end(NVML_ERROR_INSUFFICIENT_SIZE);
	}
	for (unsigned i = 0; i < pages; i++)
		addresses[i] = 0x100000ull * (i + 1);
	*count = pages;
	return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev, int *pending)
{
	return prop_int(SCN_FN_RETIRED_PENDING, dev, FP_RETIRED_PENDING, pending);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned *corr, unsigned *unc, unsigned *pending,
				       unsigned *failure)
{
	static const unsigned keys[] = {FP_REMAP_CORR, FP_REMAP_UNC, FP_REMAP_PENDING, FP_REMAP_FAILURE};
	struct call c;
	nvmlReturn_t r = prop_begin(&c, SCN_FN_REMAPPED_ROWS, dev, corr && unc && pending && failure, keys, 4);
	if (r == NVML_SUCCESS) {
		*corr = (unsigned)c.gpu->props.val[FP_REMAP_CORR];
		*unc = (unsigned)c.gpu->props.val[FP_REMAP_UNC];
		*pending = (unsigned)c.gpu->props.val[FP_REMAP_PENDING];
		*failure = (unsigned)c.gpu->props.val[FP_REMAP_FAILURE];
	}
	return end(r);
}

/* ---- XID events ------------------------------------------------------------------------------ */

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	struct call c;
	nvmlReturn_t r = begin_sys(&c, SCN_FN_EVENT_SET_CREATE, set != NULL);
	if (r == NVML_SUCCESS && !(*set = calloc(1, sizeof **set)))
		r = (nvmlReturn_t)20; /* MEMORY */
	return end(r);
}

/* Only XID events are known: other types alone are NOT_SUPPORTED. */
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types, nvmlEventSet_t set)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_REGISTER_EVENTS, dev, set != NULL);
	if (r == NVML_SUCCESS && !(types & FAKE_EVENT_XID))
		r = (nvmlReturn_t)3;
	if (r == NVML_SUCCESS)
		set->xid[c.index] = 1;
	return end(r);
}

/* The first `at T xid` line at or after set->next on a registered GPU; NULL when none is left. */
static const struct fake_xid *next_xid(const struct fake_event_set *set, size_t *at)
{
	for (size_t i = set->next; i < scn_xid_count(scenario); i++) {
		const struct fake_xid *x = scn_xid(scenario, i);
		if (set->xid[x->gpu]) {
			*at = i;
			return x;
		}
	}
	return NULL;
}

/* Gives the next due XID of the set's GPUs; waits (without the lock) until one is due or
 * timeout_ms has passed (TIMEOUT). */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms)
{
	struct call c;
	nvmlReturn_t r = begin_sys(&c, SCN_FN_EVENT_SET_WAIT_V2, set && data);
	if (r != NVML_SUCCESS)
		return end(r);
	const double deadline = c.t + timeout_ms / 1000.0;
	for (;;) {
		size_t at = 0;
		const struct fake_xid *x = next_xid(set, &at);
		if (x && x->t <= c.t) {
			memset(data, 0, sizeof *data);
			data->device = &devs[x->gpu];
			data->eventType = FAKE_EVENT_XID;
			data->eventData = x->code;
			data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
			set->next = at + 1;
			return end(NVML_SUCCESS);
		}
		if (c.t >= deadline)
			return end(NVML_ERROR_TIMEOUT);
		double until = x && x->t < deadline ? x->t : deadline;
		pthread_mutex_unlock(&lock);
		sleep_until(until);
		pthread_mutex_lock(&lock);
		if (!init_count)
			return end(NVML_ERROR_UNINITIALIZED);
		c.t = elapsed();
	}
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	struct call c;
	nvmlReturn_t r = begin_sys(&c, SCN_FN_EVENT_SET_FREE, set != NULL);
	if (r == NVML_SUCCESS)
		free(set);
	return end(r);
}
