//go:build linux

package e2e

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair: the controller side and the terminal side.
func openPTY() (ptm, pts *os.File, err error) {
	ptm, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		ptm.Close()
		return nil, nil, e
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		ptm.Close()
		return nil, nil, e
	}
	pts, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		return nil, nil, err
	}
	return ptm, pts, nil
}

// `make run` in a terminal: the hub comes up; Ctrl-C (the terminal's interrupt character)
// stops it in order, and make exits with status 0.
func TestE2E_MakeRunExitsCleanlyOnCtrlC(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	ptm, pts, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptm.Close()
	dir := t.TempDir()
	admin := freeAddr(t)
	cmd := exec.Command("make", "--no-print-directory", "run", "BIN="+filepath.Join(dir, "bin"))
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "NOMICORE_DATA="+filepath.Join(dir, "hub"), "NOMICORE_LISTEN="+freeAddr(t),
		"NOMICORE_ADMIN_LISTEN="+admin, "NOMICORE_CLIENT_LISTEN="+freeAddr(t), "NOMICORE_LOG_FORMAT=json")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() { // the terminal's output; the read ends when the last process closes it
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	up := false
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && !up; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			<-copied
			t.Fatalf("make run exited before the hub came up: %v\n%s", err, out.String())
		default:
		}
		if resp, err := http.Get("http://" + admin + "/healthz"); err == nil {
			resp.Body.Close()
			up = resp.StatusCode == 200
		}
	}
	if !up {
		t.Fatal("the hub did not come up")
	}
	if _, err := ptm.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil { // a non-zero status, or make killed by the interrupt
			<-copied
			t.Fatalf("make run after Ctrl-C: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("make run did not exit after Ctrl-C\n%s", out.String())
	}
	<-copied
	if bytes.Contains(out.Bytes(), []byte("make: ***")) || !bytes.Contains(out.Bytes(), []byte(`"msg":"hub stopped"`)) {
		t.Fatalf("terminal output:\n%s", out.String())
	}
}
