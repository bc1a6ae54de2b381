package deploy

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// Kubernetes resource quantities ("2", "500m", "1Gi", "1.5G", "1e3") and Go's GOMEMLIMIT values
// ("900MiB"), parsed exactly into rationals so that comparisons do not round.

var quantitySuffixes = []struct {
	suffix string
	mult   *big.Rat
}{
	// Binary suffixes first: "Mi" must not be read as "M" followed by garbage.
	{"Ki", pow(2, 10)}, {"Mi", pow(2, 20)}, {"Gi", pow(2, 30)}, {"Ti", pow(2, 40)}, {"Pi", pow(2, 50)}, {"Ei", pow(2, 60)},
	{"m", big.NewRat(1, 1000)}, {"k", pow(10, 3)}, {"M", pow(10, 6)}, {"G", pow(10, 9)}, {"T", pow(10, 12)},
	{"P", pow(10, 15)}, {"E", pow(10, 18)},
}

func pow(base, exp int64) *big.Rat {
	return new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(base), big.NewInt(exp), nil))
}

// quantityNumber is the numeric part Kubernetes accepts: optional sign, digits with an optional
// fraction, optional decimal exponent.
var quantityNumber = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// parseQuantity parses a Kubernetes resource quantity. Negative quantities are rejected (no
// resource may be negative); so are exponents beyond ±30, which no manifest needs and which would
// let hostile input allocate huge rationals.
func parseQuantity(s string) (*big.Rat, error) {
	num, mult := s, big.NewRat(1, 1)
	for _, q := range quantitySuffixes {
		if strings.HasSuffix(s, q.suffix) && quantityNumber.MatchString(strings.TrimSuffix(s, q.suffix)) {
			num, mult = strings.TrimSuffix(s, q.suffix), q.mult
			break
		}
	}
	if !quantityNumber.MatchString(num) {
		return nil, fmt.Errorf("%w: quantity %q", ErrResources, s)
	}
	if i := strings.IndexAny(num, "eE"); i >= 0 {
		var e int
		if _, err := fmt.Sscan(strings.TrimPrefix(num[i+1:], "+"), &e); err != nil || e > 30 || e < -30 {
			return nil, fmt.Errorf("%w: quantity %q: exponent out of range", ErrResources, s)
		}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok || r.Sign() < 0 {
		return nil, fmt.Errorf("%w: quantity %q", ErrResources, s)
	}
	return r.Mul(r, mult), nil
}

// goMemLimit matches the runtime's GOMEMLIMIT syntax: an integer with an optional B/KiB/MiB/GiB/TiB
// suffix (the value "off" is handled by the caller).
var goMemLimit = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`)

// parseGoMemLimit returns the byte count of a GOMEMLIMIT value.
func parseGoMemLimit(s string) (*big.Rat, error) {
	m := goMemLimit.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("%w: GOMEMLIMIT %q", ErrResources, s)
	}
	r, _ := new(big.Rat).SetString(m[1])
	shift := map[string]int64{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	return r.Mul(r, pow(2, shift)), nil
}
