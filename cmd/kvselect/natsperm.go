package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natsembed"
)

// The nats-permissions subcommand prints the NATS permissions one replica needs on an external
// NATS server, as a nats-server configuration `users` entry or as nsc flags (decentralised JWT
// accounts), so that operators never compute subject tokens by hand. The permissions are
// natsembed.ReplicaPermissions, the same the embedded server enforces.
func init() { subcommands["nats-permissions"] = natsPermissionsCmd }

func natsPermissionsCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nats-permissions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cluster := fs.String("cluster", "default", "kvselect cluster (--cluster of the replicas)")
	id := fs.String("replica-id", "", "the replica's --replica-id")
	nkey := fs.String("nkey", "", "the replica's public user nkey (conf format: nkey user instead of user/password)")
	format := fs.String("format", "conf", "conf (nats-server users entry), nsc (flags for nsc add user) or password")
	authFile := fs.String("auth-file", "", "with --format password: the --nats-auth-file whose secret derives the replica's password")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *id == "" {
		fmt.Fprintln(stderr, "nats-permissions: --replica-id is required")
		return 2
	}
	perms, err := natsembed.ReplicaPermissions(*cluster, *id)
	if err != nil {
		fmt.Fprintln(stderr, "nats-permissions:", err)
		return 2
	}
	pub, sub := perms.Publish.Allow, perms.Subscribe.Allow
	switch *format {
	case "conf":
		who := "user: " + strconv.Quote(*id) + ", password: \"<replica password>\""
		if *nkey != "" {
			who = "nkey: " + *nkey
		}
		fmt.Fprintf(stdout, "# kvselect replica %s, cluster %s\n{\n  %s\n  permissions: {\n", *id, *cluster, who)
		fmt.Fprintf(stdout, "    publish: { allow: [%s] }\n", quoteAll(pub))
		fmt.Fprintf(stdout, "    subscribe: { allow: [%s] }\n", quoteAll(sub))
		fmt.Fprintf(stdout, "    allow_responses: { max: %d, expires: %q }\n  }\n}\n", perms.Response.MaxMsgs, perms.Response.Expires.String())
	case "password":
		// For tools that must join an authenticated embedded bus under some replica id (e.g.
		// `nats sub --user ID --password ...` to watch it).
		af, err := bus.LoadAuthFile(*authFile)
		if err != nil || af.Secret == "" {
			fmt.Fprintln(stderr, "nats-permissions: --format password needs --auth-file with a secret:", err)
			return 2
		}
		fmt.Fprintln(stdout, bus.ReplicaPassword(af.Secret, *id))
	case "nsc":
		fmt.Fprintf(stdout, "--allow-pub %s --allow-sub %s --allow-pub-response=%d --response-ttl %s\n",
			strings.Join(pub, ","), strings.Join(sub, ","), perms.Response.MaxMsgs, perms.Response.Expires)
	default:
		fmt.Fprintf(stderr, "nats-permissions: --format must be conf, nsc or password, got %q\n", *format)
		return 2
	}
	return 0
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
