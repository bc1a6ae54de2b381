package bus

import (
	"errors"
	"strings"
	"testing"
)

func TestSenderTokenEncoding(t *testing.T) {
	for id, want := range map[string]string{
		"tcp://selector-a:9092": "tcp_3A_2F_2Fselector-a_3A9092",
		"a":                     "a",
		"a_b":                   "a_5Fb",
		"a.b*c>d e$":            "a_2Eb_2Ac_3Ed_20e_24",
		"ü":                     "_C3_BC",
	} {
		if got := EncodeSenderToken(id); got != want {
			t.Errorf("EncodeSenderToken(%q) = %q, want %q", id, got, want)
		}
		if back, err := DecodeSenderToken(want); err != nil || back != id {
			t.Errorf("DecodeSenderToken(%q) = %q, %v", want, back, err)
		}
	}
	for _, bad := range []string{"", "a.b", "a*", "_2", "_2e", "_41", "_ZZ", "a b", strings.Repeat("a", 3*maxReplicaIDLen+1), strings.Repeat("a", maxReplicaIDLen+1)} {
		if _, err := DecodeSenderToken(bad); !errors.Is(err, ErrInvalidSenderToken) {
			t.Errorf("DecodeSenderToken(%q) err %v, want ErrInvalidSenderToken", bad, err)
		}
	}
	s, _ := NewSubjects("c1")
	if got := s.LifecycleFrom("tcp://a:1"); got != "kvselect.v2.c1.lifecycle.tcp_3A_2F_2Fa_3A1" {
		t.Errorf("LifecycleFrom = %q", got)
	}
	if tok, ok := s.SenderFromSubject(s.MembersFrom("x"), kindMembers); !ok || tok != "x" {
		t.Errorf("SenderFromSubject = %q %v", tok, ok)
	}
	for _, bad := range []string{s.LifecycleFrom("x"), "kvselect.v2.c2.members.x", "kvselect.v2.c1.members.", "kvselect.v2.c1.members.x.y", s.Members()} {
		if _, ok := s.SenderFromSubject(bad, kindMembers); ok {
			t.Errorf("SenderFromSubject(%q) accepted as a members subject", bad)
		}
	}
}

// FuzzSenderToken: every encoding is a single safe subject token that decodes back, and every
// token that decodes is the canonical encoding of what it decodes to.
func FuzzSenderToken(f *testing.F) {
	for _, s := range []string{"tcp://a:9092", "a_5Fb", "_C3_BC", "x", "_2e", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateReplicaID(s) == nil {
			tok := EncodeSenderToken(s)
			if strings.ContainsAny(tok, ".*> \t\r\n$") {
				t.Fatalf("token %q of %q is not a safe subject token", tok, s)
			}
			back, err := DecodeSenderToken(tok)
			if err != nil || back != s {
				t.Fatalf("round trip of %q: %q, %v", s, back, err)
			}
		}
		if id, err := DecodeSenderToken(s); err == nil && EncodeSenderToken(id) != s {
			t.Fatalf("%q decodes to %q, which encodes to %q", s, id, EncodeSenderToken(id))
		}
	})
}

func TestMatchSubject(t *testing.T) {
	for _, tc := range []struct {
		pat, subj string
		want      bool
	}{
		{"a.b", "a.b", true}, {"a.*", "a.b", true}, {"a.*", "a.b.c", false}, {"a.>", "a.b.c", true},
		{"a.>", "a", false}, {"*.b", "a.b", true}, {"a.*.c", "a.b.c", true}, {"a.*.c", "a.b.d", false},
		{"a.b", "a.b.c", false}, {"a.b.c", "a.b", false},
	} {
		if got := MatchSubject(tc.pat, tc.subj); got != tc.want {
			t.Errorf("MatchSubject(%q, %q) = %v", tc.pat, tc.subj, got)
		}
	}
}
