/* Typing a memory access from the instruction: the variable whose DWARF location at the ip is
 * the operand's base register, and the struct its type points to. Built into
 * instruction_types.elf by make-instruction-types.sh; read by
 * userland/analysis/src/debuginfo/instruction_types/tests.rs. */
struct inner {
	int a;
	long b;
};

struct node {
	long key;
	struct inner in;
	struct node *next;
	int count;
};

typedef struct node node_t;

/* A call the compiler cannot see through: live values move to callee-saved registers. */
__attribute__((noipa)) void opaque(void)
{
	__asm__ volatile("" ::: "memory");
}

/* The parameter stays in %rdi (DW_OP_reg5) where the load runs. */
__attribute__((noinline)) int read_count(const node_t *n)
{
	return n->count;
}

/* After the call the parameter lives in a callee-saved register: a location list. */
__attribute__((noinline)) long after_call(struct node *n)
{
	opaque();
	return n->in.b + n->key;
}

/* A base register that holds an integer, not a pointer: no type. */
__attribute__((noinline)) long from_integer(unsigned long address)
{
	return *(long *)(address + 8);
}

struct pair {
	int x;
	int y;
};

/* Inlined: its parameter, in the inlined subroutine's scope, names the access. */
static inline int second(struct pair *inlined)
{
	return inlined->y;
}

__attribute__((noinline)) int through_inline(struct pair *outer, int k)
{
	return second(outer) + k;
}

void _start(void)
{
	static struct node a;
	read_count(&a);
	after_call(&a);
	from_integer((unsigned long)&a);
	static struct pair p;
	through_inline(&p, 1);
}
