package procguard

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Main runs the guardian and exits if this process was started as one (by
// Start); otherwise it returns at once. Call it first thing in main, and
// in TestMain of the tests whose code calls Start: the guardian is this
// same executable.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != guardArg {
		return
	}
	// syscall.Exit, not os.Exit: there is nothing to flush, and a binary
	// built with -race would otherwise linger a second at exit, which
	// Close waits out.
	syscall.Exit(guard(os.Args[2:]))
}

// maxLine bounds a request line: the longest quoted environment variable.
const maxLine = 4 << 20

// guard is the guardian: it serves the parent's requests on fd 3 until
// end-of-file, reports on fd 4, and, unless the parent disarmed it, then
// kills the job's process group and removes the paths.
func guard(argv []string) int {
	ctl, reports := os.NewFile(3, "lifeline"), os.NewFile(4, "reports")
	if ctl == nil || reports == nil {
		fmt.Fprintln(os.Stderr, "procguard: not started by procguard.Start")
		return 2
	}
	// The job must hold neither: the parent's end-of-file is the news.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	// Stay for the parent's death, whatever signal a terminal or a service
	// manager sends around. Handled, not ignored: an ignored signal would
	// stay ignored in the job.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	becomeSubreaper()
	fmt.Fprintln(reports, "ready")

	var pgid int
	var paths, env []string
	disarmed := false
	lines := bufio.NewScanner(ctl)
	// A line carries one environment variable, quoted: up to 128 KiB on
	// Linux, four times that once quoted. The default 64 KiB limit would
	// end the loop as if the parent had died.
	lines.Buffer(make([]byte, 64<<10), maxLine)
	reqs := make(chan string)
	go func() {
		for lines.Scan() {
			reqs <- lines.Text()
		}
		close(reqs)
	}()
	// The parent's deadline (Guardian.Deadline): a parent that is stopped
	// rather than dead (Ctrl-Z, SIGSTOP, a debugger) gives no end-of-file,
	// yet its lock expires; past the deadline the group is killed.
	deadline := time.NewTimer(time.Hour)
	deadline.Stop()
requests:
	for {
		var line string
		select {
		case l, ok := <-reqs:
			if !ok {
				break requests
			}
			line = l
		case <-deadline.C:
			if pgid > 0 {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			continue
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch verb {
		case "deadline":
			if ns, err := strconv.ParseInt(arg, 10, 64); err == nil {
				deadline.Reset(time.Duration(ns - monotonicNow()))
			}
		case "remove":
			if p, err := strconv.Unquote(arg); err == nil {
				paths = append(paths, p)
			}
		case "env":
			if kv, err := strconv.Unquote(arg); err == nil {
				env = append(env, kv)
			}
		case "run":
			if pgid == 0 && len(argv) > 0 {
				pgid = start(argv, env, reports)
			}
		case "disarm":
			disarmed = true
		}
	}
	if disarmed {
		return 0
	}
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	for _, p := range paths {
		removeAll(p)
	}
	return 0
}

// start starts the job in a process group of its own and reports its pid,
// or why it could not start.
func start(argv, env []string, reports *os.File) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(reports, "failed %s\n", strconv.Quote(err.Error()))
		return 0
	}
	leader := cmd.Process.Pid
	fmt.Fprintf(reports, "started %d\n", leader)
	go reap(leader, reports)
	return leader
}

// removeAll removes path, trying again for a while: a process that is
// dying with the parent (a server killed by its parent-death signal) may
// still be writing files in it.
func removeAll(path string) {
	for try := 0; try < 50; try++ {
		if os.RemoveAll(path) == nil {
			if _, err := os.Lstat(path); os.IsNotExist(err) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reap waits for every child of the guardian, the job's leader and, on
// Linux, the orphans of the job that were reparented to the guardian (a
// subreaper): an orphan left a zombie would keep the job's process group
// in existence for its parent's checks. The leader's wait status is
// reported.
func reap(leader int, reports *os.File) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return // no children left: no descendant of the job runs
		case pid == leader:
			fmt.Fprintf(reports, "exited %d\n", uint32(ws))
		}
	}
}
