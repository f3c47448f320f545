package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The /etc flags: binds into /etc, and --ca-certs.
func TestCLIEtc(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	run := func(t *testing.T, args ...string) (int, string, string) {
		t.Helper()
		return runTool(t, bin, append([]string{"run", "--best-effort"}, args...)...)
	}

	t.Run("ro-bind into /etc", func(t *testing.T) {
		code, stdout, stderr := run(t, "--ro-bind", "/usr/bin:/etc/sbxbin", "--", "/bin/sh", "-c", "test -x /etc/sbxbin/sh && echo bound")
		if code != 0 || stdout != "bound\n" {
			t.Errorf("exit status %d, stdout %q, stderr %q; want bound", code, stdout, stderr)
		}
	})
	t.Run("ro-bind over a generated file", func(t *testing.T) {
		code, _, stderr := run(t, "--ro-bind", "/usr/bin:/etc/hostname", "--", "/bin/true")
		if code != exitFailure || !strings.Contains(stderr, `--ro-bind "/usr/bin:/etc/hostname"`) || !strings.Contains(stderr, "Options.Hostname") {
			t.Errorf("exit status %d, stderr %q; want a refusal naming the flag and Options.Hostname", code, stderr)
		}
	})
	t.Run("ca-certs", func(t *testing.T) {
		const bundle = "/etc/ssl/certs/ca-certificates.crt"
		host, err := os.ReadFile(bundle)
		if err != nil {
			t.Skipf("the host has no %s: %v", bundle, err)
		}
		file := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(file, testCAPEM(t), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := run(t, "--ca-certs", file, "--", "/bin/sh", "-c", "grep -c 'BEGIN CERTIFICATE' "+bundle)
		if want := strconv.Itoa(bytes.Count(host, []byte("BEGIN CERTIFICATE"))+1) + "\n"; code != 0 || stdout != want {
			t.Errorf("exit status %d, stdout %q, stderr %q; want %q certificates", code, stdout, stderr, want)
		}
		code, _, stderr = run(t, "--ca-certs", "testdata/bad-profile.json", "--", "/bin/true")
		if code != exitFailure || !strings.Contains(stderr, "--ca-certs") || !strings.Contains(stderr, "no PEM certificate") {
			t.Errorf("a file without certificates: exit status %d, stderr %q; want a refusal naming --ca-certs", code, stderr)
		}
		code, _, stderr = run(t, "--ca-certs", filepath.Join(t.TempDir(), "missing.pem"), "--", "/bin/true")
		if code != exitFailure || !strings.Contains(stderr, "-ca-certs") {
			t.Errorf("a missing file: exit status %d, stderr %q; want a refusal naming --ca-certs", code, stderr)
		}
	})
}

// testCAPEM is a self-signed CA certificate made for the test.
func testCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cli test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
