//go:build linux

#include "textflag.h"

// The init of a tree's PID namespace (nsinit_linux.go): a static
// program of raw system calls, copied out of this binary's text into a
// sealed memfd and executed there, so each tree's init costs a few pages
// rather than a Go runtime. It never returns and never touches memory
// but its own stack.
//
// It makes itself undumpable (no ptrace, no /proc/1/mem from inside)
// and names itself "acpx-init", empties its capability sets, blocks
// every signal (as a namespace init it ignores those without a handler
// anyway; SIGKILL from outside ends it, and with it the namespace), and
// takes SIGCHLD through a signalfd. fd 3 is its control socket to the
// launcher (InitCtlFD; the protocol is nsinit_linux.go's): before it
// reaps a child that exited it writes 'c' and waits for 'a', so the
// launcher can read that child's exit status from /proc first; 'e'
// says the launcher reaped the agent; EOF or an error that the launcher
// is gone. Once the agent is reaped (or the launcher gone) it exits as
// soon as kill(-1, 0) finds no other process in the namespace: every
// process there is then its descendant, so the exit of the last one
// wakes it.

#define SYS_read 0
#define SYS_write 1
#define SYS_poll 7
#define SYS_rt_sigprocmask 14
#define SYS_wait4 61
#define SYS_kill 62
#define SYS_capset 126
#define SYS_prctl 157
#define SYS_exit_group 231
#define SYS_waitid 247
#define SYS_signalfd4 289

// Registers: R12 the signalfd, R13 1 while the launcher is connected,
// R15 1 once the agent is reaped or the launcher gone, R14 the poll
// timeout (none, or 100 ms without a signalfd).
// Stack frame (256 bytes below the entry stack pointer):
//   0: capability header {version, pid}; 8: capability data (24 bytes)
//   32: sigset of every signal; 40: sigset {SIGCHLD}
//   48: pollfd {signalfd, POLLIN}; 56: pollfd {3, POLLIN}
//   64: buffer (128 bytes: a signalfd_siginfo, a waitid siginfo whose
//       si_pid is at 80, a byte read from fd 3)
//   192: name; 208: the byte written to fd 3

// func nsinitText()
TEXT ·nsinitText(SB), NOSPLIT|NOFRAME, $0-0
	SUBQ	$256, SP
	// prctl(PR_SET_DUMPABLE, 0)
	MOVQ	$SYS_prctl, AX
	MOVQ	$4, DI
	XORQ	SI, SI
	SYSCALL
	// prctl(PR_SET_NAME, "acpx-init")
	MOVQ	$0x696e692d78706361, AX
	MOVQ	AX, 192(SP)
	MOVQ	$0x74, 200(SP)
	MOVQ	$SYS_prctl, AX
	MOVQ	$15, DI
	LEAQ	192(SP), SI
	SYSCALL
	// capset(&{_LINUX_CAPABILITY_VERSION_3, 0}, &{0...}): every set empty
	MOVL	$0x20080522, 0(SP)
	MOVL	$0, 4(SP)
	MOVQ	$0, 8(SP)
	MOVQ	$0, 16(SP)
	MOVQ	$0, 24(SP)
	MOVQ	$SYS_capset, AX
	LEAQ	0(SP), DI
	LEAQ	8(SP), SI
	SYSCALL
	// rt_sigprocmask(SIG_BLOCK, &all, NULL, 8)
	MOVQ	$-1, 32(SP)
	MOVQ	$SYS_rt_sigprocmask, AX
	XORQ	DI, DI
	LEAQ	32(SP), SI
	XORQ	DX, DX
	MOVQ	$8, R10
	SYSCALL
	// R12 = signalfd4(-1, &{SIGCHLD}, 8, SFD_NONBLOCK|SFD_CLOEXEC)
	MOVQ	$0x10000, 40(SP)
	MOVQ	$SYS_signalfd4, AX
	MOVQ	$-1, DI
	LEAQ	40(SP), SI
	MOVQ	$8, DX
	MOVQ	$0x80800, R10
	SYSCALL
	MOVQ	AX, R12
	MOVQ	$-1, R14
	CMPQ	R12, $0
	JGE	fds
	MOVQ	$100, R14
fds:
	MOVL	R12, 48(SP)
	MOVL	$1, 52(SP)
	MOVL	$3, 56(SP)
	MOVL	$1, 60(SP)
	MOVQ	$1, R13
	XORQ	R15, R15
loop:
	// a child that exited, not reaped yet: waitid(P_ALL, 0, &info,
	// WEXITED|WNOHANG|WNOWAIT|__WALL, NULL); si_pid 0 when none
	MOVQ	$0, 80(SP)
	MOVQ	$SYS_waitid, AX
	XORQ	DI, DI
	XORQ	SI, SI
	LEAQ	64(SP), DX
	MOVQ	$0x41000005, R10
	XORQ	R8, R8
	SYSCALL
	CMPQ	AX, $0
	JNE	check
	MOVL	80(SP), BX
	CMPL	BX, $0
	JEQ	check
	CMPQ	R13, $1
	JNE	reap
	// tell the launcher: write(3, "c", 1); gone (EPIPE): disconnected
	MOVB	$0x63, 208(SP)
	MOVQ	$SYS_write, AX
	MOVQ	$3, DI
	LEAQ	208(SP), SI
	MOVQ	$1, DX
	SYSCALL
	CMPQ	AX, $1
	JNE	gone
ack:
	// wait for 'a' ('e' on the way: the agent is reaped)
	MOVQ	$SYS_read, AX
	MOVQ	$3, DI
	LEAQ	64(SP), SI
	MOVQ	$1, DX
	SYSCALL
	CMPQ	AX, $-4
	JEQ	ack
	CMPQ	AX, $1
	JNE	gone
	MOVBLZX	64(SP), AX
	CMPQ	AX, $0x65
	JNE	acked
	MOVQ	$1, R15
	JMP	ack
acked:
	CMPQ	AX, $0x61
	JNE	ack
	JMP	reap
gone:
	XORQ	R13, R13
	MOVQ	$1, R15
reap:
	// wait4(si_pid, NULL, __WALL, NULL): exactly the child announced
	MOVQ	$SYS_wait4, AX
	MOVLQSX	BX, DI
	XORQ	SI, SI
	MOVQ	$0x40000000, DX
	XORQ	R10, R10
	SYSCALL
	JMP	loop
check:
	CMPQ	R15, $1
	JNE	wait
	// alone in the namespace? kill(-1, 0) == -ESRCH
	MOVQ	$SYS_kill, AX
	MOVQ	$-1, DI
	XORQ	SI, SI
	SYSCALL
	CMPQ	AX, $-3
	JEQ	done
wait:
	MOVW	$0, 54(SP)
	MOVW	$0, 62(SP)
	MOVQ	$SYS_poll, AX
	LEAQ	48(SP), DI
	MOVQ	R13, SI
	INCQ	SI
	MOVQ	R14, DX
	SYSCALL
	CMPQ	R13, $1
	JNE	drain
	MOVWLZX	62(SP), AX
	TESTQ	AX, AX
	JEQ	drain
	// the control socket stirred: 'e', a stray byte, or EOF / an error
	// (but EINTR): gone
	// (ack's read again, written out: this program makes no calls, and each read retries to its own label)
	MOVQ	$SYS_read, AX
	MOVQ	$3, DI
	LEAQ	64(SP), SI
	MOVQ	$1, DX
	SYSCALL
	CMPQ	AX, $-4
	JEQ	drain
	CMPQ	AX, $1
	JEQ	byte
	XORQ	R13, R13
	MOVQ	$1, R15
	JMP	drain
byte:
	MOVBLZX	64(SP), AX
	CMPQ	AX, $0x65
	JNE	drain
	MOVQ	$1, R15
drain:
	// empty the signalfd (non-blocking)
	MOVQ	$SYS_read, AX
	MOVQ	R12, DI
	LEAQ	64(SP), SI
	MOVQ	$128, DX
	SYSCALL
	CMPQ	AX, $0
	JGT	drain
	JMP	loop
done:
	MOVQ	$SYS_exit_group, AX
	XORQ	DI, DI
	SYSCALL
	// never reached: ud2, then the end marker nsinitCode looks for
	BYTE	$0x0f; BYTE $0x0b
	BYTE	$0x41; BYTE $0x43; BYTE $0x50; BYTE $0x58; BYTE $0x49; BYTE $0x4e; BYTE $0x49; BYTE $0x54

// func nsinitStart() *byte
TEXT ·nsinitStart(SB), NOSPLIT, $0-8
	LEAQ	·nsinitText(SB), AX
	MOVQ	AX, ret+0(FP)
	RET
