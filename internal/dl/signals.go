package dl

/*
#include <signal.h>
#include <string.h>

// longca_signals_onstack adds SA_ONSTACK to every installed handler that lacks it and
// returns how many it changed.
static int longca_signals_onstack(void) {
	int fixed = 0;
	for (int s = 1; s < NSIG; s++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		if (sigaction(s, NULL, &sa) != 0) continue;
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN || (sa.sa_flags & SA_ONSTACK)) continue;
		sa.sa_flags |= SA_ONSTACK;
		if (sigaction(s, &sa, NULL) == 0) fixed++;
	}
	return fixed;
}

// The test's stand-in for a library that installs a handler the careless way (no
// SA_ONSTACK) and chains to the one it replaced, as the handler that crashed longca on a
// Ctrl-C did (call 19, docs/perf.md).
static struct sigaction longca_prev[NSIG];
static void longca_chain(int s, siginfo_t *info, void *uc) {
	struct sigaction *p = &longca_prev[s];
	if (p->sa_flags & SA_SIGINFO) {
		if (p->sa_sigaction) p->sa_sigaction(s, info, uc);
	} else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
		p->sa_handler(s);
	}
}
static int longca_install_careless(int s) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = longca_chain;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	return sigaction(s, &sa, &longca_prev[s]);
}
static int longca_onstack_set(int s) {
	struct sigaction sa;
	if (sigaction(s, NULL, &sa) != 0) return -1;
	return (sa.sa_flags & SA_ONSTACK) != 0;
}
*/
import "C"

import "errors"

var errSignal = errors.New("sigaction failed")

// SignalsOnStack gives every installed signal handler that lacks it the SA_ONSTACK flag,
// and returns how many it changed. Go's runtime requires it of handlers that non-Go code
// installs (os/signal's documentation): a library that installs one without it and chains to Go's
// (one loaded on the H200 does; which one was not identified) makes a Ctrl-C or a timeout's
// SIGINT a fatal "non-Go code set up signal handler without SA_ONSTACK flag" instead of
// a clean stop. Open calls it after every library it opens, and the sweeps after every
// case (a library may install its handler on first use).
func SignalsOnStack() int { return int(C.longca_signals_onstack()) }

// installCareless installs a chaining handler without SA_ONSTACK on signal s (tests).
func installCareless(s int) error {
	if C.longca_install_careless(C.int(s)) != 0 {
		return errSignal
	}
	return nil
}

// onStack says whether signal s's handler has SA_ONSTACK (tests).
func onStack(s int) bool { return C.longca_onstack_set(C.int(s)) == 1 }
