package childproc

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTail(t *testing.T) {
	var tl Tail
	tl.Max = 10
	tl.Write([]byte("abc\n"))
	if got := string(tl.Bytes()); got != "abc\n" || tl.Len() != 4 {
		t.Errorf("kept %q of %d", got, tl.Len())
	}
	for range 100 {
		tl.Write([]byte("0123456\n"))
	}
	tl.Write([]byte("last"))
	if got := string(tl.Bytes()); got != "0123456\nlast"[2:] {
		t.Errorf("kept %q", got)
	}
	if tl.Len() != 4+800+4 {
		t.Errorf("counted %d", tl.Len())
	}
	// One write longer than the bound keeps its end.
	tl.Write(bytes.Repeat([]byte("x"), 100))
	if got := string(tl.Bytes()); got != strings.Repeat("x", 10) {
		t.Errorf("kept %q", got)
	}
	if cap(tl.buf) > 64 {
		t.Errorf("the buffer grew to %d bytes", cap(tl.buf))
	}
}

func TestLastLines(t *testing.T) {
	tests := []struct {
		in      string
		n       int
		dropped int64
		want    string
	}{
		{"", 0, 0, ""},
		{"  one\ntwo\n\n", 0, 0, "one\ntwo"},
		{"a\nb\nc\nd", 2, 0, "[…4 bytes before]\nc\nd"},
		// The first line kept after a cut is only the end of a line.
		{"end of a line\nb\nc", 5, 100, "[…114 bytes before]\nb\nc"},
		{strings.Repeat("é", 600), 1, 0, strings.Repeat("é", 512) + " […176 more bytes]"},
	}
	for _, tt := range tests {
		if got := LastLines(tt.in, tt.n, tt.dropped); got != tt.want {
			t.Errorf("LastLines(%.20q, %d, %d) = %.80q, want %.80q", tt.in, tt.n, tt.dropped, got, tt.want)
		}
	}
}

func TestHead(t *testing.T) {
	h := Head{Max: 5}
	if n, err := h.Write([]byte("abc")); n != 3 || err != nil || h.Truncated() {
		t.Fatalf("write: %d %v", n, err)
	}
	if n, err := h.Write([]byte("defgh")); n != 5 || err != nil {
		t.Fatalf("write past the bound: %d %v", n, err)
	}
	if string(h.Bytes()) != "abcde" || !h.Truncated() || h.Len() != 8 {
		t.Errorf("kept %q, truncated %v, len %d", h.Bytes(), h.Truncated(), h.Len())
	}
}

// TestGroup: when the context ends, the child's own children die with it,
// and Wait does not wait for them to close the output they hold.
func TestGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `sleep 60 & echo $! > "$1"; wait`, "sh", pidFile)
	var out Tail
	cmd.Stdout, cmd.Stderr = &out, &out
	Group(cmd, time.Second)
	start := time.Now()
	err := cmd.Run()
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("run: %v after %s", err, time.Since(start))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if !gone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the grandchild %d outlived the timeout", pid)
	}
}

// gone reports whether pid has exited (a zombie waiting for init counts).
func gone(pid int) bool {
	for range 50 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// TestCloseOnExec: a descriptor opened without O_CLOEXEC reaches a child
// until CloseOnExec marks it.
func TestCloseOnExec(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	read := func() string {
		out, _ := exec.Command("sh", "-c", "cat <&"+strconv.Itoa(fd)+" 2>/dev/null").Output()
		return string(out)
	}
	if got := read(); got != "hunter2" {
		t.Fatalf("before: the child read %q: the test does not open what it means to", got)
	}
	if err := CloseOnExec(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "" {
		t.Errorf("after: the child read %q", got)
	}
	// Standard input, output and error still reach it.
	out, err := exec.Command("sh", "-c", "echo ok").Output()
	if err != nil || string(out) != "ok\n" {
		t.Errorf("a child's output: %q, %v", out, err)
	}
}
