package aibrixcheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

// ErrUsage wraps command-line and token-file errors.
var ErrUsage = errors.New("aibrix-check usage")

// Exit codes of [Main].
const (
	ExitPass  = 0 // every required rule passed
	ExitFail  = 1 // at least one required rule failed
	ExitUsage = 2 // bad flags or unreadable token file
)

// Main implements
//
//	kvselect aibrix-check --url URL [--token-file F] [--timeout D] [--json]
//
// args excludes the program and subcommand names. The report goes to
// stdout, diagnostics to stderr; the token is never printed.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aibrix-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("url", "", "complete decision URL, e.g. http://127.0.0.1:8092/v1alpha1/select (required)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (first non-comment line)")
	timeout := fs.Duration("timeout", DefaultTimeout, "deadline for one exchange, body included")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if err := checkFlags(*target, *timeout, fs.NArg()); err != nil {
		fmt.Fprintln(stderr, err)
		fs.Usage()
		return ExitUsage
	}
	var token string
	if *tokenFile != "" {
		t, err := readToken(*tokenFile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return ExitUsage
		}
		token = t
	}
	rep := Run(context.Background(), Options{URL: *target, Token: token, Timeout: *timeout})
	var err error
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "aibrix-check: writing report:", err)
		return ExitUsage
	}
	if !rep.Passed {
		return ExitFail
	}
	return ExitPass
}

// checkFlags applies the Gateway's own endpoint rules to --url (absolute
// http/https, a host, no userinfo, no fragment) so that a URL the Gateway
// would refuse at startup is not reported as conformant.
func checkFlags(target string, timeout time.Duration, extra int) error {
	if extra > 0 {
		return fmt.Errorf("%w: unexpected arguments", ErrUsage)
	}
	if target == "" {
		return fmt.Errorf("%w: --url is required", ErrUsage)
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%w: --url must be an absolute http(s) URL without userinfo or fragment", ErrUsage)
	}
	if timeout <= 0 {
		return fmt.Errorf("%w: --timeout must be positive", ErrUsage)
	}
	return nil
}

// readToken returns the first non-blank, non-comment line of path, trimmed.
// The token is only ever sent in the Authorization header; it is never
// written to stdout or stderr, including in error messages.
// A Gateway token file (one token, no comments) reads the same way.
func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: token file: %w", ErrUsage, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	for sc.Scan() {
		s := strings.TrimSpace(sc.Text())
		if s != "" && !strings.HasPrefix(s, "#") {
			return s, nil
		}
	}
	return "", fmt.Errorf("%w: token file %s holds no token", ErrUsage, path)
}
