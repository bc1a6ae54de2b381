package bus

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// aliasHeartbeat is the golden heartbeat with aliases (testdata/golden/heartbeat_aliases.hex).
func aliasHeartbeat() *Heartbeat {
	return &Heartbeat{Sender: "tcp://selector-a:9092", BootID: 7, HTTPAddr: "10.0.0.7:8092", StartedAt: 42,
		Aliases: []string{"tcp://10.0.0.7:9092", "tcp://selector-a.kv.svc:9092"}}
}

// TestHeartbeatAliasesWire pins the additive "a" key: a heartbeat with aliases has its own
// golden bytes, one without them keeps the released layout (heartbeat.hex, TestGoldenBytes),
// and a reader that predates the key — modelled by decoding with the key renamed, which every
// reader skips — still reads the rest.
func TestHeartbeatAliasesWire(t *testing.T) {
	got, err := Marshal(aliasHeartbeat())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden", "heartbeat_aliases.hex")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want := readGolden(t, "heartbeat_aliases"); !bytes.Equal(got, want) {
		t.Fatalf("wire layout changed:\n got %x\nwant %x", got, want)
	}
	back, err := DecodeEnvelope(got)
	if err != nil || !reflect.DeepEqual(back, aliasHeartbeat()) {
		t.Fatalf("decode = %+v, %v", back, err)
	}
	// The aliases key is the first map key ("a" sorts first); rename it to one no reader knows.
	i := bytes.Index(got, []byte{0xa1, 'a', 0x92})
	if i < 0 {
		t.Fatalf("aliases key not found in %x", got)
	}
	old := bytes.Clone(got)
	old[i+1] = 'z'
	back, err = DecodeEnvelope(old)
	want := aliasHeartbeat()
	want.Aliases = nil
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("reader without the key: %+v, %v", back, err)
	}
}

// TestHeartbeatAliasesRejected: a hostile alias list is a clear decode error.
func TestHeartbeatAliasesRejected(t *testing.T) {
	enc := func(aliases any) []byte {
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		e.UseCompactInts(true)
		if err := e.Encode([]any{1, 3, "n", 1, map[string]any{"a": aliases, "t": 5}}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	many := make([]string, MaxAliases+1)
	for i := range many {
		many[i] = fmt.Sprintf("tcp://10.0.0.%d:1", i)
	}
	for name, b := range map[string][]byte{
		"too many":   enc(many),
		"empty id":   enc([]string{""}),
		"not a list": enc("tcp://x:1"),
		"not string": enc([]int{1}),
		"too long":   enc([]string{strings.Repeat("x", maxReplicaIDLen+1)}),
	} {
		if _, err := DecodeEnvelope(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	if hb, err := DecodeEnvelope(enc(many[:MaxAliases])); err != nil || len(hb.(*Heartbeat).Aliases) != MaxAliases {
		t.Fatalf("MaxAliases aliases: %v", err)
	}
}

func TestNormalizeAliases(t *testing.T) {
	cfg := Config{ReplicaID: "tcp://a:1", Aliases: []string{"tcp://10.0.0.1:1", "tcp://a:1", "tcp://10.0.0.1:1", "a"}}
	if err := normalizeAliases(&cfg); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "tcp://10.0.0.1:1"}; !reflect.DeepEqual(cfg.Aliases, want) {
		t.Fatalf("aliases %v, want %v", cfg.Aliases, want)
	}
	if err := normalizeAliases(&Config{ReplicaID: "a", Aliases: []string{""}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("empty alias: %v", err)
	}
	tooMany := Config{ReplicaID: "a"}
	for i := range MaxAliases + 1 {
		tooMany.Aliases = append(tooMany.Aliases, fmt.Sprint(i))
	}
	if err := normalizeAliases(&tooMany); !errors.Is(err, ErrConfig) {
		t.Fatalf("too many aliases: %v", err)
	}
}

// TestMembersForgetAliases: aliases live as long as the member: a leave or an expiry forgets
// them, a later heartbeat replaces them, and the stored list does not alias the decoder's.
func TestMembersForgetAliases(t *testing.T) {
	m := NewMembers(time.Second, 3)
	hb := &Heartbeat{Sender: "a", BootID: 1, Aliases: []string{"x", "y"}}
	m.Observe(hb, at(0))
	hb.Aliases[0] = "mutated"
	if got := m.MemberAliases("a"); !reflect.DeepEqual(got, []string{"x", "y"}) {
		t.Fatalf("aliases %v", got)
	}
	m.Observe(&Heartbeat{Sender: "a", BootID: 1, Aliases: []string{"z"}}, at(time.Second))
	if got := m.MemberAliases("a"); !reflect.DeepEqual(got, []string{"z"}) {
		t.Fatalf("replaced aliases %v", got)
	}
	m.Expire(at(10 * time.Second))
	if got := m.MemberAliases("a"); got != nil {
		t.Fatalf("expired member keeps aliases %v", got)
	}
	m.Observe(&Heartbeat{Sender: "a", BootID: 1, Aliases: []string{"z"}}, at(11*time.Second))
	m.Observe(&Heartbeat{Sender: "a", BootID: 1, Leaving: true}, at(12*time.Second))
	if got := m.MemberAliases("a"); got != nil {
		t.Fatalf("departed member keeps aliases %v", got)
	}
}

// TestReplicatorMatchesPeersByAlias: B configured with A's alias applies A's events once A's
// heartbeat announced it, and nobody can register its own alias.
func TestReplicatorMatchesPeersByAlias(t *testing.T) {
	n := NewMemNetwork()
	var sb sink
	a := newRep(t, n.Connect(), Config{ReplicaID: "tcp://host-a:9092", Aliases: []string{"tcp://10.0.0.1:9092"}})
	b := newRep(t, n.Connect(), sb.hook(Config{ReplicaID: "tcp://host-b:9092", Peers: []string{"tcp://10.0.0.1:9092"}}))
	if a.AddPeer("tcp://10.0.0.1:9092") || !a.IsSelf("tcp://10.0.0.1:9092") || a.IsSelf("tcp://10.0.0.2:9092") {
		t.Fatal("a replica must refuse its own alias as a peer")
	}
	waitFor(t, func() error {
		if !b.IsPeer("tcp://host-a:9092") {
			return errors.New("B has not learned A's alias")
		}
		return nil
	})
	a.PublishLifecycle(freeEvent("r1"))
	waitFor(t, func() error {
		if l := sb.lifecycles(); len(l) != 1 || l[0].RequestID != "r1" {
			return fmt.Errorf("lifecycles %+v", l)
		}
		return nil
	})
}
