/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The types of dprof_selftest.ko. Defined in C so that the module's DWARF names their fields
 * the way kernel structs are named; selftest_main.rs mirrors them with #[repr(C)].
 */
#ifndef DPROF_SELFTEST_H
#define DPROF_SELFTEST_H

#include <linux/types.h>

/* Handed from a producer on one CPU to a consumer on another. */
struct dprof_selftest_obj {
	u64 seq;	/* 0: written at allocation */
	u64 a;		/* 8: written by the producer, read by the consumer */
	u64 b;		/* 16: read by the consumer */
	u64 pad[5];	/* one 64-byte line in all */
};

/* Allocated, touched and freed on one CPU only. */
struct dprof_selftest_local {
	u64 count;	/* 0 */
	u64 value;	/* 8 */
	u64 pad[6];
};

/* Called from Rust (selftest_main.rs). */
struct dprof_selftest_obj *dprof_selftest_shim_alloc_obj(void);
void dprof_selftest_shim_free_obj(struct dprof_selftest_obj *obj);
struct dprof_selftest_local *dprof_selftest_shim_alloc_local(void);
void dprof_selftest_shim_free_local(struct dprof_selftest_local *obj);
void dprof_selftest_shim_cond_resched(void);
void dprof_selftest_shim_pause_us(unsigned long us);
int dprof_selftest_shim_run_threads(int n, const int *cpus, int (*const *fns)(void *), void *arg);
int dprof_selftest_shim_init(void);
void dprof_selftest_shim_exit(void);

#endif
