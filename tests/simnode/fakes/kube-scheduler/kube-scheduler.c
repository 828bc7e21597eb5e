/*
 * Stand-in for the kube-scheduler binary of a simulated control-plane node.
 *
 * What a node sees of a running kube-scheduler is this process: its command name,
 * its command line (the static pod's command and args) and its binary, which
 * answers `--version` as the real one does ("Kubernetes v1.29.2"; the version is
 * compiled in: -DK8S_VERSION='"v1.29.2"'). The scheduling stand-in itself
 * (standin-scheduler.py serve: the health endpoint) runs as its child, and this
 * process exits with it; when this process is stopped, systemd stops the child
 * (KillMode=control-group), as the kubelet stops a pod's containers.
 *
 * Freestanding (raw system calls, no C library headers): the simulated nodes have
 * gcc for DKMS but no libc6-dev. Build: gcc -O2 -static -nostdlib -fno-builtin
 * -fno-stack-protector -DK8S_VERSION='"v1.29.2"' -o kube-scheduler kube-scheduler.c
 * A test fixture, never a code path.
 */

#ifndef K8S_VERSION
#error "compile with -DK8S_VERSION='\"v1.x.y\"'"
#endif
#define STANDIN "/usr/local/lib/gpunode-sim/standin-scheduler.py"
#define PYTHON "/usr/bin/python3"

#if defined(__x86_64__)
enum { SYS_WRITE = 1, SYS_FORK = 57, SYS_EXECVE = 59, SYS_EXIT = 60, SYS_WAIT4 = 61 };

static long syscall4(long n, long a, long b, long c, long d) {
    register long r10 __asm__("r10") = d;
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret;
}

static long do_fork(void) { return syscall4(SYS_FORK, 0, 0, 0, 0); }

__asm__(".global _start\n_start:\n xor %rbp, %rbp\n mov %rsp, %rdi\n and $-16, %rsp\n call start\n hlt\n");
#elif defined(__aarch64__)
enum { SYS_WRITE = 64, SYS_EXECVE = 221, SYS_EXIT = 93, SYS_WAIT4 = 260, SYS_CLONE = 220 };

static long syscall4(long n, long a, long b, long c, long d) {
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
}

static long do_fork(void) { return syscall4(SYS_CLONE, 17 /* SIGCHLD */, 0, 0, 0); }

__asm__(".global _start\n_start:\n mov x0, sp\n bl start\n");
#else
#error "the stand-in kube-scheduler knows x86_64 and aarch64 only"
#endif

static void say(const char *text) {
    long length = 0;
    while (text[length])
        length++;
    syscall4(SYS_WRITE, 1, (long)text, length, 0);
}

static int same(const char *a, const char *b) {
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

void start(long *stack) {
    long argc = stack[0];
    char **argv = (char **)(stack + 1);
    char **envp = argv + argc + 1;
    int status = 0;

    for (long i = 1; i < argc; i++) {
        if (same(argv[i], "--version")) {
            say("Kubernetes " K8S_VERSION "\n");
            syscall4(SYS_EXIT, 0, 0, 0, 0);
        }
    }
    long child = do_fork();
    if (child == 0) {
        char *serve[] = {"python3", STANDIN, "serve", 0};
        syscall4(SYS_EXECVE, (long)PYTHON, (long)serve, (long)envp, 0);
        syscall4(SYS_EXIT, 127, 0, 0, 0);
    }
    while (syscall4(SYS_WAIT4, child, (long)&status, 0, 0) != child) {
    }
    syscall4(SYS_EXIT, (status & 0x7f) == 0 ? (status >> 8) & 0xff : 1, 0, 0, 0);
}
