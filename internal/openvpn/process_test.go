package openvpn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeProc stands in for OpenVPN: it appends lines to the log and exits.
type fakeProc struct {
	done    chan struct{}
	stopped chan struct{}
}

func (f *fakeProc) Pid() int              { return 4242 }
func (f *fakeProc) Done() <-chan struct{} { return f.done }
func (f *fakeProc) Wait() error           { <-f.done; return errors.New("exit status 1") }
func (f *fakeProc) Stop() error {
	select {
	case <-f.stopped:
	default:
		close(f.stopped)
	}
	<-f.done
	return nil
}

// fakeLauncher writes lines to the log, one every 20 ms, then exits
// (exit=true) or runs until stopped.
func fakeLauncher(lines []string, exit bool) (Launcher, *[]string) {
	var argv []string
	return func(ctx context.Context, logPath string, a ...string) (Proc, error) {
		argv = a
		p := &fakeProc{done: make(chan struct{}), stopped: make(chan struct{})}
		go func() {
			defer close(p.done)
			f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				return
			}
			defer f.Close()
			for _, l := range lines {
				select {
				case <-p.stopped:
					return
				case <-time.After(20 * time.Millisecond):
				}
				f.WriteString("2026-11-22 02:13:58 " + l + "\n")
			}
			if !exit {
				<-p.stopped
			}
		}()
		return p, nil
	}, &argv
}

func testConfig() *Config {
	return &Config{Directives: []Directive{D("verb", "3")}}
}

func TestStartWritesConfigAndWaits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	launch, argv := fakeLauncher([]string{"OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)]", ReadyLine}, false)
	p, err := StartWith(context.Background(), launch, testConfig(), dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if err := p.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*argv, " "); got != "openvpn --config "+filepath.Join(dir, "server.conf") {
		t.Errorf("argv %q", got)
	}
	b, err := os.ReadFile(p.ConfigPath)
	if err != nil || string(b) != "verb 3\n" {
		t.Errorf("config %q %v", b, err)
	}
	if st, _ := os.Stat(p.ConfigPath); st.Mode().Perm() != 0o600 {
		t.Errorf("config mode %o", st.Mode().Perm())
	}
	l, err := p.Log()
	if err != nil || !l.Ready || l.Version != "2.6.14" {
		t.Errorf("log %+v %v", l, err)
	}
	if p.Pid() != 4242 {
		t.Errorf("pid %d", p.Pid())
	}
}

func TestWaitReadyErrors(t *testing.T) {
	t.Parallel()
	var many []string
	for i := 0; i < 30; i++ {
		many = append(many, "line "+strconv.Itoa(i))
	}
	tests := []struct {
		name  string
		lines []string
		exit  bool
		want  []string
		not   []string
	}{
		{"exit", append(many, "Options error: bad"), true, []string{"exited before logging", "exit status 1", "Options error: bad", "line 16"}, []string{"line 15\n"}},
		{"timeout", []string{"TLS Error: TLS key negotiation failed"}, false, []string{"has not logged", "timed out", "TLS Error"}, nil},
		{"with errors", []string{ReadyLine + " With Errors"}, false, []string{"started with errors"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// A log left by an earlier run must not count.
			os.WriteFile(filepath.Join(dir, "client.log"), []byte("2026-11-22 02:00:00 "+ReadyLine+"\n"), 0o600)
			launch, _ := fakeLauncher(tt.lines, tt.exit)
			p, err := StartWith(context.Background(), launch, testConfig(), dir, "client")
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			// A process that exits is waited for however long its 31
			// lines take to come (0.6 s idle, longer on a loaded
			// machine); the others wait out the time limit.
			limit := time.Second
			if tt.exit {
				limit = time.Minute
			}
			err = p.WaitReady(context.Background(), limit)
			if err == nil {
				t.Fatal("WaitReady succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error has %q (more than %d lines):\n%v", w, TailLines, err)
				}
			}
		})
	}
}

func TestStartRefuses(t *testing.T) {
	t.Parallel()
	launch, _ := fakeLauncher(nil, true)
	dir := t.TempDir()
	if _, err := StartWith(context.Background(), launch, testConfig(), dir, "../x"); err == nil {
		t.Error("role with a path accepted")
	}
	bad := &Config{Directives: []Directive{D("dev", "a\nup /bin/sh")}}
	if _, err := StartWith(context.Background(), launch, bad, dir, "server"); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("unrenderable config: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "server.conf")); err == nil {
		t.Error("config written although it does not render")
	}
}
