/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The functions dprof_shim.c exports to the Rust side of dprof.ko (declared again, by hand, in
 * ffi.rs: an out-of-tree module cannot add headers to the generated bindings).
 */
#ifndef DPROF_SHIM_H
#define DPROF_SHIM_H

#include <linux/types.h>

struct kmem_cache;
struct perf_event;
struct tracepoint;
struct dprof_cache_fields;

int dprof_shim_register_device(void);
void dprof_shim_deregister_device(void);
void dprof_shim_cache_fields(const struct kmem_cache *s, struct dprof_cache_fields *out);
const struct kmem_cache *dprof_shim_cache_of(const void *ptr);
int dprof_shim_this_cpu(void);
unsigned int dprof_shim_nr_cpu_ids(void);
unsigned int dprof_shim_online_cpus(void);
const char *dprof_shim_tracepoint_name(const struct tracepoint *tp);
void dprof_shim_tracepoint_sync(void);
bool dprof_shim_init_cache_walk(void);
bool dprof_shim_init_debugreg_copy(void);
int dprof_shim_walk_caches(void (*fn)(const struct kmem_cache *s, void *data), void *data);
bool dprof_shim_cpu_online(unsigned int cpu);
struct perf_event *dprof_shim_sampler_create(int cpu, u64 period_ns, bool user, bool idle,
					     void *ctx);
struct perf_event *dprof_shim_hw_sampler_create(int cpu, u32 type, u64 config, u64 config1,
						u64 period, bool pebs, bool user, void *ctx);
void dprof_shim_sampler_release(struct perf_event *event);
void *dprof_shim_bp_register(unsigned long dummy, void *ctx);
void dprof_shim_bp_unregister(void *events);
int dprof_shim_bp_slot(void *events);
unsigned long dprof_shim_dr7_shadow(void);
void dprof_shim_bp_point(void *events, int slot, unsigned long addr, unsigned int len,
			 unsigned long dr7);
void *dprof_shim_csd_alloc(void (*fn)(void *), void *info);
int dprof_shim_csd_kick(void *csd, int cpu);
void dprof_shim_csd_drain(void *csd);
void dprof_shim_csd_free(void *csd);
void dprof_shim_on_each_cpu(void (*fn)(void *), void *data);
void dprof_shim_preempt_off(void (*fn)(void *), void *data);
struct file;
bool dprof_shim_file_write_only(const struct file *file);
void *dprof_shim_kprobe_register(const char *name, void *data);
void dprof_shim_kprobe_unregister(void *kprobe);
void *dprof_shim_irq_work_alloc(void (*fn)(void *), void *data);
void dprof_shim_irq_work_queue(void *works);
void dprof_shim_irq_work_sync(void *works);
void dprof_shim_irq_work_free(void *works);
void dprof_shim_rcu_read_lock(void);
void dprof_shim_rcu_read_unlock(void);

#endif
