/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The functions dprof_shim.c exports to the Rust side of dprof.ko and the structs they share
 * (declared again, by hand, in ffi.rs: an out-of-tree module cannot add headers to the
 * generated bindings).
 */
#ifndef DPROF_SHIM_H
#define DPROF_SHIM_H

#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <linux/types.h>

struct kmem_cache;
struct perf_event;
struct tracepoint;

/*
 * The structs the shim and Rust exchange, mirrored in ffi.rs. Both sides assert the same size
 * and field offsets, so that a change on one side alone fails the build.
 */

/* Private `struct kmem_cache` fields (dprof_shim_cache_fields). */
struct dprof_cache_fields {
	const char *name;
	unsigned int object_size;
	unsigned int size;
	unsigned int align;
	unsigned int flags;
};

static_assert(sizeof(struct dprof_cache_fields) == 24);
static_assert(offsetof(struct dprof_cache_fields, name) == 0);
static_assert(offsetof(struct dprof_cache_fields, object_size) == 8);
static_assert(offsetof(struct dprof_cache_fields, size) == 12);
static_assert(offsetof(struct dprof_cache_fields, align) == 16);
static_assert(offsetof(struct dprof_cache_fields, flags) == 20);

/*
 * What the sampler's overflow handler hands to Rust. regs[] is in hardware register-number
 * order.
 */
struct dprof_sample_regs {
	u64 ip;
	u64 regs[16];
	u64 gs_base;
	u32 pid;
	u32 tid;
	u8 insn[16];
	u32 insn_len;
	u32 user;
	/* Hardware samplers only: HW_* bits of what perf handed over, and those values. */
	u32 hw_valid;
	u32 latency;
	u64 data_addr;
	u64 phys_addr;
	u64 data_src;
	/* PERF_SAMPLE_RAW (IBS: u32 caps, then the registers present), raw_len bytes of it. */
	u32 raw_len;
	u8 raw[4 + 9 * 8];
};

static_assert(sizeof(struct dprof_sample_regs) == 288);
static_assert(offsetof(struct dprof_sample_regs, ip) == 0);
static_assert(offsetof(struct dprof_sample_regs, regs) == 8);
static_assert(offsetof(struct dprof_sample_regs, gs_base) == 136);
static_assert(offsetof(struct dprof_sample_regs, pid) == 144);
static_assert(offsetof(struct dprof_sample_regs, tid) == 148);
static_assert(offsetof(struct dprof_sample_regs, insn) == 152);
static_assert(offsetof(struct dprof_sample_regs, insn_len) == 168);
static_assert(offsetof(struct dprof_sample_regs, user) == 172);
static_assert(offsetof(struct dprof_sample_regs, hw_valid) == 176);
static_assert(offsetof(struct dprof_sample_regs, latency) == 180);
static_assert(offsetof(struct dprof_sample_regs, data_addr) == 184);
static_assert(offsetof(struct dprof_sample_regs, phys_addr) == 192);
static_assert(offsetof(struct dprof_sample_regs, data_src) == 200);
static_assert(offsetof(struct dprof_sample_regs, raw_len) == 208);
static_assert(offsetof(struct dprof_sample_regs, raw) == 212);

/* What the breakpoint handler hands to Rust for a trap. */
struct dprof_hit_regs {
	u64 ip;
	u64 regs[16];
	u32 pid;
	u32 tid;
	u32 user;
};

static_assert(sizeof(struct dprof_hit_regs) == 152);
static_assert(offsetof(struct dprof_hit_regs, ip) == 0);
static_assert(offsetof(struct dprof_hit_regs, regs) == 8);
static_assert(offsetof(struct dprof_hit_regs, pid) == 136);
static_assert(offsetof(struct dprof_hit_regs, tid) == 140);
static_assert(offsetof(struct dprof_hit_regs, user) == 144);

int dprof_shim_register_device(void);
void dprof_shim_deregister_device(void);
void dprof_shim_cache_fields(const struct kmem_cache *s, struct dprof_cache_fields *out);
const struct kmem_cache *dprof_shim_cache_of(const void *ptr);
/* The direct-map address of a page (page_address()). */
void *dprof_shim_page_address(const struct page *page);
int dprof_shim_this_cpu(void);
void *dprof_shim_current(u32 *tgid);
void *dprof_shim_waker(u32 *tgid);
bool dprof_shim_task_tgid(const void *task, u32 *tgid);
unsigned int dprof_shim_nr_cpu_ids(void);
unsigned int dprof_shim_online_cpus(void);
const char *dprof_shim_tracepoint_name(const struct tracepoint *tp);
void dprof_shim_tracepoint_sync(void);
bool dprof_shim_init_cache_walk(void);
bool dprof_shim_init_debugreg_copy(void);
int dprof_shim_init_tcg_rewrite(void);
int dprof_shim_walk_caches(void (*fn)(const struct kmem_cache *s, void *data), void *data);
bool dprof_shim_cpu_online(unsigned int cpu);
struct perf_event *dprof_shim_sampler_create(int cpu, u64 period_ns, bool user, bool idle,
					     void *ctx);
struct perf_event *dprof_shim_hw_sampler_create(int cpu, u32 type, u64 config, u64 config1,
						u64 period, bool pebs, bool user, void *ctx);
void dprof_shim_sampler_release(struct perf_event *event);
void *dprof_shim_bp_register(unsigned long dummy, void *ctx);
void dprof_shim_bp_unregister(void *events);
void *dprof_shim_destroy_register(void *data);
void dprof_shim_destroy_unregister(void *probe);
int dprof_shim_bp_remake(void *events, int cpu, unsigned long dummy, void *ctx);
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
void dprof_shim_cpus_read_lock(void);
void dprof_shim_cpus_read_unlock(void);
int dprof_shim_cpuhp_register(void);
void dprof_shim_cpuhp_unregister(void);
void *dprof_shim_bulk_free_register(void *data);
int dprof_shim_bulk_alloc_register(void *probes);
void dprof_shim_bulk_alloc_unregister(void *probes);
void dprof_shim_bulk_free_unregister(void *probes);
void *dprof_shim_irq_work_alloc(void (*fn)(void *), void *data);
void dprof_shim_irq_work_queue(void *works);
unsigned int dprof_shim_stack_trace(u64 *entries, unsigned int max);
void dprof_shim_irq_work_sync(void *works);
void dprof_shim_irq_work_free(void *works);
void dprof_shim_rcu_read_lock(void);
void dprof_shim_rcu_read_unlock(void);

#endif
