// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package transcript

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
)

// host is a replay standing in for a real host under a Recorder.
func host(es ...Entry) *Replay {
	return NewReplay("h1", append([]Entry{{Op: OpHello, User: "root", Root: true, Addr: "10.0.0.1:22"}}, es...))
}

// TestRecorderMasksSecrets: what a recording keeps of a token read, a token on stdin, a
// password in an error and the checksum of the token file.
func TestRecorderMasksSecrets(t *testing.T) {
	const token = "K10abcdefabcdefabcdefabcdefabcdefabcdef::server:0123456789abcdef"
	sum := strings.Repeat("ab", 32)
	inner := host(
		Entry{Op: OpReadFile, Path: k3s.PathTokenFile, Data: token + "\n"},
		Entry{Op: OpRun, Cmd: "sh -c <gather facts script>", Label: "gather facts", Stdout: "sha " + sum + " " + k3s.PathTokenFile + "\nsha " + sum + " /etc/rancher/k3s/config.yaml\n"},
		Entry{Op: OpRun, Cmd: "sudo sh -c <token file script>", Label: "token file", Err: "failed: token: " + token},
	)
	var buf bytes.Buffer
	r := NewRecorder(inner, &buf)
	ctx := context.Background()
	if _, err := r.ReadFile(ctx, k3s.PathTokenFile); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, remote.Script("gather facts", "true")); err != nil {
		t.Fatal(err)
	}
	_, _ = r.Run(ctx, remote.Script("token file", "cat > f").WithStdin(strings.NewReader(token)).AsRoot())
	out := buf.String()
	if strings.Contains(out, "K10abcdef") || strings.Contains(out, "0123456789abcdef") {
		t.Errorf("the transcript holds the token:\n%s", out)
	}
	if strings.Count(out, sum) != 1 || !strings.Contains(out, ZeroSum+" "+k3s.PathTokenFile) {
		t.Errorf("the token file's checksum is kept or config.yaml's lost:\n%s", out)
	}
	es, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 4 || es[0].Op != OpHello || !es[1].Secret || es[3].StdinBytes != len(token) {
		t.Errorf("entries %+v", es)
	}
}

// TestRecorderExpandsGzip: a gzip-compressed stdout (the facts document where the host has
// gzip) is recorded expanded, so it is text the masking sees and JSON keeps byte for byte;
// the caller still gets the host's bytes.
func TestRecorderExpandsGzip(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	doc := "@k3strap-facts 1\nsha " + sum + " " + k3s.PathTokenFile + "\nname ünïcode\n@@ end\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	inner := host(
		Entry{Op: OpRun, Cmd: "sh -c <gather facts script>", Label: "gather facts", Stdout: gz.String()},
		Entry{Op: OpRun, Cmd: "sh -c <not gzip>", Label: "not gzip", Stdout: "\x1f\x8b but not gzip"},
	)
	var buf bytes.Buffer
	r := NewRecorder(inner, &buf)
	ctx := context.Background()
	res, err := r.Run(ctx, remote.Script("gather facts", "true"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Stdout, gz.Bytes()) {
		t.Error("the caller got the recording's text, not the host's bytes")
	}
	if _, err := r.Run(ctx, remote.Script("not gzip", "true")); err != nil {
		t.Fatal(err)
	}
	es, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(doc, sum, ZeroSum, 1)
	// Not gzip after its magic: kept as it came, as far as JSON holds it.
	if len(es) != 3 || es[1].Stdout != want || es[2].Stdout != "\x1f\ufffd but not gzip" {
		t.Errorf("recorded %q and %q, want %q and the stream as it came", es[1].Stdout, es[2].Stdout, want)
	}
}

// TestReplayAnswers: commands are answered in order by command, then by label (arguments
// such as a lock ID differ between runs); a poll asked more often than recorded gets the last
// answer; a call the transcript cannot answer is an error and listed.
func TestReplayAnswers(t *testing.T) {
	r := host(
		Entry{Op: OpRun, Cmd: "kubectl get nodes", Stdout: "first"},
		Entry{Op: OpRun, Cmd: "kubectl get nodes", Stdout: "second"},
		Entry{Op: OpRun, Cmd: "sh -c <lock script> acquire 1111", Label: "lock", Stdout: "taken"},
		Entry{Op: OpRun, Cmd: "false", Exit: 1, Stderr: "a\nb\nc\nd\ne\nf\n"},
	)
	ctx := context.Background()
	for _, want := range []string{"first", "second", "second"} {
		res, err := r.Run(ctx, remote.Command("kubectl", "get", "nodes"))
		if err != nil || string(res.Stdout) != want {
			t.Fatalf("got %v %v, want %s", res, err, want)
		}
	}
	if res, err := r.Run(ctx, remote.Script("lock", "x", "acquire", "2222")); err != nil || string(res.Stdout) != "taken" {
		t.Errorf("by label: %v %v", res, err)
	}
	var ce *remote.CommandError
	if _, err := r.Check(ctx, remote.Command("false")); !errors.As(err, &ce) || ce.ExitCode != 1 || ce.Stderr != "b\nc\nd\ne\nf" {
		t.Errorf("check of a failed command: %v", err)
	}
	if _, err := r.Run(ctx, remote.Command("rm", "-rf", "/")); err == nil || len(r.Unanswered()) != 1 {
		t.Errorf("an unrecorded command answered: %v %v", err, r.Unanswered())
	}
}

// TestReplayFilesAndLoss: writes are kept, reads answer with recorded content or a missing
// file, and after Lose every call fails as a lost connection does.
func TestReplayFilesAndLoss(t *testing.T) {
	r := host(
		Entry{Op: OpWriteFile, Path: "/etc/x", Size: 3},
		Entry{Op: OpReadFile, Path: "/etc/missing", Err: "open /etc/missing: file does not exist", NotExist: true},
	)
	ctx := context.Background()
	if err := r.WriteFile(ctx, "/etc/x", 0o600, strings.NewReader("abc"), 3, nil); err != nil || string(r.Written("/etc/x")) != "abc" {
		t.Fatalf("write: %v %q", err, r.Written("/etc/x"))
	}
	if _, err := r.ReadFile(ctx, "/etc/missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	r.Lose(errors.New("keepalive failed"))
	select {
	case <-r.Done():
	default:
		t.Fatal("Done not closed after Lose")
	}
	var te *remote.TransportError
	if _, err := r.Run(ctx, remote.Command("true")); !errors.As(err, &te) {
		t.Errorf("after Lose: %v, want a transport error", err)
	}
}

// TestReplayStreamPaceAndTime: a stream keeps its recorded pace, a stream its caller stopped
// runs until the context ends, and host timestamps move with the replay's start.
func TestReplayStreamPaceAndTime(t *testing.T) {
	rec := time.Now().Add(-time.Hour)
	r := NewReplay("h1", []Entry{
		{Op: OpHello, AtMS: rec.UnixMilli()},
		{Op: OpStream, Cmd: "probe", Lines: []string{"@start " + itoa(rec.Unix()), "created " + rec.UTC().Format(time.RFC3339)}, LineMS: []int64{0, 200}, Err: "h1: probe: context canceled"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var got []string
	var at []time.Duration
	start := time.Now()
	err := r.Stream(ctx, remote.Command("probe"), func(l string) { got = append(got, l); at = append(at, time.Since(start)) })
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 2*time.Second-50*time.Millisecond {
		t.Errorf("a stream recorded until cancelled ended early: %v after %s", err, time.Since(start))
	}
	if len(at) != 2 || at[1] < 190*time.Millisecond {
		t.Errorf("pace not kept: %v", at)
	}
	if want := "@start " + itoa(rec.Add(time.Since(rec)).Unix()); len(got) != 2 || !near(got[0], want) {
		t.Errorf("unix time not moved: %v, want about %s", got, want)
	}
	if len(got) == 2 && strings.Contains(got[1], rec.UTC().Format(time.RFC3339)) {
		t.Errorf("RFC 3339 time not moved: %s", got[1])
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// near reports whether the unix seconds at the end of a and b differ by at most 5.
func near(a, b string) bool {
	var x, y int64
	for _, c := range a[strings.LastIndex(a, " ")+1:] {
		x = x*10 + int64(c-'0')
	}
	for _, c := range b[strings.LastIndex(b, " ")+1:] {
		y = y*10 + int64(c-'0')
	}
	d := x - y
	return d >= -5 && d <= 5
}

// TestReplayMovedNames: a name the host made from its clock, answered with the time moved, is
// asked for again moved and still answered; a downloaded file keeps its recorded bytes (its
// checksum is compared with the host's).
func TestReplayMovedNames(t *testing.T) {
	rec := time.Now().Add(-time.Hour)
	snap := "/snapshots/before-cp1-" + itoa(rec.Unix())
	content := `{"created":"` + rec.UTC().Format(time.RFC3339) + `"}`
	r := NewReplay("h1", []Entry{
		{Op: OpHello, AtMS: rec.UnixMilli()},
		{Op: OpRun, Cmd: "save", Stdout: "saved " + snap + "\n"},
		{Op: OpDownload, Path: snap, Data: content},
		{Op: OpRun, Cmd: remote.Command("sha256sum", snap).String(), Stdout: "abc\n"},
	})
	ctx := context.Background()
	res, err := r.Run(ctx, remote.Command("save"))
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.TrimSpace(strings.TrimPrefix(string(res.Stdout), "saved "))
	if moved == snap {
		t.Fatalf("the snapshot's time was not moved: %s", moved)
	}
	b, err := r.Download(ctx, moved)
	if err != nil {
		t.Fatalf("download of the moved name: %v", err)
	}
	if string(b) != content {
		t.Errorf("downloaded %q, want the recorded bytes %q", b, content)
	}
	if _, err := r.Run(ctx, remote.Command("sha256sum", moved)); err != nil {
		t.Errorf("a command naming the moved name: %v", err)
	}
	if _, err := r.Download(ctx, "/snapshots/other"); err == nil {
		t.Error("a name never recorded was answered")
	}
}
