// Package s3test starts S3 servers on loopback for tests: gofakes3 in
// process, and versitygw (a real S3 gateway) as a child process.
package s3test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Credentials the servers are started with.
const (
	AccessKey = "seglog-test-access"
	SecretKey = "seglog-test-secret-key"
	Bucket    = "seglog"
)

// Server is a running S3 endpoint with a bucket.
type Server struct {
	Endpoint string
	// URL is an s3:// store URL for the bucket under prefix "t".
	URL string
}

// Fake starts gofakes3 in process; it stops when the test ends.
func Fake(t testing.TB) Server {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(Bucket); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(gofakes3.New(backend, gofakes3.WithIntegrityCheck(true)).Server())
	t.Cleanup(ts.Close)
	return server(ts.URL)
}

func server(endpoint string) Server {
	return Server{Endpoint: endpoint,
		URL: fmt.Sprintf("s3://%s/t?endpoint=%s&region=us-east-1&path-style=true", Bucket, endpoint)}
}

// VersityBinary finds versitygw: $SEGLOG_VERSITYGW (make test sets it),
// the machine's tool cache where make test builds it
// (~/.cache/seglog-tools/versitygw-v1.8.0/), bin/versitygw at the module
// root, or $PATH.
func VersityBinary() (string, error) {
	if p := os.Getenv("SEGLOG_VERSITYGW"); p != "" {
		return p, nil
	}
	var candidates []string
	if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, filepath.Join(home, ".cache", "seglog-tools", "versitygw-v1.8.0", "versitygw"))
	}
	_, file, _, _ := runtime.Caller(0)
	candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", "bin", "versitygw"))
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return exec.LookPath("versitygw")
}

// Versity starts versitygw v1.8.0 on 127.0.0.1 over a posix directory and
// creates the bucket; it is killed when the test ends. The test fails
// (never skips) when the binary is missing: make test installs it.
func Versity(t testing.TB) Server {
	t.Helper()
	bin, err := VersityBinary()
	if err != nil {
		t.Fatalf("versitygw not found (make test builds it once per machine into ~/.cache/seglog-tools with go install): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	root := t.TempDir()
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr, "posix", root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// It prints "listening on" once it serves.
	sc := bufio.NewScanner(out)
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), "listening on") {
			break
		}
	}
	if sc.Err() != nil || !strings.Contains(strings.Join(seen, "\n"), "listening on") {
		t.Fatalf("versitygw did not start: %v\n%s", sc.Err(), strings.Join(seen, "\n"))
	}
	go func() { // keep draining so it never blocks on a full pipe
		for sc.Scan() {
		}
	}()
	s := server("http://" + addr)
	c, err := Client(context.Background(), s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(Bucket)}); err != nil {
		t.Fatalf("creating the bucket on versitygw: %v", err)
	}
	return s
}

// Client is an S3 client of an endpoint with the test credentials.
func Client(ctx context.Context, endpoint string) (*s3.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")))
	if err != nil {
		return nil, err
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	}), nil
}
