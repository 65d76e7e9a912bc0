package main

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// usage is what a load cell cost: this process's CPU (getrusage, user and
// system, of every thread), and the nodes' CPU and command time summed over
// every node.
type usage struct {
	client time.Duration
	nodes  time.Duration
	// cmdUsec is the nodes' time inside commands (INFO commandstats usec),
	// scriptUsec the part spent in EVAL, EVALSHA and FCALL.
	cmdUsec, scriptUsec float64
}

func (u usage) minus(v usage) usage {
	return usage{u.client - v.client, u.nodes - v.nodes, u.cmdUsec - v.cmdUsec, u.scriptUsec - v.scriptUsec}
}

func (u usage) plus(v usage) usage {
	return usage{u.client + v.client, u.nodes + v.nodes, u.cmdUsec + v.cmdUsec, u.scriptUsec + v.scriptUsec}
}

func clientCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureUsage reads the client's CPU and each node's INFO cpu and
// commandstats. The nodes' used_cpu_user and used_cpu_sys are the server's
// own getrusage (every thread), with microsecond resolution, which
// /proc/<pid>/stat's clock ticks do not have. A node that does not answer
// adds nothing (the figures are then low, and the report says which cells
// had errors anyway).
func measureUsage(ctx context.Context, mon []redis.UniversalClient) usage {
	u := usage{client: clientCPU()}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, m := range mon {
		info, err := m.Info(ctx, "cpu", "commandstats").Result()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(info, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch {
			case k == "used_cpu_user" || k == "used_cpu_sys":
				f, _ := strconv.ParseFloat(v, 64)
				u.nodes += time.Duration(f * 1e9)
			case strings.HasPrefix(k, "cmdstat_"):
				cmd := strings.TrimPrefix(k, "cmdstat_")
				if cmd == "info" {
					continue // our own measuring
				}
				usec := statField(v, "usec")
				u.cmdUsec += usec
				if strings.HasPrefix(cmd, "eval") || strings.HasPrefix(cmd, "fcall") {
					u.scriptUsec += usec
				}
			}
		}
	}
	return u
}

// statField returns name's value in a commandstats line such as
// "calls=3,usec=40,usec_per_call=13.33,...".
func statField(line, name string) float64 {
	for _, kv := range strings.Split(line, ",") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
