package node

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// HostImage is the image StartContainer builds when no image is named: the
// host's own redis-server and the libraries it links, FROM scratch, plus
// libfaketime and the jemalloc stub for clock faults. It needs no registry.
const HostImage = "redlock-redis-host"

// ValkeyHostImage is HostImage built from the host's valkey-server instead:
// StartContainer builds it when the server binary (Config.Binary, else
// $REDLOCK_SERVER_BINARY) is a valkey-server, so that the container tests
// run against Valkey as the process tests do.
const ValkeyHostImage = "redlock-valkey-host"

// hostImageFor names the image to build for a server binary and the name
// the binary gets inside it. Valkey's server is one multi-call executable
// (valkey-server links to valkey-check-rdb) that acts on the name it is run
// as, so it keeps the server's name.
func hostImageFor(binary string) (image, name string) {
	if binary == "" {
		binary = DefaultBinary()
	}
	if strings.HasPrefix(filepath.Base(binary), "valkey") {
		return ValkeyHostImage, "valkey-server"
	}
	return HostImage, "redis-server"
}

type builtImage struct {
	pool  *dockertest.Pool
	image string
}

var buildOnce = struct {
	sync.Mutex
	done map[builtImage]bool
}{done: map[builtImage]bool{}}

// buildHostImage builds the host image for binary (see hostImageFor) once
// per pool, unless it exists, and returns its name.
func buildHostImage(pool *dockertest.Pool, binary string) (string, error) {
	image, name := hostImageFor(binary)
	if binary == "" {
		binary = DefaultBinary()
	}
	buildOnce.Lock()
	defer buildOnce.Unlock()
	key := builtImage{pool, image}
	if buildOnce.done[key] {
		return image, nil
	}
	if _, err := pool.Client.InspectImage(image + ":latest"); err == nil {
		buildOnce.done[key] = true
		return image, nil
	}
	ctxDir, err := os.MkdirTemp("", "redlock-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(ctxDir)
	if err := hostImageContext(ctxDir, binary, name); err != nil {
		return "", err
	}
	err = pool.Client.BuildImage(dc.BuildImageOptions{
		Name: image + ":latest", Dockerfile: "Dockerfile", ContextDir: ctxDir, OutputStream: io.Discard,
	})
	if err != nil {
		return "", fmt.Errorf("node: build %s: %w", image, err)
	}
	buildOnce.done[key] = true
	return image, nil
}

// hostImageContext lays out a FROM scratch build: the server binary (as
// /usr/bin/<name>), every library ldd lists for it and for libfaketime, and
// the jemalloc stub.
func hostImageContext(dir, binary, name string) error {
	server, err := exec.LookPath(binary)
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrRedisServerMissing, err)
	}
	if server, err = filepath.EvalSymlinks(server); err != nil {
		return err
	}
	root := filepath.Join(dir, "root")
	if err := copyInto(root, server, "/usr/bin/"+name); err != nil {
		return err
	}
	libs, err := lddPaths(server)
	if err != nil {
		return err
	}
	stubDir := filepath.Join(dir, "stub-build")
	if err := os.MkdirAll(stubDir, 0o755); err != nil {
		return err
	}
	if env, err := fakeTimeEnv(stubDir, filepath.Join(stubDir, "offset")); err == nil {
		var lib string
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "LD_PRELOAD="); ok {
				lib = v
			}
		}
		if err := copyInto(root, lib, "/faketime/libfaketime.so.1"); err != nil {
			return err
		}
		more, err := lddPaths(lib)
		if err != nil {
			return err
		}
		libs = append(libs, more...)
		if err := copyInto(root, filepath.Join(stubDir, "jemalloc-stub", "libjemalloc.so.2"), "/stub/libjemalloc.so.2"); err != nil {
			return err
		}
	}
	for _, l := range libs {
		if err := copyInto(root, l, l); err != nil {
			return err
		}
	}
	dockerfile := "FROM scratch\nCOPY root/ /\nENTRYPOINT [\"/usr/bin/" + name + "\"]\n"
	return os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644)
}

// lddPaths lists the shared libraries (and the loader) a binary needs.
func lddPaths(binary string) ([]string, error) {
	out, err := exec.Command("ldd", binary).Output()
	if err != nil {
		return nil, fmt.Errorf("node: ldd %s: %w", binary, err)
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			paths = append(paths, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			paths = append(paths, f[0])
		}
	}
	return paths, nil
}

// copyInto copies the file at src (following links) to root+dst.
func copyInto(root, src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	target := filepath.Join(root, dst)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return os.WriteFile(target, b, 0o755)
}
