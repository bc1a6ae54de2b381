package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natstest"
)

// TestNATSPermissionsConfWorks: the printed users entry, pasted into a real nats-server
// configuration, lets the replica publish on its own subjects and refuses another's.
func TestNATSPermissionsConfWorks(t *testing.T) {
	var out bytes.Buffer
	if rc := natsPermissionsCmd([]string{"--cluster", "prod", "--replica-id", "tcp://a:9092"}, &out, io.Discard); rc != 0 {
		t.Fatalf("rc %d", rc)
	}
	entry := strings.Replace(out.String(), "<replica password>", "pw-a", 1)
	conf := "host: 127.0.0.1\nport: -1\nauthorization {\n  users: [\n" + entry + "\n  ]\n}\n"
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server rejects the printed entry: %v\n%s", err, conf)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv := natstest.RunServerWithOptions(t, opts)

	violations := make(chan error, 16)
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("tcp://a:9092", "pw-a"), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subj, _ := bus.NewSubjects("prod")
	got, err := nc.SubscribeSync(subj.LifecycleAll())
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subj.LifecycleFrom("tcp://a:9092"), []byte("own")); err != nil {
		t.Fatal(err)
	}
	if m, err := got.NextMsg(5 * time.Second); err != nil || string(m.Data) != "own" {
		t.Fatalf("own subject: %v %v", m, err)
	}
	if err := nc.Publish(subj.LifecycleFrom("tcp://b:9092"), []byte("forged")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("async error %v, want a permission violation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("publishing on another replica's subject was not refused")
	}

	out.Reset()
	if rc := natsPermissionsCmd([]string{"--cluster", "prod", "--replica-id", "tcp://a:9092", "--format", "nsc"}, &out, io.Discard); rc != 0 {
		t.Fatalf("nsc rc %d", rc)
	}
	if !strings.Contains(out.String(), "--allow-pub kvselect.v2.prod.*.tcp_3A_2F_2Fa_3A9092,") {
		t.Fatalf("nsc flags: %s", out.String())
	}
}

func TestNATSPermissionsPassword(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.yaml")
	secret := strings.Repeat("k", 40)
	if err := os.WriteFile(path, []byte("secret: "+secret), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if rc := natsPermissionsCmd([]string{"--replica-id", "tcp://watch:1", "--format", "password", "--auth-file", path}, &out, io.Discard); rc != 0 {
		t.Fatalf("rc %d", rc)
	}
	if got := strings.TrimSpace(out.String()); got != bus.ReplicaPassword(secret, "tcp://watch:1") {
		t.Fatalf("password %q", got)
	}
	if rc := natsPermissionsCmd([]string{"--replica-id", "x", "--format", "password"}, &out, io.Discard); rc == 0 {
		t.Fatal("password without an auth file accepted")
	}
}
