// Package s3test runs a real S3 server for tests: the versitygw binary
// (v1.8.0, built by `make tools/versitygw`; docs/architecture.md,
// Dependencies) serving a temp POSIX directory on 127.0.0.1 with a random
// free port and random root credentials, with one bucket made.
//
// The binary comes from ACPX_VERSITYGW. When it is unset, Binary says to
// skip — except under `make test`, which sets ACPX_REQUIRE_S3=1: there a
// missing server is a failure, never a skip.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// EnvBinary names the versitygw binary; EnvRequire, when "1", makes a
// missing binary an error instead of a skip.
const (
	EnvBinary  = "ACPX_VERSITYGW"
	EnvRequire = "ACPX_REQUIRE_S3"
)

// Binary returns the versitygw path from ACPX_VERSITYGW. With it unset it
// returns ("", reason, nil) to skip, or an error under ACPX_REQUIRE_S3=1.
func Binary() (path, skip string, err error) {
	p := os.Getenv(EnvBinary)
	if p == "" {
		if os.Getenv(EnvRequire) == "1" {
			return "", "", fmt.Errorf("s3test: %s is unset but %s=1 (make test builds versitygw and sets it)", EnvBinary, EnvRequire)
		}
		return "", "S3 tests skipped: set " + EnvBinary + " to a versitygw binary (make test does)", nil
	}
	if _, err := os.Stat(p); err != nil {
		return "", "", fmt.Errorf("s3test: %s: %w", EnvBinary, err)
	}
	return p, "", nil
}

// Server is one running versitygw. Endpoint is "http://127.0.0.1:PORT".
type Server struct {
	// Endpoint is the server's base URL, "http://127.0.0.1:PORT".
	Endpoint string
	// Bucket is the bucket Start made ("acpx-test").
	Bucket string
	// AccessKey is the root access key id, random per server.
	AccessKey string
	// SecretKey is the root secret key, random per server.
	SecretKey string
	// Region is the region the server serves ("us-east-1").
	Region string
	dir    string
	cmd    *exec.Cmd
	done   chan error
}

// Start runs bin on a free loopback port over a new temp directory,
// waits (up to 30 s) until it answers HTTP, and creates Bucket. Errors:
// the server did not start or answer, or the bucket could not be made;
// the process is then stopped and reaped.
func Start(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "acpx-versitygw-")
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for range 3 { // a port taken between probe and listen: try another
		s, err := start(bin, dir, root)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start(bin, dir, root string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), Bucket: "acpx-test",
		AccessKey: "AK" + randHex(8), SecretKey: randHex(20), Region: "us-east-1", dir: dir, done: make(chan error, 1)}
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--region", s.Region,
		"--port", fmt.Sprintf("127.0.0.1:%d", port), "--quiet", "posix", root)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(s.cmd.SysProcAttr)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait() }()
	if err := s.waitReady(30 * time.Second); err != nil {
		s.kill()
		log, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
		return nil, fmt.Errorf("s3test: versitygw did not answer: %v; log: %s", err, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.Bucket}); err != nil {
		s.kill()
		return nil, fmt.Errorf("s3test: create bucket: %w", err)
	}
	return s, nil
}

func (s *Server) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	c := &http.Client{Timeout: time.Second}
	for {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("exited: %v", err)
		default:
		}
		resp, err := c.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond) // polling a socket that is not yet listening
	}
}

// Client returns an S3 client of the server (path style, its credentials).
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{Region: s.Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")})
}

// URL returns the state-store URL of the bucket under prefix.
func (s *Server) URL(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s&pathStyle=true", s.Bucket, prefix, s.Endpoint, s.Region)
}

// Env sets the process's AWS credentials to the server's (the SDK's
// standard chain reads them) and returns a function restoring them.
func (s *Server) Env() func() {
	vars := map[string]string{"AWS_ACCESS_KEY_ID": s.AccessKey, "AWS_SECRET_ACCESS_KEY": s.SecretKey,
		"AWS_REGION": s.Region, "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": filepath.Join(s.dir, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(s.dir, "none")}
	old := map[string]*string{}
	for k, v := range vars {
		if o, ok := os.LookupEnv(k); ok {
			old[k] = &o
		} else {
			old[k] = nil
		}
		os.Setenv(k, v)
	}
	return func() {
		for k, v := range old {
			if v == nil {
				os.Unsetenv(k)
			} else {
				os.Setenv(k, *v)
			}
		}
	}
}

// Dir is the server's temp directory (its POSIX root is Dir()/root).
func (s *Server) Dir() string { return s.dir }

func (s *Server) kill() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Stop ends the server (SIGTERM, then SIGKILL after 5 s), reaps it and
// removes its directory.
func (s *Server) Stop() error {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	var err error
	select {
	case err = <-s.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		err = <-s.done
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = nil // killed by our signal
	}
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}
