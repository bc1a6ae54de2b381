package deploy

import (
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// Property tests: the parsers against naive references on random inputs.

// TestQuantityMatchesReference: n<suffix> parses to n × multiplier computed with integers.
func TestQuantityMatchesReference(t *testing.T) {
	mult := map[string]*big.Int{"": big.NewInt(1)}
	for i, s := range []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"} {
		mult[s] = new(big.Int).Lsh(big.NewInt(1), uint(10*(i+1)))
	}
	for i, s := range []string{"k", "M", "G", "T", "P", "E"} {
		mult[s] = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(3*(i+1))), nil)
	}
	suffixes := []string{"", "m", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		n := rng.Int64N(1 << 40)
		s := suffixes[rng.IntN(len(suffixes))]
		got, err := parseQuantity(strconv.FormatInt(n, 10) + s)
		if err != nil {
			t.Fatalf("%d%s: %v", n, s, err)
		}
		want := new(big.Rat)
		if s == "m" {
			want.SetFrac(big.NewInt(n), big.NewInt(1000))
		} else {
			want.SetInt(new(big.Int).Mul(big.NewInt(n), mult[s]))
		}
		if got.Cmp(want) != 0 {
			t.Fatalf("%d%s = %v, want %v", n, s, got, want)
		}
	}
}

// expandReference is a character-by-character reading of Kubernetes' expansion rules, written
// independently of the regular expression in expand.
func expandReference(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i += 2
			continue
		}
		if s[i+1] == '(' {
			end := strings.IndexByte(s[i+2:], ')')
			if end >= 0 {
				name := s[i+2 : i+2+end]
				if validVarName(name) {
					if v, ok := vars[name]; ok {
						b.WriteString(v)
					} else {
						b.WriteString(s[i : i+3+end])
					}
					i += 3 + end
					continue
				}
			}
		}
		b.WriteByte('$')
		i++
	}
	return b.String()
}

func validVarName(n string) bool {
	if n == "" || (n[0] >= '0' && n[0] <= '9') {
		return false
	}
	for _, c := range n {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// TestExpandMatchesReference compares expand with the reference on random strings over an
// alphabet dense in the syntax's special characters.
func TestExpandMatchesReference(t *testing.T) {
	vars := map[string]string{"A": "x", "B_1": "$(A)", "C": ""}
	alphabet := []string{"$", "(", ")", "A", "B_1", "C", "D", "1", "-", "$$", "$(A)", "$(D)"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		in := b.String()
		got, _ := expand(in, vars)
		if want := expandReference(in, vars); got != want {
			t.Fatalf("expand(%q) = %q, reference %q", in, got, want)
		}
	}
}
