/* SPDX-License-Identifier: MIT */
/* test_run_alloc.c — `gpumon run`'s pure parts: allocator options to framework variables and
 * notes (the library's allocator plan, lib/alloc_plan.c, as gpumon run and limit_pool() ask),
 * the job's process tree on a tree of our own (run_tree.c over the library's
 * gpumon_host_process_tree; its stat parsing is tested in test_host_process.c), and the
 * socket protocol's line parser (run_socket.c). */
#include <signal.h>
#include <sys/wait.h>

/* tap.h's scenario helpers are not used here: no NVML */
#define FAKE_NVML_LIB ""
#define FAKE_NVML_V1_LIB ""
#include "tap.h"
#include "run_socket.h"
#include "run_tree.h"

static const char *var(const gpumon_alloc_plan *p, const char *name)
{
	for (size_t i = 0; i < p->nvars; i++)
		if (!strcmp(p->vars[i].name, name))
			return p->vars[i].value;
	return NULL;
}

static int has_note(const gpumon_alloc_plan *p, const char *part)
{
	for (size_t i = 0; i < p->nnotes; i++)
		if (strstr(p->notes[i], part))
			return 1;
	return 0;
}

static void test_sizes(void)
{
	uint64_t v = 0;
	ok(gpumon_size_parse("8G", &v) == 0 && v == 8ull << 30, "8G");
	ok(gpumon_size_parse("8GiB", &v) == 0 && v == 8ull << 30, "8GiB");
	ok(gpumon_size_parse("8gb", &v) == 0 && v == 8ull << 30, "8gb is binary too");
	ok(gpumon_size_parse("1.5M", &v) == 0 && v == 3ull << 19, "1.5M");
	ok(gpumon_size_parse("4096", &v) == 0 && v == 4096, "plain bytes");
	ok(gpumon_size_parse("", &v) < 0 && gpumon_size_parse("G", &v) < 0 &&
	   gpumon_size_parse("-1G", &v) < 0 && gpumon_size_parse("0", &v) < 0 &&
	   gpumon_size_parse("8X", &v) < 0 && gpumon_size_parse("8GiBs", &v) < 0 &&
	   gpumon_size_parse("99999999T", &v) < 0 && gpumon_size_parse("nan", &v) < 0,
	   "bad sizes refused");
	double f;
	ok(gpumon_fraction_parse("1", 1, 1, &f) == 0 && f == 1, "fraction 1 allowed");
	ok(gpumon_fraction_parse("1", 1, 0, &f) < 0, "gc threshold 1 refused");
	ok(gpumon_fraction_parse("0", 1, 1, &f) < 0 && gpumon_fraction_parse("1.01", 1, 1, &f) < 0 &&
	   gpumon_fraction_parse("0.5x", 1, 1, &f) < 0 && gpumon_fraction_parse("inf", 1, 1, &f) < 0,
	   "bad fractions refused");
	is_int(gpumon_framework_bits("tf"), GPUMON_FW_TF, "tf");
	is_int(gpumon_framework_bits("all"), GPUMON_FW_ALL, "all");
	is_int(gpumon_framework_bits("mxnet"), 0, "unknown framework");
	const char *py = "import os\nimport torch.nn as nn\nfrom jax import numpy\nimport paddlex\n";
	is_int(gpumon_framework_detect(py, strlen(py)), GPUMON_FW_TORCH | GPUMON_FW_JAX, "detect: torch and jax, not paddlex");
	is_int(gpumon_framework_detect("x = 1", 5), 0, "detect: none");
}

static void test_check(void)
{
	char err[256];
	gpumon_alloc_opts o = {.size = sizeof o, .flags = GPUMON_ALLOC_ENFORCED};
	o.no_prealloc = 1;
	o.paddle_strategy = "naive_best_fit";
	ok(gpumon_alloc_check(&o, err, sizeof err) < 0 && strstr(err, "contradicts"), "no-prealloc vs naive_best_fit");
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.paddle_strategy = "best";
	ok(gpumon_alloc_check(&o, err, sizeof err) < 0, "unknown strategy");
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.max_split_bytes = 20ull << 20;
	ok(gpumon_alloc_check(&o, err, sizeof err) < 0 && strstr(err, "20 MiB"), "max split must be > 20 MiB");
	o.max_split_bytes = 21ull << 20;
	ok(gpumon_alloc_check(&o, err, sizeof err) == 0, "21 MiB is fine");
}

static void test_paddle(void)
{
	gpumon_alloc_plan p;
	gpumon_alloc_opts o = {.size = sizeof o,
				.flags = GPUMON_ALLOC_ENFORCED,
				.frameworks = GPUMON_FW_PADDLE, .limit_bytes = 8ull << 30, .initial_bytes = 1ull << 30,
				   .fraction = 0.5};
	char *env[] = {"FLAGS_malloc_trunk_size=268435456", NULL};
	ok(gpumon_alloc_plan_build(&o, env, &p) == 0, "paddle plan");
	is_str(var(&p, "FLAGS_gpu_memory_limit_mb"), "8192", "limit in MiB");
	is_str(var(&p, "FLAGS_initial_gpu_memory_in_mb"), "1024", "initial in MiB");
	is_str(var(&p, "FLAGS_fraction_of_gpu_memory_to_use"), "0.5", "fraction");
	ok(var(&p, "FLAGS_allocator_strategy") == NULL, "strategy left alone");
	ok(has_note(&p, "--fraction has no effect on Paddle's auto_growth allocator; add "
			"--paddle-strategy naive_best_fit to make it pre-allocate"), "fraction note");
	ok(has_note(&p, "--initial has no effect on Paddle"), "initial note");
	ok(has_note(&p, "FLAGS_malloc_trunk_size (set in your environment) does not exist"), "malloc_trunk_size note");
	ok(var(&p, "PYTORCH_CUDA_ALLOC_CONF") == NULL && var(&p, "XLA_PYTHON_CLIENT_MEM_FRACTION") == NULL,
	   "only paddle's variables");
	gpumon_alloc_plan_free(&p);

	o.paddle_strategy = "naive_best_fit";
	ok(gpumon_alloc_plan_build(&o, NULL, &p) == 0, "paddle naive_best_fit plan");
	is_str(var(&p, "FLAGS_allocator_strategy"), "naive_best_fit", "strategy set");
	ok(!has_note(&p, "has no effect"), "no 'no effect' note under naive_best_fit");
	gpumon_alloc_plan_free(&p);

	gpumon_alloc_opts o2 = {.size = sizeof o2,
				 .flags = GPUMON_ALLOC_ENFORCED,
				 .frameworks = GPUMON_FW_PADDLE, .fraction = 0.3};
	char *env2[] = {"FLAGS_allocator_strategy=naive_best_fit", NULL};
	ok(gpumon_alloc_plan_build(&o2, env2, &p) == 0 && !has_note(&p, "has no effect"),
	   "the user's own FLAGS_allocator_strategy counts");
	gpumon_alloc_plan_free(&p);
}

static void test_torch(void)
{
	gpumon_alloc_plan p;
	gpumon_alloc_opts o = {.size = sizeof o,
				.flags = GPUMON_ALLOC_ENFORCED,
				.frameworks = GPUMON_FW_TORCH, .expandable = 1, .max_split_bytes = 128ull << 20,
				   .gc_threshold = 0.6, .limit_bytes = 4ull << 30};
	char *env[] = {"PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64,backend:native", NULL};
	ok(gpumon_alloc_plan_build(&o, env, &p) == 0, "torch plan");
	is_str(var(&p, "PYTORCH_CUDA_ALLOC_CONF"),
	       "backend:native,expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6",
	       "merged, ours win");
	ok(has_note(&p, "gpumon's value wins"), "merge note");
	ok(has_note(&p, "no variable for a hard limit") && has_note(&p, "set_per_process_memory_fraction"),
	   "limit note names the code change");
	ok(var(&p, "PYTORCH_ALLOC_CONF") == NULL, "newer variable not invented");
	gpumon_alloc_plan_free(&p);
	char *env2[] = {"PYTORCH_ALLOC_CONF=expandable_segments:False", NULL};
	ok(gpumon_alloc_plan_build(&o, env2, &p) == 0, "torch plan with the newer variable");
	is_str(var(&p, "PYTORCH_ALLOC_CONF"), "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6",
	       "the newer variable merged too");
	gpumon_alloc_plan_free(&p);
	gpumon_alloc_opts none = {.size = sizeof none,
				   .flags = GPUMON_ALLOC_ENFORCED,
				   .frameworks = GPUMON_FW_ALL};
	ok(gpumon_alloc_plan_build(&none, env, &p) == 0 && p.nvars == 0 && p.nnotes == 0, "no options: nothing set, nothing said");
	gpumon_alloc_plan_free(&p);
}

static void test_jax_tf(void)
{
	gpumon_alloc_plan p;
	gpumon_alloc_opts o = {.size = sizeof o,
				.flags = GPUMON_ALLOC_ENFORCED,
				.frameworks = GPUMON_FW_JAX | GPUMON_FW_TF, .limit_bytes = 20ull << 30,
				   .gpu_total_bytes = 80ull << 30, .no_prealloc = 1, .jax_platform_allocator = 1};
	ok(gpumon_alloc_plan_build(&o, NULL, &p) == 0, "jax+tf plan");
	is_str(var(&p, "XLA_PYTHON_CLIENT_MEM_FRACTION"), "0.250", "fraction from the limit");
	is_str(var(&p, "XLA_PYTHON_CLIENT_PREALLOCATE"), "false", "no preallocation");
	is_str(var(&p, "XLA_PYTHON_CLIENT_ALLOCATOR"), "platform", "platform allocator when asked");
	is_str(var(&p, "TF_FORCE_GPU_ALLOW_GROWTH"), "true", "tf growth");
	ok(has_note(&p, "TensorFlow has no environment variable for a memory cap"), "tf limit note");
	gpumon_alloc_plan_free(&p);
	o.fraction = 0.9;
	ok(gpumon_alloc_plan_build(&o, NULL, &p) == 0, "jax with explicit fraction");
	is_str(var(&p, "XLA_PYTHON_CLIENT_MEM_FRACTION"), "0.900", "--fraction wins over --limit");
	gpumon_alloc_plan_free(&p);
	gpumon_alloc_opts g = {.size = sizeof g,
				.flags = GPUMON_ALLOC_ENFORCED,
				.frameworks = GPUMON_FW_ALL, .growth = 1};
	ok(gpumon_alloc_plan_build(&g, NULL, &p) == 0, "growth plan");
	is_str(var(&p, "FLAGS_allocator_strategy"), "auto_growth", "paddle grows");
	ok(var(&p, "XLA_PYTHON_CLIENT_ALLOCATOR") == NULL, "no platform allocator unless asked");
	gpumon_alloc_plan_free(&p);
}

/* limit_pool()'s plan: Python's names, and a limit nothing enforces warned about where it does
 * nothing; the strategy in effect named. */
static void test_python(void)
{
	gpumon_alloc_plan p;
	gpumon_alloc_opts o = {.size = sizeof o, .flags = GPUMON_ALLOC_PYTHON_NAMES, .limit_bytes = 8ull << 30,
			       .fraction = 0.5, .frameworks = GPUMON_FW_PADDLE | GPUMON_FW_TORCH | GPUMON_FW_TF};
	char *env[] = {"FLAGS_allocator_strategy=thread_local", NULL};
	ok(gpumon_alloc_plan_build(&o, env, &p) == 0, "python plan");
	size_t i = 0;
	while (i < p.nnotes && !strstr(p.notes[i], "PyTorch has no variable for a memory cap"))
		i++;
	ok(i < p.nnotes && p.no_effect[i] && !strstr(p.notes[i], "gpumon enforces"),
	   "not enforced: PyTorch's missing cap is a setting without effect, and nothing claims to enforce it");
	ok(has_note(&p, "fraction has no effect on Paddle's thread_local allocator; add "
			"paddle_strategy='naive_best_fit' to make it pre-allocate") && !has_note(&p, "--"),
	   "Python's keywords, the user's strategy named");
	ok(has_note(&p, "TensorFlow has no environment variable for a memory cap (limit, fraction): inside the code"),
	   "TensorFlow: no claim of enforcement");
	gpumon_alloc_plan_free(&p);
	char err[200];
	gpumon_alloc_opts bad = {.size = sizeof bad, .flags = GPUMON_ALLOC_PYTHON_NAMES, .no_prealloc = 1,
				 .paddle_strategy = "naive_best_fit"};
	ok(gpumon_alloc_check(&bad, err, sizeof err) == GPUMON_E_INVAL &&
		   !strcmp(err, "no_prealloc=True contradicts paddle_strategy='naive_best_fit', which pre-allocates"),
	   "a conflict in Python's words: %s", err);
	bad.size = 8;
	ok(gpumon_alloc_plan_build(&bad, NULL, &p) == GPUMON_E_INVAL && gpumon_alloc_check(&bad, err, sizeof err),
	   "a size it does not know: refused");
	gpumon_alloc_plan_free(NULL);
}

/* Forks a child that forks a grandchild; both sleep until killed. */
static void test_tree(void)
{
	int fds[2];
	if (pipe(fds) != 0)
		return;
	pid_t child = fork();
	if (child == 0) {
		pid_t g = fork();
		if (g == 0) {
			pause();
			_exit(0);
		}
		if (write(fds[1], &g, sizeof g) != sizeof g)
			_exit(1);
		pause();
		_exit(0);
	}
	pid_t grand = 0;
	if (read(fds[0], &grand, sizeof grand) != sizeof grand)
		grand = 0;
	struct run_tree t;
	ok(run_tree_scan(getpid(), 0, &t) == 0, "scan");
	ok(run_tree_contains(&t, getpid()), "root in the tree");
	ok(run_tree_contains(&t, child), "child in the tree");
	ok(grand > 0 && run_tree_contains(&t, grand), "grandchild in the tree");
	ok(!run_tree_contains(&t, getppid()), "parent not in the tree");
	run_tree_free(&t);
	ok(run_tree_scan(child, 0, &t) == 0 && run_tree_contains(&t, grand) && !run_tree_contains(&t, getpid()),
	   "a subtree");
	run_tree_free(&t);
	ok(run_tree_scan(0x7ffffff0, 0, &t) == 0 && t.n == 1, "a pid that does not exist: only itself");
	run_tree_free(&t);
	kill(grand, SIGKILL);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	close(fds[0]);
	close(fds[1]);
}

static void test_msg(void)
{
	struct run_msg m;
	char err[128];
	const char *hello = "{\"v\":1,\"type\":\"hello\",\"pid\":12,\"framework\":\"torch\",\"version\":\"2.11\"}";
	ok(run_msg_parse(hello, strlen(hello), &m, err, sizeof err) == 0 && m.type == RUN_MSG_HELLO && m.v == 1 &&
	   m.pid == 12 && !strcmp(m.framework, "torch") && !strcmp(m.fw_version, "2.11"), "hello");
	const char *s = "{\"type\":\"sample\",\"t\":1700000000.5,\"step\":3,\"device\":0,\"allocated\":1024,"
			"\"reserved\":null,\"max_allocated\":2048}";
	ok(run_msg_parse(s, strlen(s), &m, err, sizeof err) == 0 && m.type == RUN_MSG_SAMPLE &&
	   m.allocated == 1024 && m.max_allocated == 2048 && !(m.has & RUN_HAS_RESERVED) && m.step == 3 &&
	   m.t == 1700000000.5 && !(m.has & RUN_HAS_LIMIT), "sample, null reserved");
	const char *capped = "{\"type\":\"sample\",\"step\":4,\"allocated\":1024,\"limit\":10737418240}";
	ok(run_msg_parse(capped, strlen(capped), &m, err, sizeof err) == 0 && (m.has & RUN_HAS_LIMIT) &&
	   m.limit == 10737418240ull, "sample with the allocator's cap");
	const char *u = "{\"type\":\"future\",\"x\":[1,2]}";
	ok(run_msg_parse(u, strlen(u), &m, err, sizeof err) == 0 && m.type == RUN_MSG_UNKNOWN, "unknown type");
	const char *bad[] = {"", "{", "[1]", "{\"type\":3}", "{\"type\":\"sample\",\"allocated\":-1}",
			     "{\"type\":\"sample\",\"allocated\":\"1\"}", "{\"type\":\"step\",\"step\":1.5}",
			     "{\"type\":\"x\",\"type\":\"y\"}", "{\"type\":\"marker\",\"text\":7}"};
	int all = 1;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		all &= run_msg_parse(bad[i], strlen(bad[i]), &m, err, sizeof err) < 0 && err[0];
	ok(all, "malformed lines refused with a reason");
}

int main(void)
{
	(void)use_scenario;
	(void)remove_scenario;
	test_sizes();
	test_check();
	test_paddle();
	test_torch();
	test_jax_tf();
	test_python();
	test_tree();
	test_msg();
	return tap_done();
}
