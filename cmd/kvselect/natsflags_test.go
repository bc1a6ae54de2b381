package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natsembed"
)

func TestNATSEnvFallbacks(t *testing.T) {
	t.Setenv("NATS_URL", "nats://env:4222")
	t.Setenv("NATS_CREDS", "/etc/nats/env.creds")
	for _, tc := range []struct {
		args            []string
		wantURL, wantCr string
	}{
		{nil, "nats://env:4222", "/etc/nats/env.creds"},
		{[]string{"--nats-url", "nats://flag:4222"}, "nats://flag:4222", "/etc/nats/env.creds"},
		{[]string{"--nats-creds", "/flag.creds"}, "nats://env:4222", "/flag.creds"},
		{[]string{"--nats-listen", "127.0.0.1:4222"}, "", ""}, // embedded asked for: both ignored
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if o.natsURL != tc.wantURL || o.natsCreds != tc.wantCr {
			t.Errorf("%v: url %q creds %q, want %q %q", tc.args, o.natsURL, o.natsCreds, tc.wantURL, tc.wantCr)
		}
	}
}

func TestNATSSecurityFlags(t *testing.T) {
	t.Setenv("NATS_URL", "")
	t.Setenv("NATS_CREDS", "")
	for _, bad := range [][]string{
		{"--bus-v1", "maybe"},
		{"--peer-dead-after", "-1s"},
		{"--bus-max-members", "0"},
		{"--nats-http-port", "70000"},
		{"--nats-url", "nats://x:4222", "--nats-http-port", "8222"},
		{"--nats-url", "nats://x:4222", "--nats-nkey-seed", "/s", "--nats-user", "u"},
		{"--nats-user", "u"}, // user/password are for --nats-url
	} {
		if _, err := configure(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	o, err := parseFlags([]string{"--nats-tls-cert", "c.pem", "--nats-tls-key", "k.pem", "--nats-http-port", "-1"}, io.Discard)
	if err != nil {
		t.Fatalf("embedded TLS flags rejected: %v", err)
	}
	if !o.legacyV1() {
		t.Error("--bus-v1=auto without auth should keep v1 on")
	}
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(authFile, []byte("secret: "+strings.Repeat("s", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err = parseFlags([]string{"--nats-auth-file", authFile, "--cluster", "c1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.legacyV1() {
		t.Error("--bus-v1=auto with auth should turn v1 off")
	}
	cc := bus.ConnConfig{}
	eo := natsembed.Options{}
	if err := applyNATSSecurity(o, "tcp://r:9092", &cc, &eo); err != nil {
		t.Fatal(err)
	}
	if cc.User != "tcp://r:9092" || cc.Password != bus.ReplicaPassword(strings.Repeat("s", 40), "tcp://r:9092") {
		t.Errorf("client credentials %q/%q", cc.User, cc.Password)
	}
	if eo.Auth == nil || eo.AuthCluster != "c1" {
		t.Errorf("embedded auth %+v", eo)
	}
}
