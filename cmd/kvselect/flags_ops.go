package main

import (
	"flag"
	"fmt"

	"github.com/kvselect/kvselect/http/api"
)

// opsOptions are the operator flags: the workers-file catalog source, access control and TLS.
type opsOptions struct {
	workersFile   string
	authTokenFile string
	authScope     string
	tlsCert       string
	tlsKey        string
}

func (o *opsOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.workersFile, "workers-file", "", "YAML or JSON list of worker records (POST /workers fields), watched for changes; the file owns the ids it lists")
	fs.StringVar(&o.authTokenFile, "auth-token-file", "", "bearer tokens accepted by the Dynamo API, one per line (reloaded on change); empty: no authentication")
	fs.StringVar(&o.authScope, "auth-scope", "all", "with --auth-token-file: all (every route but /health and /ready) or writes (every method but GET and HEAD)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM; needs --tls-key)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "private key of --tls-cert (PEM)")
}

func (o *opsOptions) validate() error {
	if _, err := api.ParseAuthScope(o.authScope); err != nil {
		return err
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key must be given together")
	}
	return nil
}
