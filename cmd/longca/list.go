package main

import (
	"strings"

	"github.com/longca/longca/present"
	"github.com/longca/longca/session"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/spmd"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:   "list",
		Usage:  "list the registered masks, kernels (with the peers available here and their versions) and CP methods",
		Flags:  append(kernelFlags(), &cli.BoolFlag{Name: "long", Usage: "print each kernel variant's description whole (cut at 160 characters without it)"}),
		Action: listAction,
	})
}

func listAction(c *cli.Context) error {
	ko, err := kernelOptions(c, spmd.World{Size: 1})
	if err != nil {
		return err
	}
	if _, err := stopOnCrash(c); err != nil { // the peers' probes take the kernel flags: the same reading as kernel's
		return err
	}
	if err := checkVariant(ko, false, kernels.Names()...); err != nil { // a variant no kernel has (--variant nope listed, exit 0)
		return err
	}
	// The peers' probes start workers (a Python importing torch): Ctrl-C or SIGTERM
	// while one waits stops it with its process group (run's deferred CloseAll), where the
	// signal's default action left the worker's children running.
	ctx, stop := session.Interruptible(c.Context)
	defer stop()
	var peers []present.PeerInfo
	for _, k := range kernels.Names() {
		p := present.PeerInfo{Kernel: k}
		if !strings.HasSuffix(k, ":PATH") { // a family: any program speaking the protocol
			p = session.PeerStatus(ctx, k, ko)
		}
		if ctx.Err() != nil {
			return &session.ExitError{Code: 130, Msg: "longca list: interrupted while probing " + k}
		}
		peers = append(peers, p)
	}
	present.WriteList(c.App.Writer, peers, session.ProbeLibraries(), c.Bool("long"))
	return nil
}
