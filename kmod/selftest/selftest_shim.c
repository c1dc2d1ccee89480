// SPDX-License-Identifier: GPL-2.0
/*
 * dprof_selftest.ko C shim: the kmem caches, kernel threads pinned to CPUs and the debugfs
 * control file. Rust (selftest_main.rs) runs the workloads.
 */
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "selftest.h" /* also declares what this file exports to Rust */

int dprof_selftest_rs_run(const char *cmd, size_t len);
u64 dprof_selftest_rs_causal_rounds(void);

static struct kmem_cache *obj_cache;
static struct kmem_cache *local_cache;
static struct kmem_cache *relay_cache;
static struct kmem_cache *bulk_cache;
static struct dentry *debugfs_dir;
/* The miss classification and working set workloads (misses.rs). */
static struct kmem_cache *pair_cache;
static struct kmem_cache *shared_cache;
static struct kmem_cache *stride_cache;
static struct kmem_cache *sweep_cache;
/* The causal experiment workload (causal.rs). */
static struct kmem_cache *causal_x_cache;
static struct kmem_cache *causal_y_cache;

struct dprof_selftest_obj *dprof_selftest_shim_alloc_obj(void)
{
	return kmem_cache_zalloc(obj_cache, GFP_KERNEL);
}

void dprof_selftest_shim_free_obj(struct dprof_selftest_obj *obj)
{
	kmem_cache_free(obj_cache, obj);
}

struct dprof_selftest_local *dprof_selftest_shim_alloc_local(void)
{
	return kmem_cache_zalloc(local_cache, GFP_KERNEL);
}

void dprof_selftest_shim_free_local(struct dprof_selftest_local *obj)
{
	kmem_cache_free(local_cache, obj);
}

/* Not zeroed: a memset would touch the object before its allocation is traced. */
struct dprof_selftest_relay *dprof_selftest_shim_alloc_relay(void)
{
	return kmem_cache_alloc(relay_cache, GFP_KERNEL);
}

void dprof_selftest_shim_free_relay(struct dprof_selftest_relay *obj)
{
	kmem_cache_free(relay_cache, obj);
}

int dprof_selftest_shim_alloc_bulk(struct dprof_selftest_bulk **objects, size_t n)
{
	return kmem_cache_alloc_bulk(bulk_cache, GFP_KERNEL, n, (void **)objects);
}

void dprof_selftest_shim_free_bulk(struct dprof_selftest_bulk **objects, size_t n)
{
	kmem_cache_free_bulk(bulk_cache, n, (void **)objects);
}

/* kmalloc(64) objects one by one; how many were allocated (the first ones). */
int dprof_selftest_shim_kmalloc_64(void **objects, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		objects[i] = kmalloc(64, GFP_KERNEL);
		if (!objects[i])
			break;
	}
	return i;
}

void dprof_selftest_shim_kfree_bulk(void **objects, size_t n)
{
	kfree_bulk(n, objects);
}

struct dprof_selftest_pair *dprof_selftest_shim_alloc_pair(void)
{
	return kmem_cache_zalloc(pair_cache, GFP_KERNEL);
}

void dprof_selftest_shim_free_pair(struct dprof_selftest_pair *obj)
{
	kmem_cache_free(pair_cache, obj);
}

struct dprof_selftest_shared *dprof_selftest_shim_alloc_shared(void)
{
	return kmem_cache_zalloc(shared_cache, GFP_KERNEL);
}

void dprof_selftest_shim_free_shared(struct dprof_selftest_shared *obj)
{
	kmem_cache_free(shared_cache, obj);
}

/*
 * Not zeroed: a memset would touch every line of the object (stride: its whole page slot)
 * before the allocation is traced, and the workloads set what they read.
 */
struct dprof_selftest_stride *dprof_selftest_shim_alloc_stride(void)
{
	return kmem_cache_alloc(stride_cache, GFP_KERNEL);
}

void dprof_selftest_shim_free_stride(struct dprof_selftest_stride *obj)
{
	kmem_cache_free(stride_cache, obj);
}

struct dprof_selftest_sweep *dprof_selftest_shim_alloc_sweep(void)
{
	return kmem_cache_alloc(sweep_cache, GFP_KERNEL | __GFP_NOWARN);
}

void dprof_selftest_shim_free_sweep(struct dprof_selftest_sweep *obj)
{
	kmem_cache_free(sweep_cache, obj);
}

static int misses_caches_create(void)
{
	pair_cache = kmem_cache_create("dprof_selftest_pair", sizeof(struct dprof_selftest_pair),
				       64, 0, NULL);
	shared_cache = kmem_cache_create("dprof_selftest_shared",
					 sizeof(struct dprof_selftest_shared), 64, 0, NULL);
	/* Aligned to a page: each 64-byte object takes a page-sized slot. */
	stride_cache = kmem_cache_create("dprof_selftest_stride",
					 sizeof(struct dprof_selftest_stride), PAGE_SIZE, 0, NULL);
	sweep_cache = kmem_cache_create("dprof_selftest_sweep",
					sizeof(struct dprof_selftest_sweep), 64, 0, NULL);
	return pair_cache && shared_cache && stride_cache && sweep_cache ? 0 : -ENOMEM;
}

static void misses_caches_destroy(void)
{
	kmem_cache_destroy(pair_cache);
	kmem_cache_destroy(shared_cache);
	kmem_cache_destroy(stride_cache);
	kmem_cache_destroy(sweep_cache);
}

struct dprof_selftest_causal_x *dprof_selftest_shim_alloc_causal_x(void)
{
	return kmem_cache_zalloc(causal_x_cache, GFP_KERNEL);
}

void dprof_selftest_shim_free_causal_x(struct dprof_selftest_causal_x *obj)
{
	kmem_cache_free(causal_x_cache, obj);
}

struct dprof_selftest_causal_y *dprof_selftest_shim_alloc_causal_y(void)
{
	return kmem_cache_zalloc(causal_y_cache, GFP_KERNEL);
}

void dprof_selftest_shim_free_causal_y(struct dprof_selftest_causal_y *obj)
{
	kmem_cache_free(causal_y_cache, obj);
}

static int causal_caches_create(void)
{
	causal_x_cache = kmem_cache_create("dprof_selftest_causal_x",
					   sizeof(struct dprof_selftest_causal_x), 64, 0, NULL);
	causal_y_cache = kmem_cache_create("dprof_selftest_causal_y",
					   sizeof(struct dprof_selftest_causal_y), 64, 0, NULL);
	return causal_x_cache && causal_y_cache ? 0 : -ENOMEM;
}

static void causal_caches_destroy(void)
{
	kmem_cache_destroy(causal_x_cache);
	kmem_cache_destroy(causal_y_cache);
}

void dprof_selftest_shim_cond_resched(void)
{
	cond_resched();
}

/* Sleeps for about `us` microseconds (process context). */
void dprof_selftest_shim_pause_us(unsigned long us)
{
	usleep_range(us, us + us / 2);
}

/*
 * Sleeps `us` microseconds on a timer with no slack, so that the wake-up never waits for
 * another timer due in the slack, the sampler's among them (process context).
 */
void dprof_selftest_shim_sleep_exact_us(unsigned long us)
{
	usleep_range(us, us);
}

/* Where the wake-up workload's consumer sleeps (causal_blocking.rs). */
static DECLARE_WAIT_QUEUE_HEAD(handoff_wait);

/*
 * Sleeps until *count reaches at least target, or 1 s passes (a partner that stopped);
 * returns whether it did. Woken by dprof_selftest_shim_handoff_wake, from a task.
 */
bool dprof_selftest_shim_handoff_wait(const u64 *count, u64 target)
{
	return wait_event_timeout(handoff_wait, READ_ONCE(*count) >= target, HZ) > 0;
}

void dprof_selftest_shim_handoff_wake(void)
{
	wake_up(&handoff_wait);
}

struct dprof_selftest_thread {
	int (*fn)(void *);
	void *arg;
	struct completion done;
};

static int dprof_selftest_thread_main(void *p)
{
	struct dprof_selftest_thread *t = p;

	t->fn(t->arg);
	complete(&t->done);
	return 0;
}

/*
 * Runs fns[i](arg) on CPU cpus[i] (i < n <= 4), each in its own kernel thread, and waits for
 * all of them. Returns 0, or a negative errno when a thread could not be created (those
 * already started still run to completion first).
 */
int dprof_selftest_shim_run_threads(int n, const int *cpus, int (*const *fns)(void *), void *arg)
{
	struct dprof_selftest_thread threads[4];
	int i, started = 0, ret = 0;

	if (n < 1 || n > 4)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		struct task_struct *task;

		if (cpus[i] < 0 || cpus[i] >= nr_cpu_ids || !cpu_online(cpus[i])) {
			ret = -EINVAL;
			break;
		}
		threads[i].fn = fns[i];
		threads[i].arg = arg;
		init_completion(&threads[i].done);
		task = kthread_create(dprof_selftest_thread_main, &threads[i], "dprof_st/%d", cpus[i]);
		if (IS_ERR(task)) {
			ret = PTR_ERR(task);
			break;
		}
		kthread_bind(task, cpus[i]);
		wake_up_process(task);
		started++;
	}
	for (i = 0; i < started; i++)
		wait_for_completion(&threads[i].done);
	return ret;
}

static ssize_t run_write(struct file *file, const char __user *ubuf, size_t len, loff_t *ppos)
{
	char cmd[64];
	int ret;

	if (len == 0 || len >= sizeof(cmd))
		return -EINVAL;
	if (copy_from_user(cmd, ubuf, len))
		return -EFAULT;
	cmd[len] = 0;
	ret = dprof_selftest_rs_run(cmd, len);
	return ret < 0 ? ret : len;
}

static const struct file_operations run_fops = {
	.owner = THIS_MODULE,
	.write = run_write,
	.llseek = noop_llseek,
};

/* causal_rounds: the rounds of `causal` done since load, in decimal (causal.rs). */
static int causal_rounds_get(void *data, u64 *val)
{
	*val = dprof_selftest_rs_causal_rounds();
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(causal_rounds_fops, causal_rounds_get, NULL, "%llu\n");

/* bulk_objects: "BULK KFREE_BULK", the objects of the `bulk` workload since load (bulk.rs). */
void dprof_selftest_rs_bulk_objects(u64 *bulk, u64 *kfree_bulk);

/* A debugfs file of two counts, "A B", as `get` gives them. */
static ssize_t two_counts_read(void (*get)(u64 *a, u64 *b), char __user *buf, size_t len,
			       loff_t *pos)
{
	char text[48];
	u64 a, b;
	int n;

	get(&a, &b);
	n = scnprintf(text, sizeof(text), "%llu %llu\n", a, b);
	return simple_read_from_buffer(buf, len, pos, text, n);
}

static ssize_t bulk_objects_read(struct file *file, char __user *buf, size_t len, loff_t *pos)
{
	return two_counts_read(dprof_selftest_rs_bulk_objects, buf, len, pos);
}

static const struct file_operations bulk_objects_fops = {
	.owner = THIS_MODULE,
	.read = bulk_objects_read,
};

/*
 * One round of the `ephemeral` workload (ephemeral.rs): creates `dprof_selftest_eph_b` (200-byte
 * objects) or `_a` (96-byte ones), allocates and frees `objects` objects of it one by one, and
 * destroys it. Returns the objects allocated, or a negative errno.
 */
static struct kmem_cache *ephemeral_create(bool b)
{
	return kmem_cache_create(b ? "dprof_selftest_eph_b" : "dprof_selftest_eph_a", b ? 200 : 96,
				 8, 0, NULL);
}

/*
 * The `dprof_selftest_eph_a` cache that `ephemeral-hold` created ahead of a run, which the run's
 * first eph_a round uses instead of creating one: a cache that exists when a collection starts,
 * so that a history plan can name it.
 */
static struct kmem_cache *held_eph_a;

int dprof_selftest_shim_ephemeral_hold(void)
{
	struct kmem_cache *cache = ephemeral_create(false);

	if (!cache)
		return -ENOMEM;
	if (cmpxchg(&held_eph_a, NULL, cache)) {
		kmem_cache_destroy(cache);
		return -EBUSY;
	}
	return 0;
}

int dprof_selftest_shim_ephemeral_round(bool b, int objects)
{
	struct kmem_cache *cache = b ? NULL : xchg(&held_eph_a, NULL);
	void *held[16];
	int i, n = 0;

	if (!cache)
		cache = ephemeral_create(b);
	if (!cache)
		return -ENOMEM;
	objects = min_t(int, objects, ARRAY_SIZE(held));
	for (i = 0; i < objects; i++) {
		held[i] = kmem_cache_alloc(cache, GFP_KERNEL);
		if (held[i])
			n++;
	}
	for (i = 0; i < objects; i++)
		if (held[i])
			kmem_cache_free(cache, held[i]);
	kmem_cache_destroy(cache);
	return n;
}

/* ephemeral_objects: "A B", the objects of the `ephemeral` workload since load. */
void dprof_selftest_rs_ephemeral_objects(u64 *a, u64 *b);

static ssize_t ephemeral_objects_read(struct file *file, char __user *buf, size_t len,
				      loff_t *pos)
{
	return two_counts_read(dprof_selftest_rs_ephemeral_objects, buf, len, pos);
}

static const struct file_operations ephemeral_objects_fops = {
	.owner = THIS_MODULE,
	.read = ephemeral_objects_read,
};

int dprof_selftest_shim_init(void)
{
	obj_cache = kmem_cache_create("dprof_selftest_obj", sizeof(struct dprof_selftest_obj),
				      64, 0, NULL);
	local_cache = kmem_cache_create("dprof_selftest_local",
					sizeof(struct dprof_selftest_local), 64, 0, NULL);
	relay_cache = kmem_cache_create("dprof_selftest_relay",
					sizeof(struct dprof_selftest_relay), 64, 0, NULL);
	bulk_cache = kmem_cache_create("dprof_selftest_bulk", sizeof(struct dprof_selftest_bulk),
				       64, 0, NULL);
	if (!obj_cache || !local_cache || !relay_cache || !bulk_cache || misses_caches_create() ||
	    causal_caches_create())
		goto fail;
	debugfs_dir = debugfs_create_dir("dprof_selftest", NULL);
	if (IS_ERR(debugfs_dir))
		goto fail;
	debugfs_create_file("run", 0200, debugfs_dir, NULL, &run_fops);
	debugfs_create_file_unsafe("causal_rounds", 0444, debugfs_dir, NULL, &causal_rounds_fops);
	debugfs_create_file("bulk_objects", 0444, debugfs_dir, NULL, &bulk_objects_fops);
	debugfs_create_file("ephemeral_objects", 0444, debugfs_dir, NULL, &ephemeral_objects_fops);
	return 0;
fail:
	kmem_cache_destroy(obj_cache);
	kmem_cache_destroy(local_cache);
	kmem_cache_destroy(relay_cache);
	kmem_cache_destroy(bulk_cache);
	misses_caches_destroy();
	causal_caches_destroy();
	return -ENOMEM;
}

void dprof_selftest_shim_exit(void)
{
	debugfs_remove(debugfs_dir);
	kmem_cache_destroy(obj_cache);
	kmem_cache_destroy(local_cache);
	kmem_cache_destroy(relay_cache);
	kmem_cache_destroy(bulk_cache);
	kmem_cache_destroy(xchg(&held_eph_a, NULL));
	misses_caches_destroy();
	causal_caches_destroy();
}
