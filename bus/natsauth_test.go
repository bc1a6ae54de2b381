package bus

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

// Auth-file parsing; the server side (bus/natsembed) is tested there against real servers.

const testSecret = "0123456789abcdef0123456789abcdef-test"

func TestParseAuthFileRejects(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	for name, doc := range map[string]string{
		"empty":         "{}",
		"short secret":  "secret: short",
		"unknown field": "secret: " + testSecret + "\nsecrt: x",
		"bad nkey":      "replicas:\n  - id: a\n    nkey: SUAXXXX",
		"seed as nkey":  "replicas:\n  - id: a\n    nkey: " + strings.Replace(pub, "U", "S", 1),
		"duplicate id":  "replicas:\n  - id: a\n    nkey: " + pub + "\n  - id: a\n    nkey: " + pub,
		"empty id":      "replicas:\n  - id: ''\n    nkey: " + pub,
	} {
		if _, err := ParseAuthFile([]byte(doc)); !errors.Is(err, ErrAuthFile) {
			t.Errorf("%s: err %v, want ErrAuthFile", name, err)
		}
	}
}

// FuzzParseAuthFile: the auth-file parser never panics, and what it accepts is valid.
func FuzzParseAuthFile(f *testing.F) {
	f.Add([]byte("secret: " + testSecret))
	f.Add([]byte(`{"replicas":[{"id":"a","nkey":"UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"}]}`))
	f.Add([]byte("replicas: [1, 2]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAuthFile(b)
		if err != nil {
			return
		}
		if a.Secret == "" && len(a.Replicas) == 0 {
			t.Fatal("accepted a file that admits nobody")
		}
		for _, r := range a.Replicas {
			if ValidateReplicaID(r.ID) != nil || !nkeys.IsValidPublicUserKey(r.Nkey) {
				t.Fatalf("accepted replica %+v", r)
			}
		}
	})
}
