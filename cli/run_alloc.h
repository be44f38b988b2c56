/* SPDX-License-Identifier: MIT */
/* run_alloc.h — turns `gpumon run`'s plain allocator options into the environment variables each
 * framework reads (Paddle FLAGS_*, PYTORCH_CUDA_ALLOC_CONF, XLA_PYTHON_CLIENT_*, TF_*), with the
 * notes to tell the user when a setting has no effect. Pure functions: no I/O, no globals. */
#ifndef GPUMON_RUN_ALLOC_H
#define GPUMON_RUN_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* Frameworks, as bits of run_alloc_opts.frameworks */
enum {
	RUN_FW_TORCH = 1u << 0,
	RUN_FW_PADDLE = 1u << 1,
	RUN_FW_JAX = 1u << 2,
	RUN_FW_TF = 1u << 3,
	RUN_FW_ALL = (1u << 4) - 1,
};

struct run_alloc_opts {
	unsigned frameworks;          /* RUN_FW_* bits; 0 = all */
	uint64_t limit_bytes;         /* --limit; 0 = none */
	uint64_t initial_bytes;       /* --initial; 0 = none */
	double fraction;              /* --fraction; 0 = none, else 0 < F <= 1 */
	int no_prealloc;              /* --no-prealloc */
	int growth;                   /* --growth */
	int expandable;               /* --expandable */
	uint64_t max_split_bytes;     /* --max-split; 0 = none */
	double gc_threshold;          /* --gc-threshold; 0 = none, else 0 < F < 1 */
	const char *paddle_strategy;  /* --paddle-strategy; NULL = none */
	int jax_platform_allocator;   /* --jax-platform-allocator */
	uint64_t gpu_total_bytes;     /* memory of the GPU the job gets (for JAX's fraction); 0 unknown */
	const char *gpu_spec;         /* --gpu as given; NULL none */
	const char *visible_devices;  /* with --gpu: the CUDA_VISIBLE_DEVICES the job gets */
};

struct run_env_var {
	char *name;
	char *value;
};

struct run_alloc_plan {
	struct run_env_var *vars; /* to set in the job's environment, in a stable order */
	size_t nvars;
	char **notes;             /* sentences for the user */
	unsigned char *loud;      /* per note: 1 when a setting the user gave has no effect at all
				     (said always), 0 when it only explains (said with -v) */
	size_t nnotes;
};

/*
 * Parses a size: digits with an optional fraction and unit, K/M/G/T with or without "i" and "B"
 * (all binary: "8G", "8GB" and "8GiB" are 8 * 2^30, as the frameworks' _mb flags count MiB), or
 * plain bytes. Returns 0 and sets *out, or -1 (bad text, zero or overflow).
 */
int run_alloc_parse_size(const char *s, uint64_t *out);

/* Parses a fraction in (0, hi] (hi_inclusive) or (0, hi). Returns 0 or -1. */
int run_alloc_parse_fraction(const char *s, double hi, int hi_inclusive, double *out);

/* "torch", "paddle", "jax", "tf" (or "tensorflow"), "all" -> RUN_FW_* bits; 0 when unknown.
 * "auto" is not handled here (see run_alloc_detect). */
unsigned run_alloc_framework_bits(const char *name);

/* Guesses the frameworks a script uses from its text (import lines); 0 when none is named. */
unsigned run_alloc_detect(const char *text, size_t len);

/*
 * Validates the options (conflicts, ranges). Returns 0, or -1 with a one-line reason in err.
 */
int run_alloc_check(const struct run_alloc_opts *o, char *err, size_t errlen);

/*
 * Builds the variables and notes for the options o, given the current environment envp
 * (NULL-terminated "NAME=VALUE" strings; NULL = empty): values the user already has are merged
 * (PYTORCH_CUDA_ALLOC_CONF keys) or reported. Returns 0, or -1 when out of memory (out is then
 * empty). Free with run_alloc_plan_free().
 */
int run_alloc_build(const struct run_alloc_opts *o, char *const *envp, struct run_alloc_plan *out);

/* Frees what run_alloc_build() allocated and empties *p. */
void run_alloc_plan_free(struct run_alloc_plan *p);

/* The value of name in envp, or NULL. */
const char *run_alloc_env_get(char *const *envp, const char *name);

#endif
