/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The types of dprof_selftest.ko. Defined in C so that the module's DWARF names their fields
 * the way kernel structs are named; the Rust side mirrors them with #[repr(C)]. Both sides
 * assert the same size and field offsets, so that a change on one side alone fails the build.
 */
#ifndef DPROF_SELFTEST_H
#define DPROF_SELFTEST_H

#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <linux/types.h>

/* Handed from a producer on one CPU to a consumer on another. */
struct dprof_selftest_obj {
	u64 seq;	/* 0: written at allocation */
	u64 a;		/* 8: written by the producer, read by the consumer */
	u64 b;		/* 16: read by the consumer */
	u64 pad[5];	/* one 64-byte line in all */
};

static_assert(sizeof(struct dprof_selftest_obj) == 64);
static_assert(offsetof(struct dprof_selftest_obj, seq) == 0);
static_assert(offsetof(struct dprof_selftest_obj, a) == 8);
static_assert(offsetof(struct dprof_selftest_obj, b) == 16);
static_assert(offsetof(struct dprof_selftest_obj, pad) == 24);

/* Allocated, touched and freed on one CPU only. */
struct dprof_selftest_local {
	u64 count;	/* 0 */
	u64 value;	/* 8 */
	u64 pad[6];
};

static_assert(sizeof(struct dprof_selftest_local) == 64);
static_assert(offsetof(struct dprof_selftest_local, count) == 0);
static_assert(offsetof(struct dprof_selftest_local, value) == 8);
static_assert(offsetof(struct dprof_selftest_local, pad) == 16);

/*
 * Relayed CPU 0 -> CPU 1 -> CPU 0 with one known access sequence (relay.rs): 64 bytes, four
 * fields 16 bytes apart, each accessed at known steps.
 */
struct dprof_selftest_relay {
	u64 head;	/* 0: written on CPU 0, read on CPU 1 */
	u64 pad_head;
	u64 count;	/* 16: written on CPU 1, read on CPU 0 */
	u64 pad_count;
	u64 flags;	/* 32: written on CPU 0 at the end */
	u64 pad_flags;
	u64 stamp;	/* 48: written on CPU 0 first, read on CPU 0 at the end */
	u64 pad_stamp;
};

static_assert(sizeof(struct dprof_selftest_relay) == 64);
static_assert(offsetof(struct dprof_selftest_relay, head) == 0);
static_assert(offsetof(struct dprof_selftest_relay, count) == 16);
static_assert(offsetof(struct dprof_selftest_relay, flags) == 32);
static_assert(offsetof(struct dprof_selftest_relay, stamp) == 48);

/* Allocated and freed in bulk (bulk.rs): `value` is written. */
struct dprof_selftest_bulk {
	u64 id;		/* 0 */
	u64 value;	/* 8 */
	u64 pad[6];
};

static_assert(sizeof(struct dprof_selftest_bulk) == 64);
static_assert(offsetof(struct dprof_selftest_bulk, id) == 0);
static_assert(offsetof(struct dprof_selftest_bulk, value) == 8);
static_assert(offsetof(struct dprof_selftest_bulk, pad) == 16);

/*
 * Miss classification and working set (misses.rs). Each type has its own cache, named like
 * the struct.
 */

/* Two counters on one 64-byte line, each written by a thread on its own CPU: false sharing. */
struct dprof_selftest_pair {
	u64 left;	/* 0: written by CPU 0 only */
	u64 pad0[3];
	u64 right;	/* 32: written by CPU 1 only */
	u64 pad1[3];
};

static_assert(sizeof(struct dprof_selftest_pair) == 64);
static_assert(offsetof(struct dprof_selftest_pair, left) == 0);
static_assert(offsetof(struct dprof_selftest_pair, pad0) == 8);
static_assert(offsetof(struct dprof_selftest_pair, right) == 32);
static_assert(offsetof(struct dprof_selftest_pair, pad1) == 40);

/* A mailbox: `value` posted by CPU 0, taken by CPU 1: true sharing. */
struct dprof_selftest_shared {
	u64 value;	/* 0 */
	u64 pad[7];
};

static_assert(sizeof(struct dprof_selftest_shared) == 64);
static_assert(offsetof(struct dprof_selftest_shared, value) == 0);
static_assert(offsetof(struct dprof_selftest_shared, pad) == 8);

/*
 * 64 bytes in a cache aligned to a page: every object starts a page, so their lines fall in
 * the few associativity sets whose index is a multiple of PAGE_SIZE / 64: conflict.
 */
struct dprof_selftest_stride {
	u64 key;	/* 0: the only field touched */
	u64 pad[7];
};

static_assert(sizeof(struct dprof_selftest_stride) == 64);
static_assert(offsetof(struct dprof_selftest_stride, key) == 0);
static_assert(offsetof(struct dprof_selftest_stride, pad) == 8);

/* One KiB swept line by line, in a working set several times the last-level cache: capacity. */
struct dprof_selftest_sweep {
	u64 line[16][8];
};

static_assert(sizeof(struct dprof_selftest_sweep) == 1024);
static_assert(offsetof(struct dprof_selftest_sweep, line) == 0);

/*
 * Causal experiments (causal.rs). Each type has its own cache, named like the struct.
 */

/* Accessed by the chain on CPU 0, which the progress point waits on: on the critical path. */
struct dprof_selftest_causal_x {
	u64 step;	/* 0: written by the chain */
	u64 value;	/* 8: read by the chain */
	u64 pad[6];
};

static_assert(sizeof(struct dprof_selftest_causal_x) == 64);
static_assert(offsetof(struct dprof_selftest_causal_x, step) == 0);
static_assert(offsetof(struct dprof_selftest_causal_x, value) == 8);
static_assert(offsetof(struct dprof_selftest_causal_x, pad) == 16);

/* Accessed by a worker on CPU 1 that finishes early: more samples, off the critical path. */
struct dprof_selftest_causal_y {
	u64 count;	/* 0: written by the worker */
	u64 value;	/* 8: read by the worker */
	u64 pad[6];
};

static_assert(sizeof(struct dprof_selftest_causal_y) == 64);
static_assert(offsetof(struct dprof_selftest_causal_y, count) == 0);
static_assert(offsetof(struct dprof_selftest_causal_y, value) == 8);
static_assert(offsetof(struct dprof_selftest_causal_y, pad) == 16);

/* Called from Rust (selftest_main.rs). */
struct dprof_selftest_obj *dprof_selftest_shim_alloc_obj(void);
void dprof_selftest_shim_free_obj(struct dprof_selftest_obj *obj);
struct dprof_selftest_local *dprof_selftest_shim_alloc_local(void);
void dprof_selftest_shim_free_local(struct dprof_selftest_local *obj);
struct dprof_selftest_relay *dprof_selftest_shim_alloc_relay(void);
void dprof_selftest_shim_free_relay(struct dprof_selftest_relay *obj);
int dprof_selftest_shim_alloc_bulk(struct dprof_selftest_bulk **objects, size_t n);
void dprof_selftest_shim_free_bulk(struct dprof_selftest_bulk **objects, size_t n);
int dprof_selftest_shim_kmalloc_64(void **objects, size_t n);
void dprof_selftest_shim_kfree_bulk(void **objects, size_t n);
int dprof_selftest_shim_ephemeral_round(bool b, int objects);
int dprof_selftest_shim_ephemeral_hold(void);
struct dprof_selftest_pair *dprof_selftest_shim_alloc_pair(void);
void dprof_selftest_shim_free_pair(struct dprof_selftest_pair *obj);
struct dprof_selftest_shared *dprof_selftest_shim_alloc_shared(void);
void dprof_selftest_shim_free_shared(struct dprof_selftest_shared *obj);
struct dprof_selftest_stride *dprof_selftest_shim_alloc_stride(void);
void dprof_selftest_shim_free_stride(struct dprof_selftest_stride *obj);
struct dprof_selftest_sweep *dprof_selftest_shim_alloc_sweep(void);
void dprof_selftest_shim_free_sweep(struct dprof_selftest_sweep *obj);
struct dprof_selftest_causal_x *dprof_selftest_shim_alloc_causal_x(void);
void dprof_selftest_shim_free_causal_x(struct dprof_selftest_causal_x *obj);
struct dprof_selftest_causal_y *dprof_selftest_shim_alloc_causal_y(void);
void dprof_selftest_shim_free_causal_y(struct dprof_selftest_causal_y *obj);
void dprof_selftest_shim_cond_resched(void);
void dprof_selftest_shim_pause_us(unsigned long us);
void dprof_selftest_shim_sleep_exact_us(unsigned long us);
bool dprof_selftest_shim_handoff_wait(const u64 *count, u64 target);
void dprof_selftest_shim_handoff_wake(void);
int dprof_selftest_shim_run_threads(int n, const int *cpus, int (*const *fns)(void *), void *arg);
int dprof_selftest_shim_init(void);
void dprof_selftest_shim_exit(void);

#endif
