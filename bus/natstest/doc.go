// Package natstest starts real nats-server instances inside tests and
// polls for asynchronous conditions, following nats-server's own test
// recipe: servers on 127.0.0.1 with random ports, signals off, shut down by
// t.Cleanup; conditions are polled against a deadline, never slept on.
//
// Logging from the servers is off unless NATSTEST_LOG is set to a non-empty
// value, in which case it goes to the test log.
//
// It imports nats-server, so only test binaries that really need a server
// should import it (linking the server costs tens of seconds of CPU).
package natstest
