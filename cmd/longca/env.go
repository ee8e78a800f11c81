package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/longca/longca/present"
	"github.com/longca/longca/session"
	"github.com/longca/longca/spmd"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:  "env",
		Usage: "show this rank's place in the world, the device it would use and the libraries it can open",
		Description: "Reads the launcher's environment (Open MPI, PMIx, MPICH, Slurm, torchrun, or none) the\n" +
			"way every SPMD subcommand does, and tries to open libmpi, libcuda, libnvrtc, libnccl and\n" +
			"libcudnn, printing the versions they report. Run it under srun or mpirun to see every rank.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json"},
			&cli.StringFlag{Name: "python", EnvVars: []string{"LONGCA_PYTHON"}, Usage: "Python interpreter of the torch:* peers (default python3 on the PATH)"},
		}, worldFlags()...),
		Action: envAction,
	})
}

// worldFlags are the flags of every command that runs as one rank of a world.
func worldFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "backend", Value: "auto", Usage: "communicator: auto, mpi, tcp, local (or nccl when built in)"},
		&cli.IntFlag{Name: "master-port", Usage: "TCP port of rank 0's bootstrap store (default: MASTER_PORT, else 29517)"},
		&cli.DurationFlag{Name: "timeout", Value: spmd.DefaultTimeout, Usage: "bound on every rendezvous and collective: a missing rank fails the others after this"},
	}
}

// discoverWorld reads the world from the environment and applies the world flags.
func discoverWorld(c *cli.Context) (spmd.World, spmd.Options, error) {
	w, err := spmd.Discover(os.Getenv)
	if err != nil {
		return w, spmd.Options{}, cli.Exit("longca: "+err.Error(), 2)
	}
	if c.IsSet("master-port") {
		p := c.Int("master-port")
		if p < 1 || p > 65535 {
			return w, spmd.Options{}, usageError("--master-port %d: use a TCP port from 1 to 65535", p)
		}
		w.MasterPort = p
	}
	o := spmd.Options{Backend: c.String("backend"), Timeout: c.Duration("timeout")}
	if o.Timeout < time.Second { // (--timeout 1ns failed every rank's first collective: exit 1, a line per rank)
		return w, o, usageError("--timeout %s: use at least 1s, such as 60s (it bounds every rendezvous and collective)", o.Timeout)
	}
	known := append(spmd.Backends(), "auto")
	if !slices.Contains(known, o.Backend) {
		return w, o, usageError("--backend %q: use one of %s", o.Backend, strings.Join(known, ", "))
	}
	return w, o, nil
}

func envAction(c *cli.Context) error {
	format := c.String("format")
	if format != "text" && format != "json" {
		return usageError("--format %q: use text or json", format)
	}
	w, o, err := discoverWorld(c)
	if err != nil {
		return err
	}
	rep := session.Env(c.Context, w, o, c.String("python"))
	if format == "json" {
		enc := json.NewEncoder(c.App.Writer)
		return enc.Encode(rep)
	}
	present.WriteEnv(c.App.Writer, rep)
	return nil
}
