package natsembed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus"
)

// writeTestCert writes a self-signed certificate for 127.0.0.1 (its own CA) and its key.
func writeTestCert(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kvselect-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestEmbeddedTLSAndMonitoring: with TLSCert/TLSKey the client port speaks only TLS, a client
// trusting the CA connects, the in-process connection needs no TLS, and HTTPPort serves the
// monitoring endpoint.
func TestEmbeddedTLSAndMonitoring(t *testing.T) {
	cert, key := writeTestCert(t)
	e := startServer(t, Options{ListenAddr: "127.0.0.1:0", TLSCert: cert, TLSKey: key, HTTPPort: -1})
	if nc, err := nats.Connect(e.ClientURL(), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a plain-text client connected to the TLS port")
	}
	nc := connect(t, bus.ConnConfig{Name: "tls", URLs: e.ClientURL(), TLSCA: cert})
	waitFor(t, func() error {
		if !nc.IsConnected() {
			return nats.ErrDisconnected
		}
		return nil
	})
	if nc.TLSRequired() != true {
		t.Error("connection is not TLS")
	}
	inproc := connect(t, bus.ConnConfig{Name: "inproc", Embedded: e})
	if err := inproc.Flush(); err != nil {
		t.Fatalf("in-process connection: %v", err)
	}
	resp, err := http.Get(e.MonitorURL() + "/varz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/varz = %d", resp.StatusCode)
	}
	if e2 := startServer(t, Options{}); e2.MonitorURL() != "" {
		t.Fatalf("monitoring without HTTPPort: %s", e2.MonitorURL())
	}
}

// TestEmbeddedClusterMutualTLS: two clustered servers with TLS and a CA route over mutual TLS.
func TestEmbeddedClusterMutualTLS(t *testing.T) {
	cert, key := writeTestCert(t)
	opts := func(routes ...string) Options {
		return Options{ClusterName: "tls", ClusterListen: "127.0.0.1:0", ClusterRoutes: routes,
			TLSCert: cert, TLSKey: key, TLSCA: cert}
	}
	s1 := startServer(t, opts())
	s2 := startServer(t, opts(s1.ClusterURL()))
	waitFor(t, func() error {
		if s1.NumRoutes() < 1 || s2.NumRoutes() < 1 {
			return nats.ErrNoServers
		}
		return nil
	})
	// A server with another certificate (not signed by the CA) is refused by mutual TLS.
	otherCert, otherKey := writeTestCert(t)
	intruder := startServer(t, Options{ClusterName: "tls", ClusterListen: "127.0.0.1:0",
		ClusterRoutes: []string{s1.ClusterURL()}, TLSCert: otherCert, TLSKey: otherKey, TLSCA: otherCert})
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		rz, err := s1.Server().Routez(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rz.Routes {
			if r.RemoteID == intruder.Server().ID() {
				t.Fatal("a server with an untrusted certificate joined the cluster")
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
