// SPDX-License-Identifier: GPL-2.0
/*
 * dprof.ko C shim: only what Linux 6.12's Rust API cannot reach.
 *
 *  - the misc device (no Rust miscdevice/file-operations API before 6.13): the file operations
 *    forward straight to the Rust functions dprof_rs_*;
 *  - private `struct kmem_cache` fields and virt_to_slab() (mm/slab.h, not a public header);
 *  - the list of existing slab caches (slab_caches/slab_mutex are not exported);
 *  - macros and static inlines: raw_smp_processor_id(), nr_cpu_ids,
 *    tracepoint_synchronize_unregister(), tracepoint names;
 *  - hardware breakpoints re-pointed from atomic context, and IPIs, for object access
 *    histories (history.rs): debug registers, cpu_dr7 and call_single_data are C-only;
 *  - the in-kernel perf API for the software sampler (no Rust perf API in 6.12), and pt_regs,
 *    whose layout is arch-specific: the overflow handler copies what a sample needs into a
 *    plain struct and hands it to Rust;
 *  - CPU hotplug callbacks and the hotplug lock (cpuhp_setup_state_nocalls, cpus_read_lock);
 *  - probes on the bulk slab functions, which fire no tracepoint: struct kprobe and
 *    struct kretprobe, and the registers that hold their arguments;
 *  - causal experiments (causal.rs): struct kprobe, irq_work (pauses deferred out of NMI),
 *    rcu_read_lock() and the file's access mode (static inlines and struct fields);
 *  - kprobe removal under QEMU's multi-threaded TCG, which needs text_poke (not exported).
 *
 * All logic lives in Rust (dprof_main.rs).
 */
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/hw_breakpoint.h>
#include <linux/irq_work.h>
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/kprobes.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/perf_event.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/uaccess.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/stacktrace.h>
#include <linux/tracepoint.h>

#include <asm/cpufeature.h>
#include <asm/debugreg.h>
#include <asm/hw_breakpoint.h>
#include <asm/msr.h>
#include <asm/processor.h>

#include "dprof_shim.h"
#include "slab.h" /* mm/slab.h: struct kmem_cache, virt_to_slab() */

/* Implemented in Rust. */
int dprof_rs_open(struct inode *inode, struct file *file);
int dprof_rs_release(struct inode *inode, struct file *file);
ssize_t dprof_rs_read(struct file *file, char __user *buf, size_t len, loff_t *ppos);
ssize_t dprof_rs_write(struct file *file, const char __user *buf, size_t len, loff_t *ppos);
long dprof_rs_ioctl(struct file *file, unsigned int cmd, unsigned long arg);

static const struct file_operations dprof_fops = {
	.owner = THIS_MODULE, /* keeps the module loaded while /dev/dprof is open */
	.open = dprof_rs_open,
	.release = dprof_rs_release,
	.read = dprof_rs_read,
	.write = dprof_rs_write,
	.unlocked_ioctl = dprof_rs_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice dprof_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "dprof",
	.fops = &dprof_fops,
	.mode = 0600, /* root only: the records expose kernel addresses */
};

int dprof_shim_register_device(void)
{
	return misc_register(&dprof_misc);
}

void dprof_shim_deregister_device(void)
{
	misc_deregister(&dprof_misc);
}

/*
 * A write-only open: a user progress point's writer, which must not take the collector's
 * exclusive slot nor end its session on close. The access mode cannot change after open
 * (F_SETFL ignores it), so open and release agree.
 */
bool dprof_shim_file_write_only(const struct file *file)
{
	return (file->f_flags & O_ACCMODE) == O_WRONLY;
}

void dprof_shim_cache_fields(const struct kmem_cache *s, struct dprof_cache_fields *out)
{
	out->name = s->name;
	out->object_size = s->object_size;
	out->size = s->size;
	out->align = s->align;
	out->flags = (__force unsigned int)s->flags;
}

/*
 * The slab cache an allocated object belongs to, or NULL when the address is not in a slab
 * (large kmalloc from the page allocator, ZERO_SIZE_PTR, NULL). Only for live objects: the
 * free tracepoints fire before the object is released, the alloc ones after it is handed out.
 */
void *dprof_shim_page_address(const struct page *page)
{
	return page_address(page);
}

const struct kmem_cache *dprof_shim_cache_of(const void *ptr)
{
	const struct slab *slab;

	if (ZERO_OR_NULL_PTR(ptr) || !virt_addr_valid(ptr))
		return NULL;
	slab = virt_to_slab(ptr);
	return slab ? slab->slab_cache : NULL;
}

int dprof_shim_this_cpu(void)
{
	return raw_smp_processor_id();
}

/*
 * The running task, for per-task delay accounting (causal.rs), and its thread group id in
 * *tgid. Any context: in an interrupt it is the interrupted task.
 */
void *dprof_shim_current(u32 *tgid)
{
	*tgid = current->tgid;
	return current;
}

/*
 * The task that is waking another, when a task is: current in task context, not the idle task.
 * NULL in interrupt context (a timer, I/O completion), where no task did the waking. *tgid is
 * set when a task is returned.
 */
void *dprof_shim_waker(u32 *tgid)
{
	if (!in_task() || is_idle_task(current))
		return NULL;
	*tgid = current->tgid;
	return current;
}

/*
 * The thread group id of `task`, into *tgid; false (and *tgid untouched) for an idle task.
 * `task` is one the scheduler is switching in, alive for the call.
 */
bool dprof_shim_task_tgid(const void *task, u32 *tgid)
{
	const struct task_struct *p = task;

	if (is_idle_task(p))
		return false;
	*tgid = p->tgid;
	return true;
}

unsigned int dprof_shim_nr_cpu_ids(void)
{
	return nr_cpu_ids;
}

unsigned int dprof_shim_online_cpus(void)
{
	return num_online_cpus();
}

const char *dprof_shim_tracepoint_name(const struct tracepoint *tp)
{
	return tp->name;
}

void dprof_shim_tracepoint_sync(void)
{
	tracepoint_synchronize_unregister();
}

/*
 * slab_caches and slab_mutex are not exported. kallsyms_lookup_name() is not exported either,
 * but a kprobe on it reports its address (lttng-modules does the same since 5.7). When any of
 * this fails, dprof still names every cache it sees in an allocation or free; only caches idle
 * during the whole collection go unnamed, and VersionInfo says so (FEATURE_CACHE_WALK).
 */
static struct list_head *dprof_slab_caches;
static struct mutex *dprof_slab_mutex;

static unsigned long dprof_lookup_name(const char *name)
{
	typedef unsigned long (*lookup_fn)(const char *);
	/* Registered disabled: the address is resolved without writing an int3 into the text. */
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name", .flags = KPROBE_FLAG_DISABLED };
	lookup_fn lookup;

	if (register_kprobe(&kp) < 0)
		return 0;
	lookup = (lookup_fn)kp.addr;
	unregister_kprobe(&kp);
	return lookup ? lookup(name) : 0;
}

/*
 * The kernel's per-CPU copy of DR0..DR3 (arch/x86/kernel/hw_breakpoint.c, static): text
 * poking (static keys, jump labels, kprobes: use_temporary_mm) disables the breakpoints and
 * then rewrites DR0..DR3 from it, which would silently put a re-pointed register back on
 * dprof's dummy address. dprof_shim_bp_point keeps it in step when it can be found.
 */
static unsigned long __percpu *dprof_cpu_debugreg;

/* Returns true when the kernel's per-CPU debug-register copy was found. */
bool dprof_shim_init_debugreg_copy(void)
{
	dprof_cpu_debugreg = (unsigned long __percpu *)dprof_lookup_name("cpu_debugreg");
	return dprof_cpu_debugreg != NULL;
}

/* Returns true when existing caches can be listed. */
bool dprof_shim_init_cache_walk(void)
{
	dprof_slab_caches = (struct list_head *)dprof_lookup_name("slab_caches");
	dprof_slab_mutex = (struct mutex *)dprof_lookup_name("slab_mutex");
	return dprof_slab_caches && dprof_slab_mutex;
}

/*
 * Retiring a kprobe under QEMU's multi-threaded TCG. While one vCPU rewrites kernel text,
 * another can translate the bytes from before the write and keep that translation (QEMU 7.2
 * drops a page's translations before it stores, so one made in between keeps the old bytes).
 * A kprobe's int3 then outlives its removal in that vCPU's translations, and once the kprobe
 * is unregistered the kernel finds no owner for the trap: "Oops: int3" in the probed
 * function, with the byte already restored in memory. The kernel's own kprobe events, with no
 * dprof code loaded, die that way within 100 rounds (tests/qemu/stress/kprobe-churn.sh).
 *
 * Only a later store to the same bytes drops that translation. So under TCG a kprobe is
 * retired in steps: disabled (the original bytes written back, the optimizer's jump undone),
 * then an RCU grace period (every vCPU has finished any translation that raced the writes),
 * then its bytes written again, unchanged, under text_mutex, and only then unregistered.
 * Until the last step a stale int3 still finds its (disabled) kprobe, which single-steps the
 * original instruction. A new kprobe gets the same rewrite once armed, or a vCPU can go on
 * running the bytes from before its int3 and miss its visits. text_poke, text_mutex and
 * wait_for_kprobe_optimizer are not exported; they are looked up once. On hardware nothing
 * changes.
 */
#define DPROF_REWRITE_LEN 5 /* an optimized kprobe's jump (JMP32_INSN_SIZE) covers the most */

static bool dprof_tcg_rewrite;
static void *(*dprof_text_poke)(void *addr, const void *opcode, size_t len);
static struct mutex *dprof_text_mutex;
static void (*dprof_wait_for_optimizer)(void);

static bool dprof_under_tcg(void)
{
	u32 eax, signature[3];

	if (!boot_cpu_has(X86_FEATURE_HYPERVISOR))
		return false;
	cpuid(0x40000000, &eax, &signature[0], &signature[1], &signature[2]);
	return !memcmp(signature, "TCGTCGTCGTCG", sizeof(signature));
}

/*
 * Returns 0 when not under QEMU TCG, 1 when under it with the rewrite on, -ENOENT when under
 * it but the kernel's text-poking functions cannot be found (kprobes are retired plainly).
 */
int dprof_shim_init_tcg_rewrite(void)
{
	if (!dprof_under_tcg())
		return 0;
	dprof_text_poke = (void *)dprof_lookup_name("text_poke");
	dprof_text_mutex = (struct mutex *)dprof_lookup_name("text_mutex");
	dprof_wait_for_optimizer = (void *)dprof_lookup_name("wait_for_kprobe_optimizer");
	dprof_tcg_rewrite = dprof_text_poke && dprof_text_mutex && dprof_wait_for_optimizer;
	return dprof_tcg_rewrite ? 1 : -ENOENT;
}

/* An RCU grace period, then the probed bytes written again, unchanged (under TCG only). */
static void dprof_kprobe_rewrite(struct kprobe *kp)
{
	u8 bytes[DPROF_REWRITE_LEN];

	synchronize_rcu();
	mutex_lock(dprof_text_mutex);
	/* Gone: the probed module was unloaded, and its text with it. */
	if (!kprobe_gone(kp) && !copy_from_kernel_nofault(bytes, kp->addr, sizeof(bytes)))
		dprof_text_poke(kp->addr, bytes, sizeof(bytes));
	mutex_unlock(dprof_text_mutex);
}

/* Under TCG, the rewrite after a kprobe's registration (see above); nothing otherwise. */
static void dprof_kprobe_armed(struct kprobe *kp)
{
	if (dprof_tcg_rewrite && !kprobe_disabled(kp))
		dprof_kprobe_rewrite(kp);
}

/* Under TCG, the steps above before a kprobe's unregistration; nothing otherwise. */
static void dprof_kprobe_settle(struct kprobe *kp)
{
	if (!dprof_tcg_rewrite || IS_ERR_OR_NULL(kp->addr))
		return;
	disable_kprobe(kp);
	dprof_wait_for_optimizer();
	dprof_kprobe_rewrite(kp);
}

/*
 * Calls fn for every slab cache, under slab_mutex (so none is destroyed meanwhile) and with
 * preemption off around each call (fn writes to this CPU's ring). Returns the number of caches,
 * or -ENOENT when the list could not be found.
 */
int dprof_shim_walk_caches(void (*fn)(const struct kmem_cache *s, void *data), void *data)
{
	struct kmem_cache *s;
	int n = 0;

	if (!dprof_slab_caches || !dprof_slab_mutex)
		return -ENOENT;
	mutex_lock(dprof_slab_mutex);
	list_for_each_entry(s, dprof_slab_caches, list) {
		preempt_disable();
		fn(s, data);
		preempt_enable();
		n++;
	}
	mutex_unlock(dprof_slab_mutex);
	return n;
}

bool dprof_shim_cpu_online(unsigned int cpu)
{
	return cpu_online(cpu);
}

void dprof_rs_sample(void *ctx, const struct dprof_sample_regs *sample);

/* The general-purpose registers in hardware register-number order (ModRM/SIB numbering). */
static void dprof_copy_gprs(u64 out[16], const struct pt_regs *regs)
{
	out[0] = regs->ax;
	out[1] = regs->cx;
	out[2] = regs->dx;
	out[3] = regs->bx;
	out[4] = regs->sp;
	out[5] = regs->bp;
	out[6] = regs->si;
	out[7] = regs->di;
	out[8] = regs->r8;
	out[9] = regs->r9;
	out[10] = regs->r10;
	out[11] = regs->r11;
	out[12] = regs->r12;
	out[13] = regs->r13;
	out[14] = regs->r14;
	out[15] = regs->r15;
}

/* Instruction bytes at ip, without faulting: up to 16, fewer at the end of a mapped page. */
static u32 dprof_read_insn(u8 *dst, unsigned long ip, bool user)
{
	u32 len = 16;

	for (;;) {
		long ret = user ? copy_from_user_nofault(dst, (const void __user *)ip, len)
				: copy_from_kernel_nofault(dst, (const void *)ip, len);
		if (ret == 0)
			return len;
		/* Retry with only the bytes up to the end of ip's page. */
		if (len != 16 || offset_in_page(ip) + 16 <= PAGE_SIZE)
			return 0;
		len = PAGE_SIZE - offset_in_page(ip);
	}
}

/* Mirrors the HW_* bits in kmod/abi/src/wire.rs. */
#define DPROF_HW_DATA_ADDR 1
#define DPROF_HW_PHYS_ADDR 2
#define DPROF_HW_DATA_SRC 4
#define DPROF_HW_LATENCY 8

/*
 * What a hardware sampler's PMU driver filled in: only fields whose PERF_SAMPLE_* bit is in
 * data->sample_flags were written (perf_sample_data_init leaves the rest uninitialised).
 */
static void dprof_copy_hw(struct dprof_sample_regs *s, const struct perf_sample_data *data)
{
	u64 flags = data->sample_flags;

	s->hw_valid = 0;
	s->latency = 0;
	s->data_addr = 0;
	s->phys_addr = 0;
	s->data_src = 0;
	s->raw_len = 0;
	if (flags & PERF_SAMPLE_ADDR) {
		s->data_addr = data->addr;
		s->hw_valid |= DPROF_HW_DATA_ADDR;
	}
	if (flags & PERF_SAMPLE_PHYS_ADDR) {
		s->phys_addr = data->phys_addr;
		s->hw_valid |= DPROF_HW_PHYS_ADDR;
	}
	if (flags & PERF_SAMPLE_DATA_SRC) {
		s->data_src = data->data_src.val;
		s->hw_valid |= DPROF_HW_DATA_SRC;
	}
	if (flags & PERF_SAMPLE_WEIGHT_TYPE) {
		s->latency = min_t(u64, data->weight.full, U32_MAX);
		s->hw_valid |= DPROF_HW_LATENCY;
	}
	/* IBS hands one fragment, on the NMI stack: copied now or never. */
	if ((flags & PERF_SAMPLE_RAW) && data->raw && !data->raw->frag.next &&
	    data->raw->frag.size <= sizeof(s->raw)) {
		memcpy(s->raw, data->raw->frag.data, data->raw->frag.size);
		s->raw_len = data->raw->frag.size;
	}
}

/* Runs in hardirq (cpu-clock hrtimer) or NMI context: no locks, no allocation. */
static void dprof_overflow(struct perf_event *event, struct perf_sample_data *data,
			   struct pt_regs *regs)
{
	struct dprof_sample_regs s;
	bool user = user_mode(regs);

	s.ip = instruction_pointer(regs);
	dprof_copy_gprs(s.regs, regs);
	/* The kernel's %gs base (entry code has swapped it in even if user mode was interrupted):
	 * exactly what a %gs: operand adds in kernel mode. */
	rdmsrl(MSR_GS_BASE, s.gs_base);
	s.pid = current->tgid;
	s.tid = current->pid;
	s.user = user;
	s.insn_len = dprof_read_insn(s.insn, s.ip, user);
	if (event->attr.type == PERF_TYPE_SOFTWARE) {
		s.hw_valid = 0;
		s.raw_len = 0;
	} else {
		dprof_copy_hw(&s, data);
	}
	dprof_rs_sample(event->overflow_handler_context, &s);
}

/*
 * A pinned cpu-clock counter on `cpu` sampling every `period_ns`, kernel mode (and user mode
 * when `user`), idle time excluded (the idle loop touches no data worth profiling) unless
 * `idle` (a causal session: idle CPUs must be sampled to be credited). Returns the event or
 * an ERR_PTR.
 */
struct perf_event *dprof_shim_sampler_create(int cpu, u64 period_ns, bool user, bool idle,
					     void *ctx)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(attr),
		.sample_period = period_ns,
		.pinned = 1,
		.exclude_user = !user,
		.exclude_hv = 1,
		.exclude_idle = !idle,
	};

	return perf_event_create_kernel_counter(&attr, cpu, NULL, dprof_overflow, ctx);
}

/*
 * A hardware memory sampler on `cpu`: PMU `type` with `config`/`config1` (AMD IBS op, or an
 * Intel PEBS load-latency event), every `period` ops/events, asking for everything perf can
 * tell about the data access. IBS takes no exclude_* flags (its PMU refuses them), so its
 * user-mode samples reach the handler and sampler.rs drops them unless `user` was asked
 * for. PEBS needs precise_ip. Returns the event or an
 * ERR_PTR (ENOENT: no such PMU; EINVAL/EOPNOTSUPP: the PMU refuses this configuration).
 */
struct perf_event *dprof_shim_hw_sampler_create(int cpu, u32 type, u64 config, u64 config1,
						u64 period, bool pebs, bool user, void *ctx)
{
	struct perf_event_attr attr = {
		.type = type,
		.config = config,
		.config1 = config1,
		.size = sizeof(attr),
		.sample_period = period,
		.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_PHYS_ADDR |
			       PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT |
			       (pebs ? 0 : PERF_SAMPLE_RAW),
		.pinned = 1,
		.precise_ip = pebs ? 2 : 0,
		.exclude_user = pebs ? !user : 0,
		.exclude_hv = pebs ? 1 : 0,
	};

	return perf_event_create_kernel_counter(&attr, cpu, NULL, dprof_overflow, ctx);
}

/* Stops the counter and waits until its handler cannot run any more. */
void dprof_shim_sampler_release(struct perf_event *event)
{
	perf_event_release_kernel(event);
}

/*
 * Debug registers for object access histories (history.rs has the logic and the reasons).
 *
 * 6.12 cannot re-point a breakpoint from atomic context (modify_user_hw_breakpoint takes a
 * mutex), so dprof registers one wide breakpoint per history range once, at start, on a dummy
 * address in this module, and then re-points it on each CPU by writing that CPU's debug
 * registers directly (dprof_shim_bp_point, with interrupts off). It keeps the perf event's
 * arch_hw_breakpoint (address, length) and the per-CPU DR7 shadow cpu_dr7 in step, so that
 * anything the kernel reinstalls from them (another breakpoint's install, resume) installs
 * what is really there.
 */

void dprof_rs_bp_hit(void *ctx, const struct dprof_hit_regs *hit);

/* #DB context (perf_bp_event from hw_breakpoint_handler): no locks, no allocation. */
static void dprof_bp_overflow(struct perf_event *bp, struct perf_sample_data *data,
			      struct pt_regs *regs)
{
	struct dprof_hit_regs hit;

	hit.ip = instruction_pointer(regs);
	dprof_copy_gprs(hit.regs, regs);
	hit.pid = current->tgid;
	hit.tid = current->pid;
	hit.user = user_mode(regs);
	dprof_rs_bp_hit(bp->overflow_handler_context, &hit);
}

/*
 * A read/write, 8-byte wide breakpoint on every online CPU at `dummy` (8-byte aligned, never
 * accessed). Returns the per-CPU events or an ERR_PTR (ENOSPC: no free debug register).
 */
void *dprof_shim_bp_register(unsigned long dummy, void *ctx)
{
	struct perf_event_attr attr;

	hw_breakpoint_init(&attr);
	attr.bp_addr = dummy;
	attr.bp_len = HW_BREAKPOINT_LEN_8;
	attr.bp_type = HW_BREAKPOINT_RW;
	return (void __force *)register_wide_hw_breakpoint(&attr, dprof_bp_overflow, ctx);
}

void dprof_shim_bp_unregister(void *events)
{
	unregister_wide_hw_breakpoint((struct perf_event * __percpu *)(void __percpu __force *)events);
}

/*
 * Makes `cpu`'s event of a wide breakpoint anew, at `dummy`, for a CPU that came back online:
 * perf detached the old one when the CPU went away and never schedules it again. The old one
 * is released first, since it still holds one of the CPU's four breakpoint slots; the CPU has
 * none (NULL) until the new one is in place, or at all when it cannot be made. Process
 * context (the hotplug thread); 0 or a negative errno.
 */
int dprof_shim_bp_remake(void *events, int cpu, unsigned long dummy, void *ctx)
{
	struct perf_event * __percpu *bps =
		(struct perf_event * __percpu *)(void __percpu __force *)events;
	struct perf_event *old = per_cpu(*bps, cpu);
	struct perf_event_attr attr;
	struct perf_event *bp;

	per_cpu(*bps, cpu) = NULL;
	if (old)
		unregister_hw_breakpoint(old);
	hw_breakpoint_init(&attr);
	attr.bp_addr = dummy;
	attr.bp_len = HW_BREAKPOINT_LEN_8;
	attr.bp_type = HW_BREAKPOINT_RW;
	bp = perf_event_create_kernel_counter(&attr, cpu, NULL, dprof_bp_overflow, ctx);
	if (IS_ERR(bp))
		return PTR_ERR(bp);
	per_cpu(*bps, cpu) = bp;
	return 0;
}

/* This CPU's event of a wide breakpoint, or NULL when the CPU has none (it was offline). */
static struct perf_event *dprof_bp_here(void *events)
{
	return *this_cpu_ptr((struct perf_event * __percpu *)(void __percpu __force *)events);
}

/*
 * The debug register (0..3) that holds this CPU's event of `events`: the enabled one holding
 * the address the event installed (each of dprof's breakpoints has its own address). Only
 * enabled registers count: uninstalling a breakpoint clears its DR7 enable bit but leaves
 * its address register as it was, so an earlier session's register may still hold the same
 * dummy address. -1 when none does.
 */
int dprof_shim_bp_slot(void *events)
{
	struct perf_event *bp = dprof_bp_here(events);
	unsigned long addr, dr7;

	if (!bp)
		return -1;
	addr = counter_arch_bp(bp)->address;
	dr7 = this_cpu_read(cpu_dr7);
#define DPROF_CHECK_DR(n)                                                  \
	do {                                                                \
		unsigned long v;                                            \
		get_debugreg(v, n);                                         \
		if (v == addr && (dr7 & (DR_GLOBAL_ENABLE << ((n) * DR_ENABLE_SIZE)))) \
			return n;                                           \
	} while (0)
	DPROF_CHECK_DR(0);
	DPROF_CHECK_DR(1);
	DPROF_CHECK_DR(2);
	DPROF_CHECK_DR(3);
#undef DPROF_CHECK_DR
	return -1;
}

/* The DR7 the kernel believes this CPU has (its per-CPU shadow). */
unsigned long dprof_shim_dr7_shadow(void)
{
	return this_cpu_read(cpu_dr7);
}

/*
 * Points debug register `slot` of this CPU, which holds this CPU's event of `events`, at
 * `addr` for `len` bytes (1, 2, 4 or 8), with `dr7` the new DR7 (computed by history.rs from
 * dprof_shim_dr7_shadow with the debugreg crate). Interrupts are off throughout, so no IPI or
 * interrupt sees a half-done change; an NMI in between saves and restores DR7 as it finds it.
 */
void dprof_shim_bp_point(void *events, int slot, unsigned long addr, unsigned int len,
			 unsigned long dr7)
{
	struct perf_event *bp = dprof_bp_here(events);
	struct arch_hw_breakpoint *info;
	unsigned long flags, old;
	u8 x86_len;

	if (!bp || slot < 0 || slot > 3)
		return;
	switch (len) {
	case 1: x86_len = X86_BREAKPOINT_LEN_1; break;
	case 2: x86_len = X86_BREAKPOINT_LEN_2; break;
	case 4: x86_len = X86_BREAKPOINT_LEN_4; break;
	default: x86_len = X86_BREAKPOINT_LEN_8; break;
	}
	info = counter_arch_bp(bp);
	local_irq_save(flags);
	old = info->address;
	info->address = addr;
	info->len = x86_len;
	/*
	 * Written only where it holds what this register held (the event's address before this
	 * change): a check, read without faulting, that the symbol found is the copy.
	 */
	if (dprof_cpu_debugreg) {
		unsigned long *copy = this_cpu_ptr(dprof_cpu_debugreg) + slot;
		unsigned long held;

		if (!copy_from_kernel_nofault(&held, copy, sizeof(held)) && held == old)
			*copy = addr;
	}
	switch (slot) {
	case 0: set_debugreg(addr, 0); break;
	case 1: set_debugreg(addr, 1); break;
	case 2: set_debugreg(addr, 2); break;
	default: set_debugreg(addr, 3); break;
	}
	/* As arch_install_hw_breakpoint: the shadow first, so an NMI never sees less than DR7. */
	this_cpu_write(cpu_dr7, dr7);
	barrier();
	set_debugreg(dr7, 7);
	local_irq_restore(flags);
}

/* Per-CPU call_single_data for re-pointing other CPUs from atomic context. */
void *dprof_shim_csd_alloc(void (*fn)(void *), void *info)
{
	call_single_data_t __percpu *csd = alloc_percpu(call_single_data_t);
	int cpu;

	if (!csd)
		return NULL;
	for_each_possible_cpu(cpu)
		INIT_CSD(per_cpu_ptr(csd, cpu), fn, info);
	return (void __force *)csd;
}

/*
 * Asks `cpu` to run the csd's function soon. Callable with interrupts off. When the previous
 * request has not started yet (-EBUSY) that one will do: the function reads the current
 * state when it runs, not a state passed with the request.
 */
int dprof_shim_csd_kick(void *csd, int cpu)
{
	int ret = smp_call_function_single_async(
		cpu, per_cpu_ptr((call_single_data_t __percpu *)(void __percpu __force *)csd, cpu));

	return ret == -EBUSY ? 0 : ret;
}

/* Waits until no request is queued on any CPU: the function may have started, not finished. */
void dprof_shim_csd_drain(void *csd)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		call_single_data_t *c =
			per_cpu_ptr((call_single_data_t __percpu *)(void __percpu __force *)csd, cpu);
		while (smp_load_acquire(&c->node.u_flags) & CSD_FLAG_LOCK)
			cpu_relax();
	}
}

void dprof_shim_csd_free(void *csd)
{
	free_percpu((call_single_data_t __percpu *)(void __percpu __force *)csd);
}

/* Runs fn(data) on every online CPU and waits for all of them. Process context. */
void dprof_shim_on_each_cpu(void (*fn)(void *), void *data)
{
	on_each_cpu(fn, data, 1);
}

/* Runs fn(data) with preemption off, for work that writes to this CPU's ring. */
void dprof_shim_preempt_off(void (*fn)(void *), void *data)
{
	preempt_disable();
	fn(data);
	preempt_enable();
}

/*
 * CPU hotplug: perf drops a CPU's counters and breakpoints when it goes offline and does not
 * bring them back. A dynamic AP state calls Rust on the CPU that comes or goes (hotplug.rs); the
 * sampler and the histories take the hotplug lock for reading while they publish or retract
 * what the callbacks remake.
 */
int dprof_rs_cpu_online(unsigned int cpu);
int dprof_rs_cpu_offline(unsigned int cpu);

static int dprof_cpuhp_state = -1;

void dprof_shim_cpus_read_lock(void)
{
	cpus_read_lock();
}

void dprof_shim_cpus_read_unlock(void)
{
	cpus_read_unlock();
}

/* At module load: 0 or a negative errno. The callbacks run for CPUs that change later only. */
int dprof_shim_cpuhp_register(void)
{
	int ret = cpuhp_setup_state_nocalls(CPUHP_AP_ONLINE_DYN, "dprof:online",
					    dprof_rs_cpu_online, dprof_rs_cpu_offline);

	if (ret < 0)
		return ret;
	dprof_cpuhp_state = ret;
	return 0;
}

void dprof_shim_cpuhp_unregister(void)
{
	if (dprof_cpuhp_state >= 0)
		cpuhp_remove_state_nocalls(dprof_cpuhp_state);
	dprof_cpuhp_state = -1;
}

/*
 * Bulk slab allocations and frees (kmem_cache_alloc_bulk, kmem_cache_free_bulk, kfree_bulk)
 * fire no kmem tracepoint: NAPI takes its sk_buffs that way. A kprobe on the free reads the
 * array at entry, while every object is still live (the free then overwrites the array); a
 * kretprobe on the allocation keeps the cache and the array at entry and reads the objects at
 * return. x86-64: arguments in di, si, dx, cx; at a function's entry *sp is the return address.
 * The handlers call Rust with preemption off, as the tracepoint probes do.
 */
void dprof_rs_bulk_alloc(void *data, const struct kmem_cache *s, void **p, size_t n,
			 unsigned long call_site, unsigned int gfp);
void dprof_rs_bulk_free(void *data, const struct kmem_cache *s, void **p, size_t n,
			unsigned long call_site);

struct dprof_bulk_probes {
	struct kprobe free;
	struct kretprobe alloc;
	void *data;
};

struct dprof_bulk_call {
	const struct kmem_cache *s;
	void **p;
	unsigned long call_site;
	unsigned int gfp;
};

static int dprof_bulk_free_pre(struct kprobe *kp, struct pt_regs *regs)
{
	struct dprof_bulk_probes *b = container_of(kp, struct dprof_bulk_probes, free);

	preempt_disable();
	dprof_rs_bulk_free(b->data, (const struct kmem_cache *)regs->di, (void **)regs->dx,
			   regs->si, *(unsigned long *)regs->sp);
	preempt_enable();
	return 0;
}

static int dprof_bulk_alloc_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct dprof_bulk_call *call = (struct dprof_bulk_call *)ri->data;

	call->s = (const struct kmem_cache *)regs->di;
	call->gfp = (unsigned int)regs->si;
	call->p = (void **)regs->cx;
	call->call_site = *(unsigned long *)regs->sp;
	return 0;
}

static int dprof_bulk_alloc_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct dprof_bulk_probes *b =
		container_of(get_kretprobe(ri), struct dprof_bulk_probes, alloc);
	struct dprof_bulk_call *call = (struct dprof_bulk_call *)ri->data;
	long n = (long)regs_return_value(regs);

	if (n <= 0)
		return 0;
	preempt_disable();
	dprof_rs_bulk_alloc(b->data, call->s, call->p, n, call->call_site, call->gfp);
	preempt_enable();
	return 0;
}

/* The allocation's name since 6.10 (allocation profiling), and before. */
static const char *const bulk_alloc_names[] = { "kmem_cache_alloc_bulk_noprof",
						"kmem_cache_alloc_bulk" };

/*
 * Attaches the bulk free probe calling back with `data`. Returns the probes or an ERR_PTR
 * (-ENOENT: no kmem_cache_free_bulk to probe). The allocation probe is attached separately,
 * after the allocation tracepoints' probes, as those are after the frees'.
 */
void *dprof_shim_bulk_free_register(void *data)
{
	struct dprof_bulk_probes *b = kzalloc(sizeof(*b), GFP_KERNEL);
	int ret;

	if (!b)
		return ERR_PTR(-ENOMEM);
	b->data = data;
	b->free.symbol_name = "kmem_cache_free_bulk";
	b->free.pre_handler = dprof_bulk_free_pre;
	ret = register_kprobe(&b->free);
	if (ret < 0) {
		kfree(b);
		return ERR_PTR(ret);
	}
	dprof_kprobe_armed(&b->free);
	return b;
}

/* Attaches the bulk allocation probe of `probes`; 0 or a negative errno. */
int dprof_shim_bulk_alloc_register(void *probes)
{
	struct dprof_bulk_probes *b = probes;
	int ret = -ENOENT;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bulk_alloc_names) && ret == -ENOENT; i++) {
		memset(&b->alloc, 0, sizeof(b->alloc));
		b->alloc.kp.symbol_name = bulk_alloc_names[i];
		b->alloc.entry_handler = dprof_bulk_alloc_entry;
		b->alloc.handler = dprof_bulk_alloc_return;
		b->alloc.data_size = sizeof(struct dprof_bulk_call);
		ret = register_kretprobe(&b->alloc);
	}
	if (!ret)
		dprof_kprobe_armed(&b->alloc.kp);
	return ret;
}

/* Detaches the allocation probe (waiting for running handlers). */
void dprof_shim_bulk_alloc_unregister(void *probes)
{
	struct dprof_bulk_probes *b = probes;

	dprof_kprobe_settle(&b->alloc.kp);
	unregister_kretprobe(&b->alloc);
}

/* Detaches the free probe (waiting for running handlers) and frees the probes. */
void dprof_shim_bulk_free_unregister(void *probes)
{
	struct dprof_bulk_probes *b = probes;

	dprof_kprobe_settle(&b->free);
	unregister_kprobe(&b->free);
	kfree(b);
}

/*
 * kmem_cache_destroy fires no tracepoint, and the kmem_cache it frees may be allocated again
 * for the next cache created: a kprobe at its entry tells Rust to forget the cache, so that a
 * new cache at the same address is described anew (session.rs).
 */
void dprof_rs_cache_destroy(void *data, const struct kmem_cache *s);

struct dprof_destroy_probe {
	struct kprobe kp;
	void *data;
};

static int dprof_destroy_pre(struct kprobe *kp, struct pt_regs *regs)
{
	struct dprof_destroy_probe *d = container_of(kp, struct dprof_destroy_probe, kp);

	dprof_rs_cache_destroy(d->data, (const struct kmem_cache *)regs->di);
	return 0;
}

/* The probe calling back with `data`, or an ERR_PTR. */
void *dprof_shim_destroy_register(void *data)
{
	struct dprof_destroy_probe *d = kzalloc(sizeof(*d), GFP_KERNEL);
	int ret;

	if (!d)
		return ERR_PTR(-ENOMEM);
	d->data = data;
	d->kp.symbol_name = "kmem_cache_destroy";
	d->kp.pre_handler = dprof_destroy_pre;
	ret = register_kprobe(&d->kp);
	if (ret < 0) {
		kfree(d);
		return ERR_PTR(ret);
	}
	dprof_kprobe_armed(&d->kp);
	return d;
}

/* Detaches the probe (waiting for running handlers) and frees it. */
void dprof_shim_destroy_unregister(void *probe)
{
	struct dprof_destroy_probe *d = probe;

	dprof_kprobe_settle(&d->kp);
	unregister_kprobe(&d->kp);
	kfree(d);
}

/*
 * Causal experiments (causal.rs has the logic).
 *
 * Kprobe progress points: struct kprobe has no Rust binding in 6.12. The pre-handler does
 * nothing but call back into Rust, which counts the visit (two atomic adds).
 */
void dprof_rs_progress_visit(void *data);

struct dprof_kprobe {
	struct kprobe kp;
	void *data;
	char name[64];
};

static int dprof_kprobe_pre(struct kprobe *kp, struct pt_regs *regs)
{
	dprof_rs_progress_visit(container_of(kp, struct dprof_kprobe, kp)->data);
	return 0;
}

/*
 * A kprobe on the kernel function `name` (NUL-terminated, < 64 bytes) calling back with
 * `data`. Returns it or an ERR_PTR: -ENOENT when no such symbol, -EINVAL when it cannot be
 * probed (blacklisted, not a function start), -ENOMEM.
 */
void *dprof_shim_kprobe_register(const char *name, void *data)
{
	struct dprof_kprobe *p = kzalloc(sizeof(*p), GFP_KERNEL);
	int ret;

	if (!p)
		return ERR_PTR(-ENOMEM);
	strscpy(p->name, name, sizeof(p->name));
	p->kp.symbol_name = p->name;
	p->kp.pre_handler = dprof_kprobe_pre;
	p->data = data;
	ret = register_kprobe(&p->kp);
	if (ret < 0) {
		kfree(p);
		return ERR_PTR(ret);
	}
	dprof_kprobe_armed(&p->kp);
	return p;
}

/* Unregisters (which waits for running handlers: unregister_kprobe synchronizes) and frees. */
void dprof_shim_kprobe_unregister(void *kprobe)
{
	struct dprof_kprobe *p = kprobe;

	dprof_kprobe_settle(&p->kp);
	unregister_kprobe(&p->kp);
	kfree(p);
}

/*
 * Per-CPU irq_work for pauses a hardware sampler's NMI handler cannot serve itself: it runs
 * in hardirq context right after the NMI returns (IRQ_WORK_HARD_IRQ: never deferred to a
 * thread, even on PREEMPT_RT), on the CPU that queued it.
 */
struct dprof_irq_work {
	struct irq_work work;
	void (*fn)(void *);
	void *data;
};

static void dprof_irq_work_fn(struct irq_work *work)
{
	struct dprof_irq_work *w = container_of(work, struct dprof_irq_work, work);

	w->fn(w->data);
}

void *dprof_shim_irq_work_alloc(void (*fn)(void *), void *data)
{
	struct dprof_irq_work __percpu *works = alloc_percpu(struct dprof_irq_work);
	int cpu;

	if (!works)
		return NULL;
	for_each_possible_cpu(cpu) {
		struct dprof_irq_work *w = per_cpu_ptr(works, cpu);

		w->work = IRQ_WORK_INIT_HARD(dprof_irq_work_fn);
		w->fn = fn;
		w->data = data;
	}
	return (void __force *)works;
}

/* Queues this CPU's work (NMI-safe; a work already pending stays queued once). */
void dprof_shim_irq_work_queue(void *works)
{
	irq_work_queue(&this_cpu_ptr((struct dprof_irq_work __percpu *)(void __percpu __force *)works)->work);
}

/*
 * The call chain from here (a sampler's handler) through the interrupt or NMI entry into the
 * code it interrupted, whose ip the unwinder reports from the entry's registers: up to max
 * addresses, the rest return addresses. ORC, safe in NMI.
 */
unsigned int dprof_shim_stack_trace(u64 *entries, unsigned int max)
{
	BUILD_BUG_ON(sizeof(unsigned long) != sizeof(u64));
	return stack_trace_save((unsigned long *)entries, max, 0);
}

/* Waits until no CPU's work is pending or running. Process context. */
void dprof_shim_irq_work_sync(void *works)
{
	int cpu;

	for_each_possible_cpu(cpu)
		irq_work_sync(&per_cpu_ptr((struct dprof_irq_work __percpu *)(void __percpu __force *)works, cpu)->work);
}

void dprof_shim_irq_work_free(void *works)
{
	free_percpu((struct dprof_irq_work __percpu *)(void __percpu __force *)works);
}

void dprof_shim_rcu_read_lock(void)
{
	rcu_read_lock();
}

void dprof_shim_rcu_read_unlock(void)
{
	rcu_read_unlock();
}
