/* SPDX-License-Identifier: MIT */
/* alloc_plan.c — maps allocator settings (`gpumon run`'s options, Python's limit_pool()) to each
 * framework's variables, as the frameworks document them, and says plainly which settings do
 * nothing where, in the words of the front end that asked. Pure: the environment is passed in, the
 * plan is returned. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpumon/gpumon.h>

#define MIB (1024ull * 1024ull)

/* The settings as each front end names them: gpumon run's options, limit_pool()'s keywords. */
enum { N_LIMIT, N_FRACTION, N_INITIAL, N_NBF, N_NO_PREALLOC, N_NO_PREALLOC_HAVE, N_TORCH_KEYS, N_FRAMEWORK,
       N_STRATEGY, N_GC, N_MAX_SPLIT, N_GROWTH, N_COUNT };
static const char *const cli_names[N_COUNT] = {
	"--limit", "--fraction", "--initial", "--paddle-strategy naive_best_fit", "--no-prealloc",
	"--no-prealloc and --growth have", "--expandable, --max-split and --gc-threshold", "--framework",
	"--paddle-strategy", "--gc-threshold", "--max-split", "--growth"};
static const char *const py_names[N_COUNT] = {
	"limit", "fraction", "initial", "paddle_strategy='naive_best_fit'", "no_prealloc=True",
	"no_prealloc has", "expandable, max_split and gc_threshold", "frameworks",
	"paddle_strategy", "gc_threshold", "max_split", "growth"};

static const char *name(const gpumon_alloc_opts *o, int which)
{
	return (o->flags & GPUMON_ALLOC_PYTHON_NAMES ? py_names : cli_names)[which];
}

/* A plan being built; `failed` remembers an allocation failure so callers can chain calls. */
struct builder {
	gpumon_alloc_plan *p;
	const gpumon_alloc_opts *o;
	int failed;
};

/* What a note is about, to tell at the end whether it must be said: an explanation (said with -v),
 * a setting of the user's that does nothing (always said), an option that may act through
 * another framework (said when it acts through none), or a setting without effect on one
 * framework that another may take (said with -v; warned about by Python). */
enum { NOTE_INFO, NOTE_LOUD, NOTE_INITIAL, NOTE_FRACTION, NOTE_HERE };

int gpumon_size_parse(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	char *end;
	if (!s || !isdigit((unsigned char)s[0]))
		return GPUMON_E_INVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v <= 0)
		return GPUMON_E_INVAL;
	uint64_t mul = 1;
	if (*end) {
		const char *u = strchr(units, toupper((unsigned char)*end));
		if (!u)
			return GPUMON_E_INVAL;
		mul = 1ull << (10 * (1 + (u - units)));
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
	}
	if (*end || v * (double)mul >= 1.8e19)
		return GPUMON_E_INVAL;
	*out = (uint64_t)(v * (double)mul);
	return *out ? 0 : GPUMON_E_INVAL;
}

int gpumon_fraction_parse(const char *s, double hi, int hi_inclusive, double *out)
{
	char *end;
	if (!s || !*s)
		return GPUMON_E_INVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v <= 0 || v > hi || (!hi_inclusive && v >= hi))
		return GPUMON_E_INVAL;
	*out = v;
	return 0;
}

unsigned gpumon_framework_bits(const char *name)
{
	if (!name)
		return 0;
	if (!strcmp(name, "torch") || !strcmp(name, "pytorch"))
		return GPUMON_FW_TORCH;
	if (!strcmp(name, "paddle") || !strcmp(name, "paddlepaddle"))
		return GPUMON_FW_PADDLE;
	if (!strcmp(name, "jax"))
		return GPUMON_FW_JAX;
	if (!strcmp(name, "tf") || !strcmp(name, "tensorflow"))
		return GPUMON_FW_TF;
	if (!strcmp(name, "all"))
		return GPUMON_FW_ALL;
	return 0;
}

/* Whether word appears in text right after "import " or "from " (a module at a word boundary). */
static int imports(const char *text, size_t len, const char *word)
{
	static const char *const lead[] = {"import ", "from "};
	size_t wl = strlen(word);
	for (size_t i = 0; i < len; i++) {
		if (i > 0 && text[i - 1] != '\n' && text[i - 1] != ' ' && text[i - 1] != '\t' &&
		    text[i - 1] != ';')
			continue;
		for (size_t k = 0; k < 2; k++) {
			size_t ll = strlen(lead[k]);
			if (len - i < ll + wl || memcmp(text + i, lead[k], ll) != 0)
				continue;
			size_t j = i + ll;
			while (j < len && text[j] == ' ')
				j++;
			if (len - j < wl || memcmp(text + j, word, wl) != 0)
				continue;
			char c = j + wl < len ? text[j + wl] : '\n';
			if (!isalnum((unsigned char)c) && c != '_')
				return 1;
		}
	}
	return 0;
}

unsigned gpumon_framework_detect(const char *text, size_t len)
{
	unsigned bits = 0;
	if (!text)
		return 0;
	if (imports(text, len, "torch"))
		bits |= GPUMON_FW_TORCH;
	if (imports(text, len, "paddle"))
		bits |= GPUMON_FW_PADDLE;
	if (imports(text, len, "jax"))
		bits |= GPUMON_FW_JAX;
	if (imports(text, len, "tensorflow"))
		bits |= GPUMON_FW_TF;
	return bits;
}

static int strategy_known(const char *s)
{
	return s && (!strcmp(s, "auto_growth") || !strcmp(s, "naive_best_fit") || !strcmp(s, "thread_local"));
}

int gpumon_alloc_check(const gpumon_alloc_opts *o, char *err, size_t errlen)
{
	if (!o || o->size != sizeof *o) {
		snprintf(err, errlen, "the allocator options are missing or of a size this library does not know");
		return GPUMON_E_INVAL;
	}
	if (o->paddle_strategy && !strategy_known(o->paddle_strategy)) {
		snprintf(err, errlen, "%s must be one of auto_growth, naive_best_fit or thread_local, not '%s'",
			 name(o, N_STRATEGY), o->paddle_strategy);
		return GPUMON_E_INVAL;
	}
	if (o->fraction < 0 || o->fraction > 1 || o->gc_threshold < 0 || o->gc_threshold >= 1) {
		snprintf(err, errlen, "%s must be in (0, 1] and %s in (0, 1)", name(o, N_FRACTION), name(o, N_GC));
		return GPUMON_E_INVAL;
	}
	if ((o->no_prealloc || o->growth) && o->paddle_strategy && !strcmp(o->paddle_strategy, "naive_best_fit")) {
		snprintf(err, errlen, "%s contradicts %s, which pre-allocates", name(o, o->no_prealloc ? N_NO_PREALLOC : N_GROWTH),
			 name(o, N_NBF));
		return GPUMON_E_INVAL;
	}
	if (o->max_split_bytes && o->max_split_bytes <= 20 * MIB) {
		snprintf(err, errlen, "%s must be more than 20 MiB (PyTorch refuses smaller values)", name(o, N_MAX_SPLIT));
		return GPUMON_E_INVAL;
	}
	if (o->limit_bytes && o->initial_bytes && o->initial_bytes > o->limit_bytes) {
		snprintf(err, errlen, "%s is larger than %s", name(o, N_INITIAL), name(o, N_LIMIT));
		return GPUMON_E_INVAL;
	}
	return 0;
}

const char *gpumon_env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; envp && envp[i]; i++)
		if (!strncmp(envp[i], name, n) && envp[i][n] == '=')
			return envp[i] + n + 1;
	return NULL;
}

static void grow(struct builder *b, void **arr, size_t count, size_t size)
{
	if (b->failed)
		return;
	void *n = realloc(*arr, (count + 1) * size);
	if (!n)
		b->failed = 1;
	else
		*arr = n;
}

/* Sets name=value in the plan (a later set of the same name replaces the value). */
static void set_var(struct builder *b, const char *name, const char *value)
{
	gpumon_alloc_plan *p = b->p;
	if (b->failed)
		return;
	char *v = strdup(value);
	if (!v) {
		b->failed = 1;
		return;
	}
	for (size_t i = 0; i < p->nvars; i++)
		if (!strcmp(p->vars[i].name, name)) {
			free(p->vars[i].value);
			p->vars[i].value = v;
			return;
		}
	char *n = strdup(name);
	grow(b, (void **)&p->vars, p->nvars, sizeof *p->vars);
	if (b->failed || !n) {
		b->failed = 1;
		free(n);
		free(v);
		return;
	}
	p->vars[p->nvars].name = n;
	p->vars[p->nvars++].value = v;
}

static void set_num(struct builder *b, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_num(struct builder *b, const char *name, const char *fmt, ...)
{
	char buf[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	set_var(b, name, buf);
}

static void note(struct builder *b, int about, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(struct builder *b, int about, const char *fmt, ...)
{
	gpumon_alloc_plan *p = b->p;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	grow(b, (void **)&p->notes, p->nnotes, sizeof *p->notes);
	grow(b, (void **)&p->loud, p->nnotes, sizeof *p->loud);
	grow(b, (void **)&p->no_effect, p->nnotes, sizeof *p->no_effect);
	if (b->failed)
		return;
	if (!(p->notes[p->nnotes] = strdup(buf)))
		b->failed = 1;
	else
		p->loud[p->nnotes++] = (unsigned char)about; /* resolved to 0/1 by resolve_loud() */
}

/* The Paddle strategy in effect: the option, else the user's environment, else the default. */
static const char *paddle_strategy(const gpumon_alloc_opts *o, char *const *envp)
{
	if (o->paddle_strategy)
		return o->paddle_strategy;
	if (o->no_prealloc || o->growth)
		return "auto_growth";
	const char *e = gpumon_env_get(envp, "FLAGS_allocator_strategy");
	return e && *e ? e : "auto_growth";
}

static void plan_paddle(struct builder *b, const gpumon_alloc_opts *o, char *const *envp)
{
	const char *strategy = paddle_strategy(o, envp);
	int nbf = !strcmp(strategy, "naive_best_fit");
	if (o->paddle_strategy || o->no_prealloc || o->growth)
		set_var(b, "FLAGS_allocator_strategy", strategy);
	if (o->limit_bytes)
		set_num(b, "FLAGS_gpu_memory_limit_mb", "%llu",
			(unsigned long long)(o->limit_bytes / MIB ? o->limit_bytes / MIB : 1));
	if (o->initial_bytes) {
		set_num(b, "FLAGS_initial_gpu_memory_in_mb", "%llu",
			(unsigned long long)(o->initial_bytes / MIB ? o->initial_bytes / MIB : 1));
		if (!nbf)
			note(b, NOTE_INITIAL, "%s has no effect on Paddle's %s allocator (it sizes naive_best_fit's first "
				"chunk); add %s to use it", name(o, N_INITIAL), strategy, name(o, N_NBF));
	}
	if (o->fraction > 0) {
		set_num(b, "FLAGS_fraction_of_gpu_memory_to_use", "%g", o->fraction);
		if (!nbf) /* the strategy in effect named: the user's own may be thread_local */
			note(b, NOTE_FRACTION, "%s has no effect on Paddle's %s allocator; add %s to make it pre-allocate",
			     name(o, N_FRACTION), strategy, name(o, N_NBF));
		else
			note(b, NOTE_INFO, "Paddle applies %s to the memory free when it starts, not to the total",
			     name(o, N_FRACTION));
	}
	if (gpumon_env_get(envp, "FLAGS_malloc_trunk_size"))
		note(b, NOTE_LOUD, "FLAGS_malloc_trunk_size (set in your environment) does not exist in Paddle and does "
			"nothing; chunk sizes are FLAGS_auto_growth_chunk_size_in_mb (auto_growth) and "
			"FLAGS_reallocate_gpu_memory_in_mb (naive_best_fit)");
}

/* Appends key:value to a comma-separated PyTorch configuration, replacing that key if there. */
static int conf_put(char *conf, size_t cap, const char *key, const char *value, int *replaced)
{
	char out[1024] = "";
	size_t kl = strlen(key);
	const char *s = conf;
	while (*s) {
		const char *e = strchr(s, ',');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (n && !(n > kl && !strncmp(s, key, kl) && s[kl] == ':'))
			snprintf(out + strlen(out), sizeof out - strlen(out), "%s%.*s", out[0] ? "," : "", (int)n, s);
		else if (n)
			*replaced = 1;
		s += n + (e ? 1 : 0);
	}
	snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s:%s", out[0] ? "," : "", key, value);
	if (strlen(out) + 1 > cap)
		return -1;
	memcpy(conf, out, strlen(out) + 1);
	return 0;
}

/* Sets one PyTorch variable: the user's value with our keys merged in (ours win). */
static void torch_conf(struct builder *b, const gpumon_alloc_opts *o, const char *var, const char *user)
{
	char conf[1024], num[32];
	int replaced = 0, ok = 0;
	snprintf(conf, sizeof conf, "%s", user ? user : "");
	if (o->expandable)
		ok |= !conf_put(conf, sizeof conf, "expandable_segments", "True", &replaced);
	if (o->max_split_bytes) {
		snprintf(num, sizeof num, "%llu", (unsigned long long)(o->max_split_bytes / MIB));
		ok |= !conf_put(conf, sizeof conf, "max_split_size_mb", num, &replaced);
	}
	if (o->gc_threshold > 0) {
		snprintf(num, sizeof num, "%g", o->gc_threshold);
		ok |= !conf_put(conf, sizeof conf, "garbage_collection_threshold", num, &replaced);
	}
	if (!ok)
		return;
	set_var(b, var, conf);
	if (user && *user)
		note(b, NOTE_INFO, "%s: kept your keys (%s) and merged gpumon's; where both set a key, gpumon's value wins%s",
		     var, user, replaced ? " (some of yours were replaced)" : "");
}

static void plan_torch(struct builder *b, const gpumon_alloc_opts *o, char *const *envp)
{
	torch_conf(b, o, "PYTORCH_CUDA_ALLOC_CONF", gpumon_env_get(envp, "PYTORCH_CUDA_ALLOC_CONF"));
	const char *newer = gpumon_env_get(envp, "PYTORCH_ALLOC_CONF");
	if (newer)
		torch_conf(b, o, "PYTORCH_ALLOC_CONF", newer); /* newer releases read this one first */
	if (o->limit_bytes && (o->flags & GPUMON_ALLOC_ENFORCED))
		note(b, NOTE_INFO, "PyTorch has no variable for a hard limit: gpumon enforces --limit from outside, at "
			"the NVML level (see --on-exceed); inside the code, "
			"torch.cuda.set_per_process_memory_fraction(F) caps the caching allocator");
	else if (o->limit_bytes) /* nothing enforces it: the limit does nothing to PyTorch */
		note(b, NOTE_HERE, "PyTorch has no variable for a memory cap: inside the code, "
			"torch.cuda.set_per_process_memory_fraction(F) caps the caching allocator");
	if (o->fraction > 0)
		note(b, NOTE_FRACTION, "%s has no environment variable in PyTorch: call "
			"torch.cuda.set_per_process_memory_fraction(%g) in the code", name(o, N_FRACTION), o->fraction);
	if (o->initial_bytes)
		note(b, NOTE_INITIAL, "%s has no effect on PyTorch: its caching allocator never pre-allocates",
		     name(o, N_INITIAL));
}

static void plan_jax(struct builder *b, const gpumon_alloc_opts *o)
{
	if (o->no_prealloc || o->growth)
		set_var(b, "XLA_PYTHON_CLIENT_PREALLOCATE", "false");
	if (o->fraction > 0) {
		set_num(b, "XLA_PYTHON_CLIENT_MEM_FRACTION", "%.3f", o->fraction);
	} else if (o->limit_bytes && o->gpu_total_bytes) {
		double f = (double)o->limit_bytes / (double)o->gpu_total_bytes;
		f = (double)(uint64_t)(f * 1000) / 1000; /* round down: never above the limit */
		if (f > 1)
			f = 1;
		if (f < 0.001)
			f = 0.001;
		set_num(b, "XLA_PYTHON_CLIENT_MEM_FRACTION", "%.3f", f);
		note(b, NOTE_INFO, "JAX: %s became XLA_PYTHON_CLIENT_MEM_FRACTION=%.3f of the GPU's memory%s%s%s",
		     name(o, N_LIMIT), f, o->no_prealloc || o->growth ? "" : " (JAX pre-allocates that much at start; add ",
		     o->no_prealloc || o->growth ? "" : name(o, N_NO_PREALLOC),
		     o->no_prealloc || o->growth ? "" : " to grow instead)");
	} else if (o->limit_bytes) {
		int enforced = !!(o->flags & GPUMON_ALLOC_ENFORCED);
		note(b, enforced ? NOTE_INFO : NOTE_HERE, "JAX: %s could not become a memory fraction (the GPU's size is "
		     "unknown)%s", name(o, N_LIMIT), enforced ? "; gpumon enforces it at the NVML level" : "");
	}
	if (o->initial_bytes)
		note(b, NOTE_INITIAL, "%s has no effect on JAX (use %s for the amount it pre-allocates)", name(o, N_INITIAL),
		     name(o, N_FRACTION));
	if (o->jax_platform_allocator)
		set_var(b, "XLA_PYTHON_CLIENT_ALLOCATOR", "platform");
}

static void plan_tf(struct builder *b, const gpumon_alloc_opts *o)
{
	if (o->no_prealloc || o->growth)
		set_var(b, "TF_FORCE_GPU_ALLOW_GROWTH", "true");
	int enforced = !!(o->flags & GPUMON_ALLOC_ENFORCED);
	if (o->limit_bytes || o->fraction > 0)
		note(b, enforced ? NOTE_INFO : NOTE_HERE, "TensorFlow has no environment variable for a memory cap (%s, %s): "
		     "%sinside the code, tf.config.set_logical_device_configuration(gpu, "
		     "[tf.config.LogicalDeviceConfiguration(memory_limit=MB)]) sets one", name(o, N_LIMIT), name(o, N_FRACTION),
		     enforced ? "gpumon enforces --limit at the NVML level; " : "");
}

/* Options that reach no framework of the selection at all: said always, as nothing else says
 * them. */
static void unused_options(struct builder *b, const gpumon_alloc_opts *o, unsigned fw)
{
	if (!(fw & GPUMON_FW_TORCH) && (o->expandable || o->max_split_bytes || o->gc_threshold > 0))
		note(b, NOTE_LOUD, "%s set PyTorch's allocator only, and %s leaves PyTorch out: they have no effect",
		     name(o, N_TORCH_KEYS), name(o, N_FRAMEWORK));
	if (fw == GPUMON_FW_TORCH && (o->no_prealloc || o->growth))
		note(b, NOTE_LOUD, "%s no effect on PyTorch: its caching allocator never pre-allocates",
		     name(o, N_NO_PREALLOC_HAVE));
	if (!(fw & GPUMON_FW_JAX) && o->jax_platform_allocator)
		note(b, NOTE_LOUD, "--jax-platform-allocator has no effect: %s leaves JAX out", name(o, N_FRAMEWORK));
}

/* Whether Paddle's strategy in effect is naive_best_fit, the one --initial and --fraction size. */
static int paddle_nbf(const gpumon_alloc_opts *o, char *const *envp, unsigned fw)
{
	return (fw & GPUMON_FW_PADDLE) && !strcmp(paddle_strategy(o, envp), "naive_best_fit");
}

/* Each note's kind to 0/1: a per-framework "no effect" note is loud only when the option acts on no
 * framework of the selection (--fraction through JAX or Paddle naive_best_fit, --initial through
 * Paddle naive_best_fit). */
static void resolve_loud(gpumon_alloc_plan *p, const gpumon_alloc_opts *o, unsigned fw, char *const *envp)
{
	int nbf = paddle_nbf(o, envp, fw);
	int initial_acts = nbf, fraction_acts = nbf || (fw & GPUMON_FW_JAX);
	for (size_t i = 0; i < p->nnotes; i++) {
		int about = p->loud[i];
		p->loud[i] = about == NOTE_LOUD || (about == NOTE_INITIAL && !initial_acts) ||
			     (about == NOTE_FRACTION && !fraction_acts);
		p->no_effect[i] = about != NOTE_INFO;
	}
}

int gpumon_alloc_plan_build(const gpumon_alloc_opts *o, char *const *envp, gpumon_alloc_plan *out)
{
	if (!o || !out || o->size != sizeof *o)
		return GPUMON_E_INVAL;
	struct builder b = {out, o, 0};
	unsigned fw = o->frameworks ? o->frameworks : GPUMON_FW_ALL;
	memset(out, 0, sizeof *out);
	if (fw & GPUMON_FW_PADDLE)
		plan_paddle(&b, o, envp);
	if (fw & GPUMON_FW_TORCH)
		plan_torch(&b, o, envp);
	if (fw & GPUMON_FW_JAX)
		plan_jax(&b, o);
	if (fw & GPUMON_FW_TF)
		plan_tf(&b, o);
	const char *had = gpumon_env_get(envp, "CUDA_VISIBLE_DEVICES");
	if (o->visible_devices && had && strcmp(had, o->visible_devices))
		note(&b, NOTE_LOUD, "--gpu %s: the job sees only %s; CUDA_VISIBLE_DEVICES=%s of this shell is replaced",
		     o->gpu_spec ? o->gpu_spec : "", o->visible_devices, had);
	unused_options(&b, o, fw);
	if (b.failed) {
		gpumon_alloc_plan_free(out);
		return GPUMON_E_NOMEM;
	}
	resolve_loud(out, o, fw, envp);
	return 0;
}

void gpumon_alloc_plan_free(gpumon_alloc_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nvars; i++) {
		free(p->vars[i].name);
		free(p->vars[i].value);
	}
	for (size_t i = 0; i < p->nnotes; i++)
		free(p->notes[i]);
	free(p->vars);
	free(p->notes);
	free(p->loud);
	free(p->no_effect);
	memset(p, 0, sizeof *p);
}
