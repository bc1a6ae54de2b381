package bus

import "testing"

// TestMsgKinds checks the registration table: every registered type's constructor builds a
// message of that type, and the wire names stay what logs and metrics have always shown.
func TestMsgKinds(t *testing.T) {
	want := map[MsgType]string{TypeLifecycle: "lifecycle", TypeAffinity: "affinity", TypeHeartbeat: "heartbeat",
		TypeLiveSet: "live_set", TypeResyncRequest: "resync_request", 0: "type(0)", 9: "type(9)"}
	for ty, name := range want {
		if got := ty.String(); got != name {
			t.Errorf("%d.String() = %q, want %q", ty, got, name)
		}
		if k := ty.kind(); (k != nil) != (name[:4] != "type") || (k != nil && k.new().Type() != ty) {
			t.Errorf("type %d: registration %+v", ty, k)
		}
	}
}

func TestLifecycleKindNames(t *testing.T) {
	for k, want := range map[LifecycleKind]string{LifecycleAdd: "add", LifecyclePrefillComplete: "prefill_complete",
		LifecycleFree: "free", 0: "kind(0)", 4: "kind(4)", 200: "kind(200)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint8(k), got, want)
		}
	}
}
