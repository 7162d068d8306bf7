/* Built -m32 without libc by tests/sandbox/unix.sh when the compiler can:
 * a 32-bit x86 program connecting a unix stream socket to ../stream.sock
 * (the workdir's parent, where the test serves a host socket), once
 * through the direct connect syscall (362) and once through socketcall
 * (102, SYS_CONNECT), printing each result: 0 or -errno. */
static long
sys(long n, long a, long b, long c)
{
	long r;

	__asm__ volatile("int $0x80" : "=a"(r) : "a"(n), "b"(a), "c"(b), "d"(c) : "memory");
	return r;
}

static void
num(long v)
{
	char b[16];
	int i = 15, neg = v < 0;

	if (neg)
		v = -v;
	b[i--] = '\n';
	do
		b[i--] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	if (neg)
		b[i--] = '-';
	sys(4, 1, (long)(b + i + 1), 15 - i); /* write */
}

struct sun {
	unsigned short family;
	char path[108];
};

void _start(void);
void
_start(void)
{
	static struct sun a = {1, "../stream.sock"};
	long args[3];

	num(sys(362, sys(359, 1, 1, 0), (long)&a, sizeof(a))); /* connect(socket(UNIX, STREAM)) */
	args[0] = sys(359, 1, 1, 0);
	args[1] = (long)&a;
	args[2] = sizeof(a);
	num(sys(102, 3, (long)args, 0)); /* socketcall(SYS_CONNECT, args) */
	sys(1, 0, 0, 0);                 /* exit */
}
