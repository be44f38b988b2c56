/* SPDX-License-Identifier: MIT */
/* test_snapshot.c — PyTorch's allocator snapshot condensed (gpumon_snapshot_condense): the figures of
 * real snapshots captured on an H200 (tests/fixtures/snapshot), small snapshots written here whose
 * answer is plain (fragmentation, which frame is the allocation's site, devices, many sites, ties,
 * keys in any order), every refusal with its message, every truncation of a snapshot; and the
 * condensed form as JSON and back (gpumon_snapshot_encode / _decode). */
#include <gpumon/gpumon.h>

#include <stdarg.h>

#include "tap.h"

#define MIB (1024ull * 1024)
#define GIB (1024ull * MIB)

/* ---- helpers ------------------------------------------------------------------------------------ */

struct sb {
	char *p;
	size_t n, cap;
};

__attribute__((format(printf, 2, 3))) static void sb_add(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	if (!b->p && !(b->p = malloc(b->cap = 256))) {
		printf("Bail out! out of memory\n");
		exit(1);
	}
	for (;;) {
		va_start(ap, fmt);
		int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (k >= 0 && (size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		b->cap = b->cap * 2 + (size_t)(k > 0 ? k : 0) + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p) {
			printf("Bail out! out of memory\n");
			exit(1);
		}
	}
}

/* Condenses len bytes of text from an exact-size copy (a read past its end is caught under ASan). */
static int condense_n(const char *text, size_t len, int device, uint64_t request, gpumon_alloc_snapshot *s,
		      char *err, size_t err_len)
{
	char *copy = malloc(len ? len : 1);
	if (!copy) {
		printf("Bail out! out of memory\n");
		exit(1);
	}
	memcpy(copy, text, len);
	int rc = gpumon_snapshot_condense(copy, len, device, request, s, err, err_len);
	free(copy);
	return rc;
}

static char errbuf[256];

static int condense(const char *text, int device, uint64_t request, gpumon_alloc_snapshot *s)
{
	return condense_n(text, strlen(text), device, request, s, errbuf, sizeof errbuf);
}

static char *read_fixture(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", SNAPSHOT_FIXTURES, name);
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	long n;
	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
	    !(p = malloc((size_t)n + 1)) || fread(p, 1, (size_t)n, f) != (size_t)n) {
		printf("Bail out! cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	p[n] = '\0';
	*len = (size_t)n;
	return p;
}

/* The snapshot encoded and decoded again must be the same struct, byte for byte. */
static void round_trip(const gpumon_alloc_snapshot *s, const char *what)
{
	char *json = NULL;
	gpumon_alloc_snapshot back;
	memset(&back, 0xa5, sizeof back);
	int rc = gpumon_snapshot_encode(s, &json);
	ok(rc == GPUMON_OK && json, "%s: encoded", what);
	if (!json)
		return;
	is_int(gpumon_snapshot_decode(json, strlen(json), &back), GPUMON_OK, "%s: decoded", what);
	ok(!memcmp(s, &back, sizeof back), "%s: the round trip is exact", what);
	gpumon_free(json);
}

/* ---- the fixtures --------------------------------------------------------------------------------
 * The expected figures were computed once by a separate Python script over each fixture (json.load;
 * sums over segments and blocks by state; the site of a live block with frames its first frame,
 * every frame of these captures being the test program's own /srv/job/... file; top segments by
 * total_size minus the live blocks' sizes), not by this library. */

struct fixture {
	const char *file;
	uint64_t request;
	uint64_t reserved, allocated, free, largest_free, unusable, segments, with_free, blocks, unsited;
	unsigned nsegments;
	gpumon_alloc_segment top0;
	const char *site_file;
	unsigned site_line;
	const char *site_function;
	uint64_t site_bytes, site_blocks;
};

/* clang-format off */
static const struct fixture fixtures[] = {
	{"torch-2.11-history.json", 2 * GIB, 419430400, 125829120, 293601280, 14680064, 293601280, 20, 20, 40, 0,
	 16, {20971520, 6291456, 14680064, 0}, "/srv/job/tests/gpu/oom_capture.py", 77, "child_torch", 125829120, 20},
	{"torch-2.11-fragmentation-history-part.json", 40 * GIB, 1258291200, 377487360, 880803840, 12582912,
	 880803840, 60, 60, 180, 0, 16, {20971520, 6291456, 12582912, 0}, "/srv/job/tests/gpu/oom_capture.py", 71,
	 "<genexpr>", 377487360, 60},
	{"torch-2.11-fragmentation-part.json", 40 * GIB, 2516582400, 754974720, 1761607680, 12582912, 1761607680,
	 120, 120, 360, 754974720, 16, {20971520, 6291456, 12582912, 0}, NULL, 0, NULL, 0, 0},
	{"torch-2.11-expandable.json", 1 * GIB, 149254307840, 149250113536, 4194304, 4194304, 4194304, 1, 1, 140,
	 149250113536, 1, {149254307840, 149250113536, 4194304, 1}, NULL, 0, NULL, 0, 0},
	{"torch-2.11-fraction.json", 1 * GIB, 36507222016, 36507222016, 0, 0, 0, 34, 0, 34, 36507222016, 16,
	 {1073741824, 1073741824, 0, 0}, NULL, 0, NULL, 0, 0},
	{"torch-2.11-outside.json", 1 * GIB, 142807662592, 142807662592, 0, 0, 0, 133, 0, 133, 142807662592, 16,
	 {1073741824, 1073741824, 0, 0}, NULL, 0, NULL, 0, 0},
	{"torch-2.11-toobig.json", 200 * GIB, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, NULL, 0, NULL, 0, 0},
};
/* clang-format on */

static void test_fixtures(void)
{
	for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
		const struct fixture *f = &fixtures[i];
		size_t len;
		char *text = read_fixture(f->file, &len);
		gpumon_alloc_snapshot s;
		int rc = condense_n(text, len, -1, f->request, &s, errbuf, sizeof errbuf);
		if (!ok(rc == GPUMON_OK, "%s: condensed", f->file))
			printf("#   %s\n", errbuf);
		is_str(s.framework, "torch", "%s: framework", f->file);
		is_int(s.pid, 0, "%s: pid left to the caller", f->file);
		is_int(s.request_bytes, f->request, "%s: request", f->file);
		is_int(s.reserved_bytes, f->reserved, "%s: reserved", f->file);
		is_int(s.allocated_bytes, f->allocated, "%s: allocated", f->file);
		is_int(s.free_bytes, f->free, "%s: free", f->file);
		is_int(s.largest_free_bytes, f->largest_free, "%s: largest free", f->file);
		is_int(s.unusable_free_bytes, f->unusable, "%s: unusable free", f->file);
		is_int(s.segments, f->segments, "%s: segments", f->file);
		is_int(s.segments_with_free, f->with_free, "%s: segments with free memory", f->file);
		is_int(s.blocks, f->blocks, "%s: blocks", f->file);
		is_int(s.unsited_bytes, f->unsited, "%s: unsited bytes", f->file);
		is_int(s.nsegments, f->nsegments, "%s: top segments", f->file);
		ok(!memcmp(&s.top_segments[0], &f->top0, sizeof f->top0),
		   "%s: the segment with the most free memory", f->file);
		unsigned want_known = GPUMON_SNAP_REQUEST | (f->segments ? GPUMON_SNAP_DEVICE : 0) |
				      (f->site_file ? GPUMON_SNAP_STACKS : 0);
		is_int(s.known, want_known,
		       "%s: known (device 0 when it holds segments, stacks with history)", f->file);
		is_int(s.device, 0, "%s: device", f->file);
		if (f->site_file) {
			is_int(s.nsites, 1, "%s: one site", f->file);
			is_str(s.sites[0].file, f->site_file, "%s: the site's file", f->file);
			is_int(s.sites[0].line, f->site_line, "%s: the site's line", f->file);
			is_str(s.sites[0].function, f->site_function, "%s: the site's function", f->file);
			is_int(s.sites[0].bytes, f->site_bytes, "%s: the site's bytes", f->file);
			is_int(s.sites[0].blocks, f->site_blocks, "%s: the site's blocks", f->file);
		} else {
			is_int(s.nsites, 0, "%s: no sites without history", f->file);
		}
		round_trip(&s, f->file);
		free(text);
	}

	/* the free pieces against smaller requests: fragmentation-part's 12 MiB and 2 MiB pieces (120 of
	   each) against 8 MiB; history's 14 MiB pieces (20) against 14 MiB (usable) and 16 MiB (not) */
	size_t len;
	gpumon_alloc_snapshot s;
	char *text = read_fixture("torch-2.11-fragmentation-part.json", &len);
	condense_n(text, len, 0, 8 * MIB, &s, errbuf, sizeof errbuf);
	is_int(s.unusable_free_bytes, 120 * 2 * MIB, "8 MiB request: the 2 MiB pieces are unusable");
	free(text);
	text = read_fixture("torch-2.11-history.json", &len);
	condense_n(text, len, 0, 14 * MIB, &s, errbuf, sizeof errbuf);
	is_int(s.unusable_free_bytes, 0, "a piece of exactly the request is usable");
	condense_n(text, len, 0, 14 * MIB + 1, &s, errbuf, sizeof errbuf);
	is_int(s.unusable_free_bytes, 20 * 14 * MIB, "one byte more: none is");
	condense_n(text, len, 0, 0, &s, errbuf, sizeof errbuf);
	ok(!(s.known & GPUMON_SNAP_REQUEST) && s.request_bytes == 0 && s.unusable_free_bytes == 0,
	   "no request: none known, nothing unusable");
	condense_n(text, len, 1, 0, &s, errbuf, sizeof errbuf);
	ok(s.known == GPUMON_SNAP_DEVICE && s.device == 1 && s.segments == 0 && s.reserved_bytes == 0,
	   "device 1 of a device-0 snapshot: nothing, device 1 known");
	free(text);
}

/* ---- small snapshots ------------------------------------------------------------------------------ */

#define F(file, line, name) "{\"name\":\"" name "\",\"filename\":\"" file "\",\"line\":" #line "}"
#define USER		    F("/srv/job/train.py", 42, "step")
#define TORCH_NN	    F("/opt/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125, "forward")

static void test_fragmentation(void)
{
	/* three segments of 20 MiB, each a live 6 MiB block and free 14 MiB; 16 MiB asked: 42 MiB free,
	   none of it usable */
	const char *seg = "{\"device\":0,\"total_size\":20971520,\"blocks\":[{\"size\":6291456,\"state\":"
			  "\"active_allocated\"},{\"size\":14680064,\"state\":\"inactive\"}]}";
	char text[1024];
	snprintf(text, sizeof text, "{\"segments\":[%s,%s,%s]}", seg, seg, seg);
	gpumon_alloc_snapshot s;
	is_int(condense(text, -1, 16 * MIB, &s), GPUMON_OK, "fragmented: condensed");
	is_int(s.free_bytes, 42 * MIB, "fragmented: 42 MiB free");
	is_int(s.unusable_free_bytes, 42 * MIB, "fragmented: all of it unusable for 16 MiB");
	is_int(s.largest_free_bytes, 14 * MIB, "fragmented: the largest piece");
	is_int(s.segments_with_free, 3, "fragmented: three segments hold free memory");
	is_int(s.unsited_bytes, 18 * MIB, "fragmented: live blocks without frames are unsited");
	ok(!(s.known & GPUMON_SNAP_STACKS), "fragmented: no stacks");
	is_int(condense(text, -1, 14 * MIB, &s), GPUMON_OK, "14 MiB asked");
	is_int(s.unusable_free_bytes, 0, "14 MiB: every piece fits");

	/* pending free is not free yet; a malformed segment (its blocks larger together than it) takes
	   the blocks' sums and does not underflow */
	is_int(condense("{\"segments\":[{\"device\":0,\"total_size\":100,\"blocks\":[{\"size\":60,\"state\":"
			"\"active_pending_free\"},{\"size\":70,\"state\":\"inactive\"}]}]}",
			-1, 0, &s),
	       GPUMON_OK, "blocks past their segment's size");
	ok(s.allocated_bytes == 60 && s.free_bytes == 70 && s.reserved_bytes == 100,
	   "pending free is allocated; free is the free blocks' sum");
	is_int(s.top_segments[0].allocated_bytes, 60, "the segment's live bytes");
}

/* The site of one live block with these frames (innermost first). */
static gpumon_alloc_site site_of(const char *frames)
{
	struct sb b = {0};
	gpumon_alloc_snapshot s;
	gpumon_alloc_site none;
	memset(&none, 0, sizeof none);
	sb_add(&b,
	       "{\"segments\":[{\"device\":0,\"total_size\":1048576,\"blocks\":[{\"size\":1048576,\"state\":"
	       "\"active_allocated\",\"frames\":[%s]}]}]}",
	       frames);
	int rc = condense(b.p, -1, 0, &s);
	free(b.p);
	if (rc != GPUMON_OK || s.nsites != 1) {
		printf("#   condense: %d, %u sites: %s\n", rc, s.nsites, errbuf);
		return none;
	}
	return s.sites[0];
}

static void site_is(const char *frames, const char *file, unsigned line, const char *what)
{
	gpumon_alloc_site t = site_of(frames);
	if (!ok(!strcmp(t.file, file) && t.line == line, "site: %s", what))
		printf("#   got %s:%u, want %s:%u\n", t.file, t.line, file, line);
}

static void test_sites(void)
{
	site_is(TORCH_NN "," USER, "/srv/job/train.py", 42, "torch's frame inside, the user's line below it");
	site_is(F("/usr/local/lib/python3.10/dist-packages/torch/functional.py", 1, "f") "," USER,
		"/srv/job/train.py", 42, "torch under dist-packages (NGC containers)");
	site_is(F("C:\\\\venv\\\\Lib\\\\site-packages\\\\torch\\\\nn\\\\x.py", 1, "f") "," USER,
		"/srv/job/train.py", 42, "torch under a Windows site-packages");
	site_is(F("/src/pytorch/torch/nn/functional.py", 3, "f") "," USER, "/srv/job/train.py", 42,
		"a PyTorch source checkout");
	site_is(F("/tmp/torchinductor_me/ab/cabc.py", 9, "call") "," USER, "/srv/job/train.py", 42,
		"code torch.compile wrote");
	site_is(F("/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1200,
		  "malloc") "," F("??", 0, "x") "," F("/usr/lib/libtorch_cuda.so", 0, "y") "," USER,
		"/srv/job/train.py", 42, "native frames (stacks=\"all\")");
	site_is(F("/usr/lib/python3.11/contextlib.py", 81, "inner") "," USER, "/srv/job/train.py", 42,
		"a standard library frame");
	site_is(F("/opt/conda/lib64/python3.13t/functools.py", 5, "w") "," USER, "/srv/job/train.py", 42,
		"the standard library of a free-threaded Python under lib64");
	site_is(
	    F("<frozen runpy>", 88, "_run_code") "," F("<string>", 1, "<module>") "," F("", 1, "x") "," USER,
	    "/srv/job/train.py", 42, "pseudo-files");
	site_is(F("/opt/venv/lib/python3.11/site-packages/gpumon/monitor.py", 10, "step") "," USER,
		"/srv/job/train.py", 42, "gpumon's installed package");
	site_is(F("/src/gpumon/python/gpumon/_inside.py", 10, "observe") "," USER, "/srv/job/train.py", 42,
		"a module of gpumon's package in a source tree");
	/* the user's own code wherever it lives, and libraries are sites */
	site_is(F("/home/me/torch/train.py", 7, "main") "," USER, "/home/me/torch/train.py", 7,
		"a project in a directory named torch is the user's");
	site_is(F("/home/me/torch/models/torch/net.py", 8, "f"), "/home/me/torch/models/torch/net.py", 8,
		"... even two levels of it");
	site_is(F("/home/me/gpumon/train.py", 9, "main"), "/home/me/gpumon/train.py", 9,
		"a project named gpumon is the user's");
	site_is(F("/home/me/python3.11/run.py", 4, "main"), "/home/me/python3.11/run.py", 4,
		"a directory python3.11 outside lib is not the standard library");
	site_is(TORCH_NN "," F("/opt/venv/lib/python3.11/site-packages/transformers/modeling.py", 300,
			       "attn") "," USER,
		"/opt/venv/lib/python3.11/site-packages/transformers/modeling.py", 300,
		"a library's frame is a site");
	site_is(F("/usr/lib/python3.11/site-packages/numpy/core.py", 5, "f"),
		"/usr/lib/python3.11/site-packages/numpy/core.py", 5,
		"site-packages inside lib/python3.N is not stdlib");
	site_is(TORCH_NN "," F("/usr/lib/python3.11/runpy.py", 88, "r"),
		"/opt/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125,
		"no user frame: the innermost");
	/* escapes are decoded before the rule and in the site */
	site_is(F("\\/opt\\/venv\\/lib\\/python3.11\\/site-packages\\/torch\\/x.py", 1,
		  "f") "," F("\\/srv\\/job\\/a\\u00e9.py", 5, "g"),
		"/srv/job/a\xc3\xa9.py", 5, "escaped slashes and a \\u escape");
	gpumon_alloc_site t = site_of(F("/srv/job/a.py", 5, "f\\u00e9\\ud83d\\ude00"));
	is_str(t.function, "f\xc3\xa9\xf0\x9f\x98\x80", "a function's escapes and surrogate pair decoded");
	/* frames torch would not write: taken as frames without a file */
	t = site_of("1,{\"filename\":5,\"line\":\"x\"}," F("/srv/job/b.py", -3, "h"));
	ok(!strcmp(t.file, "/srv/job/b.py") && t.line == 0,
	   "malformed frames passed over; a negative line is 0");
	t = site_of("{\"line\":3},{\"name\":\"g\",\"filename\":\"??\",\"line\":1}");
	ok(!strcmp(t.file, "") && t.line == 3 && !strcmp(t.function, ""),
	   "no frame of the user's, the innermost without a file: an empty file");

	/* long strings cut to fit: a path keeps its end, a function its start, at a character's start */
	char path[300], func[101], frames[800];
	memset(path, 'd', sizeof path - 1);
	path[sizeof path - 1] = '\0'; /* 299 bytes */
	memcpy(path, "/srv/", 5);
	memcpy(path + 290, "/train.py", 9);
	/* 188 bytes would be kept, from byte 111: a two-byte character at 110-111 moves the cut past it */
	memcpy(path + 110, "\xc3\xa9", 2);
	memset(func, 'f', sizeof func - 1);
	func[sizeof func - 1] = '\0';
	memcpy(func + 62, "\xc3\xa9", 2); /* would be cut after its first byte */
	snprintf(frames, sizeof frames, "{\"name\":\"%s\",\"filename\":\"%s\",\"line\":1}", func, path);
	t = site_of(frames);
	is_int(strlen(t.file), 3 + 187, "a long path: cut to fit, at a character's start");
	ok(!strncmp(t.file, "...", 3) && !memcmp(t.file + 3, path + 112, 187),
	   "... keeping its last 187 bytes");
	is_int(strlen(t.function), 62, "a long function: its start, cut before a character");
}

static void test_unsited_and_devices(void)
{
	gpumon_alloc_snapshot s;
	const char *text =
	    "{\"segments\":["
	    "{\"device\":0,\"total_size\":1000,\"is_expandable\":true,\"blocks\":["
	    "{\"size\":100,\"state\":\"active_allocated\",\"frames\":[" USER "]},"
	    "{\"size\":200,\"state\":\"active_allocated\",\"frames\":[]},"
	    "{\"size\":300,\"state\":\"active_allocated\"},"
	    "{\"size\":50,\"state\":\"active_allocated\",\"frames\":null},"
	    "{\"size\":350,\"state\":\"inactive\",\"frames\":[" USER "]}]},"
	    "{\"device\":1,\"total_size\":4000,\"blocks\":[{\"size\":4000,\"state\":\"active_allocated\"}]},"
	    "{\"device\":1,\"total_size\":500,\"blocks\":[{\"size\":500,\"state\":\"inactive\"}]}"
	    "],\"device_traces\":[[],[]]}";
	is_int(condense(text, 0, 0, &s), GPUMON_OK, "two devices: device 0");
	ok(s.known == (GPUMON_SNAP_DEVICE | GPUMON_SNAP_STACKS) && s.device == 0,
	   "device 0 known, with stacks");
	ok(s.segments == 1 && s.reserved_bytes == 1000 && s.allocated_bytes == 650 && s.free_bytes == 350 &&
	       s.blocks == 5,
	   "device 0's figures only");
	is_int(s.unsited_bytes, 550, "live blocks with no frames, empty or null frames are unsited");
	ok(s.nsites == 1 && s.sites[0].bytes == 100 && s.sites[0].blocks == 1,
	   "a free block's frames are not a site");
	ok(s.nsegments == 1 && s.top_segments[0].expandable == 1 &&
	       s.top_segments[0].largest_free_bytes == 350,
	   "the segment: expandable, its largest free block");
	is_int(condense(text, 1, 0, &s), GPUMON_OK, "device 1");
	ok(s.known == GPUMON_SNAP_DEVICE && s.device == 1 && s.segments == 2 && s.reserved_bytes == 4500 &&
	       s.allocated_bytes == 4000 && s.unsited_bytes == 4000 && s.nsites == 0,
	   "device 1's figures only");
	ok(s.nsegments == 2 && s.top_segments[0].size_bytes == 500 && s.top_segments[1].size_bytes == 4000,
	   "device 1: the segment with free memory first");
	is_int(condense(text, -1, 0, &s), GPUMON_OK, "every device");
	ok(!(s.known & GPUMON_SNAP_DEVICE) && s.segments == 3 && s.reserved_bytes == 5500,
	   "every device: no one device known, the sums of all");
	is_int(condense(text, -7, 0, &s), GPUMON_OK, "any negative device is every device");
	is_int(s.segments, 3, "... all three segments");
}

static void test_many_sites(void)
{
	/* 20 sites, site i holding i+1 MiB in i+1 blocks of 1 MiB, listed smallest first: the 16
	   largest are kept, largest first */
	struct sb b = {0};
	gpumon_alloc_snapshot s;
	sb_add(&b, "{\"segments\":[{\"device\":0,\"total_size\":%llu,\"blocks\":[", 210 * MIB);
	for (int i = 0, first = 1; i < 20; i++)
		for (int k = 0; k <= i; k++, first = 0)
			sb_add(&b,
			       "%s{\"size\":%llu,\"state\":\"active_allocated\",\"frames\":[" TORCH_NN ","
			       "{\"name\":\"f\",\"filename\":\"/srv/job/s%02d.py\",\"line\":%d}]}",
			       first ? "" : ",", MIB, i, 10 + i);
	sb_add(&b, "]}]}");
	is_int(condense(b.p, -1, 0, &s), GPUMON_OK, "20 sites");
	is_int(s.nsites, GPUMON_SNAPSHOT_SITES, "the 16 largest kept");
	int good = 1;
	for (unsigned i = 0; i < s.nsites; i++) {
		char want[32];
		snprintf(want, sizeof want, "/srv/job/s%02u.py", 19 - i);
		good &= !strcmp(s.sites[i].file, want) && s.sites[i].line == 29 - i &&
			s.sites[i].bytes == (20 - i) * MIB && s.sites[i].blocks == 20 - i;
	}
	ok(good, "largest first, each with its bytes and blocks");
	free(b.p);

	/* ties: equal bytes in file, then line, then function order */
	const char *ties =
	    "{\"segments\":[{\"device\":0,\"total_size\":500,\"blocks\":["
	    "{\"size\":100,\"state\":\"active_allocated\",\"frames\":[" F(
		"/b.py", 1,
		"f") "]},"
		     "{\"size\":100,\"state\":\"active_allocated\",\"frames\":[" F(
			 "/a.py", 9,
			 "f") "]},"
			      "{\"size\":100,\"state\":\"active_allocated\",\"frames\":[" F(
				  "/a.py", 2,
				  "g") "]},"
				       "{\"size\":100,\"state\":\"active_allocated\",\"frames\":[" F(
					   "/a.py", 2,
					   "f") "]},"
						"{\"size\":100,\"state\":\"active_allocated\",\"frames\":[" F(
						    "/c.py", 1, "f") "]}]}]}";
	is_int(condense(ties, -1, 0, &s), GPUMON_OK, "ties");
	ok(s.nsites == 5 && !strcmp(s.sites[0].file, "/a.py") && s.sites[0].line == 2 &&
	       !strcmp(s.sites[0].function, "f") && !strcmp(s.sites[1].function, "g") &&
	       s.sites[2].line == 9 && !strcmp(s.sites[3].file, "/b.py") && !strcmp(s.sites[4].file, "/c.py"),
	   "ties: by file, line, function");

	/* more distinct sites than the table tracks (4096): 6000 sites of one block of 1 MiB, and three
	   sites with one block of 1 MiB among the first (dropped when the table fills: on a tie the
	   table keeps the first files by name) and ten of 100 MiB each after it filled. Their bytes are
	   exact only when the sites kept are counted again. A site of one block of 500 MiB among the first
	   is kept through it: the table drops the sites holding the least. */
	memset(&b, 0, sizeof b);
	sb_add(&b, "{\"segments\":[{\"device\":0,\"total_size\":%llu,\"blocks\":[", 9503 * MIB);
	for (int i = 0; i < 6000; i++) {
		sb_add(&b,
		       "%s{\"size\":%llu,\"state\":\"active_allocated\",\"frames\":[{\"name\":\"f\","
		       "\"filename\":"
		       "\"/srv/job/light%d.py\",\"line\":1}]}",
		       i ? "," : "", MIB, i);
		if (i == 5)
			sb_add(&b,
			       ",{\"size\":%llu,\"state\":\"active_allocated\",\"frames\":[{\"name\":\"e\","
			       "\"filename\":\"/srv/job/early.py\",\"line\":3}]}",
			       500 * MIB);
		if (i == 10 || i == 11 || i == 12 || (i >= 4500 && i % 50 == 0))
			sb_add(&b,
			       ",{\"size\":%llu,\"state\":\"active_allocated\",\"frames\":[{\"name\":\"h\","
			       "\"filename\":\"/srv/job/zheavy%d.py\",\"line\":1}]}",
			       i < 4500 ? MIB : 100 * MIB, i < 4500 ? i - 10 : (i / 50) % 3);
	}
	sb_add(&b, "]}]}");
	is_int(condense(b.p, -1, 0, &s), GPUMON_OK, "6004 distinct sites");
	ok(s.nsites == 16 && !strcmp(s.sites[0].file, "/srv/job/zheavy0.py") &&
	       !strcmp(s.sites[1].file, "/srv/job/zheavy1.py") &&
	       !strcmp(s.sites[2].file, "/srv/job/zheavy2.py"),
	   "the heavy sites first");
	ok(s.sites[0].bytes == 1001 * MIB && s.sites[0].blocks == 11 && s.sites[1].bytes == 1001 * MIB &&
	       s.sites[2].bytes == 1001 * MIB && s.sites[2].blocks == 11,
	   "their bytes and blocks exact, the block before the table filled included");
	ok(!strcmp(s.sites[3].file, "/srv/job/early.py") && s.sites[3].bytes == 500 * MIB &&
	       s.sites[3].blocks == 1,
	   "the large site met before the table filled is kept");
	ok(s.sites[4].bytes == MIB && s.sites[4].blocks == 1 && s.sites[15].bytes == MIB,
	   "the light ones exact too");
	is_int(s.allocated_bytes, 9503 * MIB, "every block counted in the figures");
	free(b.p);
}

static void test_top_segments(void)
{
	/* 20 segments: segment i of 100 bytes with i % 7 * 10 free; the 16 with the most free memory, the
	   earlier first on a tie (told apart by their sizes: 100 + i) */
	struct sb b = {0};
	gpumon_alloc_snapshot s;
	sb_add(&b, "{\"segments\":[");
	for (int i = 0; i < 20; i++) {
		int total = 100 + i, free = i % 7 * 10;
		sb_add(&b,
		       "%s{\"device\":2,\"total_size\":%d,\"blocks\":[{\"size\":%d,\"state\":\"active_"
		       "allocated\"},"
		       "{\"size\":%d,\"state\":\"inactive\"}]}",
		       i ? "," : "", total, total - free, free);
	}
	sb_add(&b, "]}");
	is_int(condense(b.p, -1, 0, &s), GPUMON_OK, "20 segments");
	ok(s.known & GPUMON_SNAP_DEVICE && s.device == 2, "one device in the snapshot: it is known");
	is_int(s.nsegments, 16, "16 kept");
	/* free 60: i = 6, 13; 50: 5, 12, 19; 40: 4, 11, 18; 30: 3, 10, 17; 20: 2, 9, 16; 10: 1, 8, 15 */
	static const int order[16] = {6, 13, 5, 12, 19, 4, 11, 18, 3, 10, 17, 2, 9, 16, 1, 8};
	int good = 1;
	for (int i = 0; i < 16; i++)
		good &= s.top_segments[i].size_bytes == (uint64_t)(100 + order[i]) &&
			s.top_segments[i].largest_free_bytes == (uint64_t)(order[i] % 7 * 10);
	ok(good, "most free first, the earlier on a tie");
	is_int(s.segments_with_free, 20, "every segment holds a free block (three of 0 bytes)");
	free(b.p);
}

/* Keys in another order than torch's (sorted, as a re-serialised snapshot has them: blocks before
 * device and total_size, frames before size and state) give the same answer. */
static void test_key_order(void)
{
	const char *torch_order =
	    "{\"segments\":[{\"device\":0,\"total_size\":300,\"is_expandable\":false,\"blocks\":["
	    "{\"size\":100,\"state\":\"active_allocated\",\"frames\":[" TORCH_NN "," USER "]},"
	    "{\"size\":200,\"state\":\"inactive\",\"frames\":[]}]},"
	    "{\"device\":1,\"total_size\":50,\"blocks\":[{\"size\":50,\"state\":\"active_allocated\","
	    "\"frames\":[" USER "]}]}]}";
	const char *sorted =
	    "{\"allocator_settings\":{},\"device_traces\":[[{\"action\":\"alloc\",\"frames\":[" USER
	    "]}]],\"segments\":["
	    "{\"blocks\":[{\"frames\":[" TORCH_NN "," USER "],\"size\":100,\"state\":\"active_allocated\"},"
	    "{\"frames\":[],\"size\":200,\"state\":\"inactive\"}],\"device\":0,\"is_expandable\":false,"
	    "\"total_size\":300},"
	    "{\"blocks\":[{\"frames\":[" USER "],\"size\":50,\"state\":\"active_allocated\"}],\"device\":1,"
	    "\"total_size\":50}],\"zz_new_key\":{\"a\":[1,2.5e3,-0.5,true,null]}}";
	const char *mixed =
	    "{\"segments\":[{\"total_size\":300,\"blocks\":["
	    "{\"size\":100,\"frames\":[" TORCH_NN "," USER "],\"state\":\"active_allocated\"},"
	    "{\"state\":\"inactive\",\"frames\":[],\"size\":200}],\"device\":0},"
	    "{\"device\":1,\"blocks\":[{\"state\":\"active_allocated\",\"frames\":[" USER "],\"size\":50}],"
	    "\"total_size\":50}]}";
	gpumon_alloc_snapshot a, b;
	is_int(condense(torch_order, 0, 150, &a), GPUMON_OK, "torch's order");
	is_int(condense(sorted, 0, 150, &b), GPUMON_OK, "sorted keys, unknown keys");
	ok(!memcmp(&a, &b, sizeof a), "the same answer");
	is_int(condense(mixed, 0, 150, &b), GPUMON_OK,
	       "frames between size and state, blocks between total_size and device");
	ok(!memcmp(&a, &b, sizeof a), "the same answer");
	ok(a.nsites == 1 && a.sites[0].line == 42 && a.sites[0].bytes == 100 && a.free_bytes == 200 &&
	       a.unusable_free_bytes == 0,
	   "and the right one");
}

struct refusal {
	const char *text, *message;
};

static void test_refusals(void)
{
	static const struct refusal r[] = {
	    {"", "not JSON: premature EOF at byte 0"},
	    {"   ", "not JSON: premature EOF at byte 3"},
	    {"nul", "not JSON: invalid string in json text at byte 3"},
	    {"[]", "not a snapshot: the text is not a JSON object"},
	    {"{}", "not a snapshot: no \"segments\" array"},
	    {"{\"segments\":{}}", "\"segments\" is not an array"},
	    {"{\"segments\":[],\"segments\":[]}", "two \"segments\" arrays"},
	    {"{\"segments\":[]} x", "not JSON: trailing garbage at byte 17"},
	    {"{\"segments\":[1]}", "segment 0 is not an object"},
	    {"{\"segments\":[{\"device\":0,\"blocks\":[]}]}", "segment 0 has no integer total_size"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":\"5\",\"blocks\":[]}]}",
	     "segment 0 has no integer total_size"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":1.5,\"blocks\":[]}]}",
	     "segment 0 has no integer total_size"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":1e3,\"blocks\":[]}]}",
	     "segment 0 has no integer total_size"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":-5,\"blocks\":[]}]}",
	     "segment 0: total_size -5 out of range (0 to 2^50-1)"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":1125899906842624,\"blocks\":[]}]}",
	     "segment 0: total_size 1125899906842624 out of range (0 to 2^50-1)"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":99999999999999999999,\"blocks\":[]}]}",
	     "segment 0 has no integer total_size"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":-9223372036854775808,\"blocks\":[]}]}",
	     "segment 0 has no integer total_size"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":18446744073709551616,\"blocks\":[]}]}",
	     "segment 0 has no integer total_size"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":-9223372036854775807,\"blocks\":[]}]}",
	     "segment 0: total_size -9223372036854775807 out of range (0 to 2^50-1)"},
	    {"{\"segments\":[{\"total_size\":5,\"blocks\":[]}]}", "segment 0 has no integer device"},
	    {"{\"segments\":[{\"device\":-1,\"total_size\":5,\"blocks\":[]}]}",
	     "segment 0: device -1 out of range"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5}]}", "segment 0 has no blocks array"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":{}}]}",
	     "segment 0: blocks is not an array"},
	    {"{\"segments\":[{\"device\":0,\"device\":0,\"total_size\":5,\"blocks\":[]}]}",
	     "segment 0 has two device"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[]},{\"device\":0,\"total_size\":5,"
	     "\"blocks\":"
	     "[\"x\"]}]}",
	     "segment 1: block 0 is not an object"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[{\"size\":1,\"state\":\"inactive\"},{"
	     "\"state\":"
	     "\"inactive\"}]}]}",
	     "segment 0: block 1 has no integer size"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[{\"size\":null,\"state\":"
	     "\"inactive\"}]}]}",
	     "segment 0: block 0 has no integer size"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[{\"size\":-1,\"state\":\"inactive\"}]"
	     "}]}",
	     "segment 0: block 0: size -1 out of range (0 to 2^50-1)"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[{\"size\":6,\"state\":\"inactive\"}]}"
	     "]}",
	     "segment 0: block 0 is larger than its segment"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[{\"size\":1}]}]}",
	     "segment 0: block 0 has no state"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[{\"size\":1,\"state\":3}]}]}",
	     "segment 0: block 0 has no state"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[{\"size\":1,\"state\":\"freed\"}]}]}",
	     "segment 0: block 0 has an unknown state \"freed\""},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[{\"size\":1,\"state\":\"inactive\","
	     "\"frames\":"
	     "{}}]}]}",
	     "segment 0: block 0: frames is not an array"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":5,\"blocks\":[{\"size\":1,\"size\":1,\"state\":"
	     "\"inactive\"}]}"
	     "]}",
	     "segment 0: block 0 has two size"},
	    /* the sums: segments, then blocks, past GPUMON_MAX_BYTES (and so far from 2^63) */
	    {"{\"segments\":[{\"device\":0,\"total_size\":1125899906842623,\"blocks\":[]},{\"device\":1,"
	     "\"total_size\":"
	     "1,\"blocks\":[]}]}",
	     "segment 1: the segments add up past 2^50 bytes"},
	    {"{\"segments\":[{\"device\":0,\"total_size\":1125899906842623,\"blocks\":[{\"size\":"
	     "1125899906842623,"
	     "\"state\":\"inactive\"},{\"size\":1,\"state\":\"inactive\"}]}]}",
	     "segment 0: block 1: the blocks add up past 2^50 bytes"},
	    /* JSON itself */
	    {"{\"segments\":[],}", "not JSON: invalid object key (must be a string) at byte 16"},
	    {"{\"segments\" []}", "not JSON: object key and value must be separated by a colon (':') at byte 13"},
	    {"{\"segments\":[]", "not JSON: premature EOF at byte 14"},
	    {"{\"segments\":[],\"x\":[01]}", "not JSON: after array element, I expect ',' or ']' at byte 22"},
	    {"{\"segments\":[-]}", "not JSON: malformed number, a digit is required after the minus sign at byte 14"},
	    {"{\"segments\":[1.]}", "not JSON: malformed number, a digit is required after the decimal point at byte 15"},
	    {"{\"segments\":[],\"x\":\"a\tb\"}", "not JSON: invalid character inside string at byte 21"},
	    {"{\"segments\":[],\"x\":\"\xff\"}", "not JSON: invalid bytes in UTF8 string at byte 21"},
	    {"{\"segments\":[],\"x\":\"\xc0\xaf\"}", "not JSON: invalid UTF-8 at byte 20"},
	    {"{\"segments\":[],\"x\":\"\xed\xa0\x80\"}", "not JSON: invalid UTF-8 at byte 20"},
	    {"{\"segments\":[],\"x\":\"\\ud800\"}", "not JSON: an invalid escape at byte 20"},
	    {"{\"segments\":[],\"x\":\"\\u0000\"}", "not JSON: an invalid escape at byte 20"},
	    {"{\"segments\":[],\"x\":\"\\x\"}",
	     "not JSON: inside a string, '\\' occurs before a character which it may not at byte 21"},
	    /* what yajl lets through: lone surrogates (it writes '?' or CESU-8), a high one paired with
	     * no low one, bytes past U+10FFFF, \u0000 after an escaped quote, in a key; \f and \v */
	    {"{\"segments\":[],\"x\":\"\\udc00\"}", "not JSON: an invalid escape at byte 20"},
	    {"{\"segments\":[],\"x\":\"\\ud800\\u0041\"}", "not JSON: an invalid escape at byte 20"},
	    {"{\"segments\":[],\"x\":\"\xf4\x90\x80\x80\"}", "not JSON: invalid UTF-8 at byte 20"},
	    {"{\"segments\":[],\"x\":\"a\\\"\\u0000\"}", "not JSON: an invalid escape at byte 23"},
	    {"{\"segments\":[],\"\\u0000\":1}", "not JSON: an invalid escape at byte 16"},
	    {"{\"segments\":[]}\f", "not JSON: a form feed or vertical tab at byte 15"},
	    {"{\"segments\":\v[]}", "not JSON: a form feed or vertical tab at byte 12"},
	    {"{\"segments\":[],\"x\":\"abc}", "not JSON: premature EOF at byte 24"},
	    {"{\"segments\":[],\"x\":tru}", "not JSON: invalid string in json text at byte 22"},
	};
	gpumon_alloc_snapshot s;
	for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
		memset(&s, 0x5a, sizeof s);
		int rc = condense(r[i].text, -1, 0, &s);
		is_int(rc, GPUMON_E_INVAL, "refused: %s", r[i].message);
		is_str(errbuf, r[i].message, "... with its message");
		gpumon_alloc_snapshot zero;
		memset(&zero, 0, sizeof zero);
		if (i == 0)
			ok(!memcmp(&s, &zero, sizeof s), "a refusal leaves *out cleared");
	}
	/* nesting: deep where it is skipped, refused past 512 levels */
	struct sb b = {0};
	sb_add(&b, "{\"segments\":[],\"x\":");
	for (int i = 0; i < 600; i++)
		sb_add(&b, "[");
	for (int i = 0; i < 600; i++)
		sb_add(&b, "]");
	sb_add(&b, "}");
	is_int(condense(b.p, -1, 0, &s), GPUMON_E_INVAL, "600 levels of nesting refused");
	ok(strstr(errbuf, "nesting too deep") != NULL, "... as too deep (%s)", errbuf);
	free(b.p);

	is_int(condense("{\"segments\":[{\"device\":-0,\"total_size\":-0,\"blocks\":[]}]}", -1, 0, &s),
	       GPUMON_OK, "-0 is 0");
	ok(s.segments == 1 && (s.known & GPUMON_SNAP_DEVICE) && s.device == 0,
	   "... device 0, an empty segment");

	/* numbers past long long and double: read as written (yajl_number), not integers, never an error */
	is_int(condense("{\"segments\":[],\"x\":[123456789012345678901234567890,-1e400,1.5]}", -1, 0, &s),
	       GPUMON_OK, "numbers past long long and double where they are not read");

	/* the arguments */
	is_int(gpumon_snapshot_condense(NULL, 0, -1, 0, &s, errbuf, sizeof errbuf), GPUMON_E_INVAL,
	       "no text");
	is_str(errbuf, "no snapshot", "... says so");
	is_int(gpumon_snapshot_condense("{}", 2, -1, 0, NULL, errbuf, sizeof errbuf), GPUMON_E_INVAL,
	       "no out");
	is_int(condense("{\"segments\":[]}", -1, GPUMON_MAX_BYTES + 1, &s), GPUMON_E_INVAL,
	       "an absurd request");
	is_str(errbuf, "request of 1125899906842624 bytes out of range", "... says so");
	is_int(gpumon_snapshot_condense("[", 1, -1, 0, &s, NULL, 100), GPUMON_E_INVAL,
	       "no message buffer: fine");
	char small[8];
	memset(small, 'x', sizeof small);
	gpumon_snapshot_condense("[", 1, -1, 0, &s, small, sizeof small);
	is_str(small, "not JSO", "a short message buffer: the message cut, terminated");
	memset(small, 'x', sizeof small);
	gpumon_snapshot_condense("{\"segments\":[]}", 15, -1, 0, &s, small, sizeof small);
	is_str(small, "", "success: an empty message");
}

/* Every prefix of a snapshot is refused, cleanly (and read within its bounds: exact-size copies). */
static void test_truncated(void)
{
	const char *text =
	    "{\"segments\":[{\"device\":0,\"address\":1,\"total_size\":20971520,\"is_expandable\":false,"
	    "\"blocks\":["
	    "{\"address\":1,\"size\":6291456,\"requested_size\":6291456,\"state\":\"active_allocated\","
	    "\"frames\":["
	    "{\"name\":\"f\\u00e9\",\"filename\":\"\\/srv\\/job\\/a.py\",\"line\":12}," USER "]},"
	    "{\"address\":2,\"size\":14680064,\"requested_size\":0,\"state\":\"inactive\",\"frames\":[]}]}],"
	    "\"device_traces\":[[{\"action\":\"alloc\",\"size\":-1.5e-3,\"x\":[true,false,null]}]]}";
	size_t len = strlen(text), refused = 0;
	gpumon_alloc_snapshot s;
	for (size_t n = 0; n < len; n++)
		refused +=
		    condense_n(text, n, -1, 0, &s, errbuf, sizeof errbuf) == GPUMON_E_INVAL && errbuf[0];
	is_int(refused, len, "each of the %zu prefixes refused with a message", len);
	is_int(condense_n(text, len, -1, 0, &s, errbuf, sizeof errbuf), GPUMON_OK,
	       "the whole text condensed");
	ok(s.nsites == 1 && !strcmp(s.sites[0].file, "/srv/job/a.py") &&
	       !strcmp(s.sites[0].function, "f\xc3\xa9"),
	   "... its site");
}

/* ---- encode / decode ------------------------------------------------------------------------------ */

static gpumon_alloc_snapshot sample(void)
{
	gpumon_alloc_snapshot s;
	memset(&s, 0, sizeof s);
	s.known = GPUMON_SNAP_REQUEST | GPUMON_SNAP_STACKS | GPUMON_SNAP_DEVICE;
	strcpy(s.framework, "torch");
	s.pid = 4242;
	s.device = 3;
	s.request_bytes = GPUMON_MAX_BYTES;
	s.reserved_bytes = 100 * GIB;
	s.allocated_bytes = 60 * GIB;
	s.free_bytes = 40 * GIB;
	s.largest_free_bytes = 20 * MIB;
	s.unusable_free_bytes = 40 * GIB;
	s.segments = 2000;
	s.segments_with_free = 1500;
	s.blocks = 6000;
	s.unsited_bytes = 1;
	s.nsites = GPUMON_SNAPSHOT_SITES;
	for (unsigned i = 0; i < s.nsites; i++) {
		snprintf(s.sites[i].file, sizeof s.sites[i].file, "/srv/job/\xc3\xa9t\xc3\xa9/\"q\"\\%u.py",
			 i);
		s.sites[i].line = UINT32_MAX - i;
		snprintf(s.sites[i].function, sizeof s.sites[i].function, "f%u\n", i);
		s.sites[i].bytes = GPUMON_MAX_BYTES - i;
		s.sites[i].blocks = i;
	}
	memset(s.sites[0].file, 'p', sizeof s.sites[0].file - 1);
	memset(s.sites[0].function, 'q', sizeof s.sites[0].function - 1);
	s.nsegments = 2;
	s.top_segments[0].size_bytes = s.top_segments[0].largest_free_bytes = GPUMON_MAX_BYTES;
	s.top_segments[0].expandable = 1;
	s.top_segments[1].size_bytes = 20 * MIB;
	s.top_segments[1].allocated_bytes = 6 * MIB;
	s.top_segments[1].largest_free_bytes = 14 * MIB;
	return s;
}

static void test_encode_decode(void)
{
	gpumon_alloc_snapshot s = sample(), d;
	round_trip(&s, "every field at its largest");
	s.known = 0;
	s.device = 0;
	s.request_bytes = 0;
	s.nsites = s.nsegments = 0;
	memset(s.sites, 0, sizeof s.sites);
	memset(s.top_segments, 0, sizeof s.top_segments);
	round_trip(&s, "nothing known, no sites");
	char *json = NULL;
	gpumon_snapshot_encode(&s, &json);
	ok(json && !strstr(json, "\"device\"") && !strstr(json, "\"request_bytes\"") &&
	       strstr(json, "\"stacks\":false"),
	   "device and request only when known; stacks false");
	gpumon_free(json);
	s = sample();
	s.known = GPUMON_SNAP_DEVICE;
	s.device = 0;
	s.nsites = 1;
	s.nsegments = 1;
	gpumon_snapshot_encode(&s, &json);
	struct sb want = {0};
	sb_add(
	    &want,
	    "{\"framework\":\"torch\",\"pid\":4242,\"device\":0,\"reserved_bytes\":107374182400,\"allocated_"
	    "bytes\":"
	    "64424509440,\"free_bytes\":42949672960,\"largest_free_bytes\":20971520,\"unusable_free_bytes\":"
	    "42949672960,\"segments\":2000,\"segments_with_free\":1500,\"blocks\":6000,\"unsited_bytes\":1,"
	    "\"stacks\":false,\"sites\":[{\"file\":\"%s\",\"line\":4294967295,\"function\":\"%s\","
	    "\"bytes\":1125899906842623,\"blocks\":0}],\"top_segments\":[{\"size_bytes\":1125899906842623,"
	    "\"allocated_bytes\":0,\"largest_free_bytes\":1125899906842623,\"expandable\":true}]}",
	    s.sites[0].file, s.sites[0].function);
	is_str(json, want.p, "the document, compact, in the fields' order");
	free(want.p);
	gpumon_free(json);

	/* encode refuses what it could not write back */
	s = sample();
	is_int(gpumon_snapshot_encode(NULL, &json), GPUMON_E_INVAL, "encode: no snapshot");
	is_int(gpumon_snapshot_encode(&s, NULL), GPUMON_E_INVAL, "encode: nowhere to put it");
	s.nsites = GPUMON_SNAPSHOT_SITES + 1;
	is_int(gpumon_snapshot_encode(&s, &json), GPUMON_E_INVAL, "encode: too many sites");
	ok(json == NULL, "... *json NULL");
	s = sample();
	s.sites[2].file[0] = '\xff';
	is_int(gpumon_snapshot_encode(&s, &json), GPUMON_E_INVAL, "encode: a file that is not UTF-8");
	s = sample();
	memset(s.framework, 'x', sizeof s.framework);
	is_int(gpumon_snapshot_encode(&s, &json), GPUMON_E_INVAL, "encode: an unterminated string");
	s = sample();
	s.free_bytes = GPUMON_MAX_BYTES + 1;
	is_int(gpumon_snapshot_encode(&s, &json), GPUMON_E_INVAL, "encode: a figure past GPUMON_MAX_BYTES");
	s = sample();
	s.known |= 1u << 7;
	is_int(gpumon_snapshot_encode(&s, &json), GPUMON_E_INVAL, "encode: an unknown bit");
	s = sample();
	s.top_segments[1].expandable = 2;
	is_int(gpumon_snapshot_encode(&s, &json), GPUMON_E_INVAL, "encode: expandable neither 0 nor 1");

	/* decode refuses what encode would not write */
	const char *base =
	    "\"framework\":\"torch\",\"pid\":1,\"reserved_bytes\":0,\"allocated_bytes\":0,\"free_bytes\":0,"
	    "\"largest_free_bytes\":0,\"unusable_free_bytes\":0,\"segments\":0,\"segments_with_free\":0,"
	    "\"blocks\":0,\"unsited_bytes\":0,\"stacks\":true";
	static const struct {
		const char *extra, *what;
		int rc;
	} cases[] = {
	    {",\"sites\":[],\"top_segments\":[]", "the smallest document", GPUMON_OK},
	    {",\"sites\":[],\"top_segments\":[],\"new_key\":[1]", "unknown keys ignored", GPUMON_OK},
	    {",\"sites\":[]", "no top_segments", GPUMON_E_INVAL},
	    {",\"sites\":{},\"top_segments\":[]", "sites not an array", GPUMON_E_INVAL},
	    {",\"sites\":[],\"top_segments\":[],\"device\":-1", "a negative device", GPUMON_E_INVAL},
	    {",\"sites\":[],\"top_segments\":[],\"device\":\"0\"", "a device not a number", GPUMON_E_INVAL},
	    {",\"sites\":[],\"top_segments\":[],\"request_bytes\":0", "a request of 0", GPUMON_E_INVAL},
	    {",\"sites\":[],\"top_segments\":[],\"request_bytes\":1125899906842624",
	     "a request past the maximum", GPUMON_E_INVAL},
	    {",\"sites\":[],\"top_segments\":[],\"pid\":4294967296", "a pid past 32 bits", GPUMON_E_INVAL},
	    {",\"sites\":[{\"file\":\"a\",\"line\":1,\"function\":\"f\",\"bytes\":-1,\"blocks\":1}],\"top_"
	     "segments\":[]",
	     "negative bytes", GPUMON_E_INVAL},
	    {",\"sites\":[{\"file\":\"a\",\"line\":4294967296,\"function\":\"f\",\"bytes\":1,\"blocks\":1}],"
	     "\"top_segments\":[]",
	     "a line past 32 bits", GPUMON_E_INVAL},
	    {",\"sites\":[{\"file\":\"a\",\"line\":1,\"function\":\"f\",\"bytes\":1}],\"top_segments\":[]",
	     "a site without blocks", GPUMON_E_INVAL},
	    {",\"sites\":[{\"file\":\"a\",\"line\":1,\"function\":\"f\\u0000\",\"bytes\":1,\"blocks\":1}],"
	     "\"top_segments\":[]",
	     "a NUL in a string", GPUMON_E_INVAL},
	    {",\"sites\":[],\"top_segments\":[{\"size_bytes\":1,\"allocated_bytes\":1,\"largest_free_bytes\":"
	     "0,"
	     "\"expandable\":1}]",
	     "expandable not a boolean", GPUMON_E_INVAL},
	    {",\"sites\":[],\"top_segments\":[3]", "a segment not an object", GPUMON_E_INVAL},
	};
	char text[1024];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(text, sizeof text, "{%s%s}", base, cases[i].extra);
		is_int(gpumon_snapshot_decode(text, strlen(text), &d), cases[i].rc, "decode: %s",
		       cases[i].what);
	}
	snprintf(text, sizeof text, "{%s,\"sites\":[],\"top_segments\":[]}", base);
	gpumon_snapshot_decode(text, strlen(text), &d);
	ok(d.known == GPUMON_SNAP_STACKS && d.pid == 1 && !strcmp(d.framework, "torch"),
	   "decode: the smallest, read");
	/* a string one longer than its array, a list one longer than its array */
	struct sb b = {0};
	sb_add(&b,
	       "{%s,\"sites\":[{\"file\":\"%0192d\",\"line\":1,\"function\":\"f\",\"bytes\":1,\"blocks\":1}],"
	       "\"top_segments\":[]}",
	       base, 0);
	is_int(gpumon_snapshot_decode(b.p, b.n, &d), GPUMON_E_INVAL, "decode: a file of 192 bytes");
	b.n = 0;
	sb_add(&b,
	       "{%s,\"sites\":[{\"file\":\"%0191d\",\"line\":1,\"function\":\"%063d\",\"bytes\":1,\"blocks\":"
	       "1}],"
	       "\"top_segments\":[]}",
	       base, 0, 0);
	is_int(gpumon_snapshot_decode(b.p, b.n, &d), GPUMON_OK, "decode: 191 and 63 bytes fit");
	b.n = 0;
	sb_add(&b, "{%s,\"sites\":[],\"top_segments\":[", base);
	for (int i = 0; i <= GPUMON_SNAPSHOT_SEGMENTS; i++)
		sb_add(&b,
		       "%s{\"size_bytes\":1,\"allocated_bytes\":1,\"largest_free_bytes\":0,\"expandable\":"
		       "false}",
		       i ? "," : "");
	sb_add(&b, "]}");
	is_int(gpumon_snapshot_decode(b.p, b.n, &d), GPUMON_E_INVAL, "decode: 17 top segments");
	free(b.p);
	is_int(gpumon_snapshot_decode("[]", 2, &d), GPUMON_E_INVAL, "decode: not an object");
	is_int(gpumon_snapshot_decode("{", 1, &d), GPUMON_E_INVAL, "decode: not JSON");
	is_int(gpumon_snapshot_decode(NULL, 0, &d), GPUMON_E_INVAL, "decode: no text");
	is_int(gpumon_snapshot_decode("{}", 2, NULL), GPUMON_E_INVAL, "decode: no out");
	/* every prefix of a document refused */
	s = sample();
	gpumon_snapshot_encode(&s, &json);
	size_t refused = 0, len = json ? strlen(json) : 0;
	for (size_t n = 0; n < len; n++)
		refused += gpumon_snapshot_decode(json, n, &d) == GPUMON_E_INVAL;
	is_int(refused, len, "decode: every prefix refused");
	gpumon_free(json);
}

int main(void)
{
	test_fixtures();
	test_fragmentation();
	test_sites();
	test_unsited_and_devices();
	test_many_sites();
	test_top_segments();
	test_key_order();
	test_refusals();
	test_truncated();
	test_encode_decode();
	return tap_done();
}
