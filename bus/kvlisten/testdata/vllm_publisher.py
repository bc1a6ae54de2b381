#!/usr/bin/env python3
"""Test engine that behaves like vLLM's ZmqEventPublisher (kv_events.py).

Needs only Debian's python3-zmq (libzmq) and python3-msgpack. Payload bytes
match what vLLM's msgspec encoder emits for the same batch (see
shared/reference/kv-events-wire-format.md sections 1.5, 1.6, 1.11 and 6).

What it emulates
  * A PUB socket (set_hwm like vLLM) that always BINDS --pub, sending
    3-frame messages [topic, seq as 8-byte big-endian, payload]; seq counts
    from 0 per incarnation, +1 per batch.
  * Optionally a ROUTER bound to --replay with a replay buffer of the last
    --buffer-steps batches. A request [identity, b"", start(8B BE)] is
    answered, on the publishing thread (head-of-line blocking like vLLM),
    with every buffered batch whose seq >= start and then an end marker:
      --replay-shape vllm   : [id, b"", topic, seq8, payload] ... [id, b"", b"", -1 (8B), b""]
      --replay-shape sglang : [id, b"", seq8, payload]        ... [id, b"", -1 (8B), b""]
    Requests of any other shape are ignored (vLLM logs and drops them).

Command line
  vllm_publisher.py --pub tcp://127.0.0.1:0 [--replay tcp://127.0.0.1:0]
                    [--topic kv-events] [--buffer-steps 10000] [--hwm 100000]
                    [--replay-shape vllm|sglang]
  Port 0 (or *) picks a free port. On success one line is printed:
      READY <pub endpoint> <replay endpoint or ->

Command protocol: one command per line on stdin, exactly one reply line on
stdout, "OK ..." or "ERR <reason>". End of stdin terminates the process.
  tick N [PREFIX]   publish N batches; payload of batch s is ASCII PREFIX+str(s)
                    (default PREFIX "p").                         -> OK <last seq>
  drop N [PREFIX]   like tick but the batches are only put in the replay buffer,
                    never sent: a PUB high-water-mark drop.        -> OK <last seq>
  lose N            consume N sequence numbers, neither sent nor buffered:
                    a failed send.                                 -> OK <last seq>
  raw HEX           publish one batch whose payload is the bytes HEX.  -> OK <seq>
  batch JSON        build a real vLLM KVEventBatch (below), publish it.
                                                                   -> OK <seq> <payload hex>
  encode JSON       build the batch only (no publish, no seq).     -> OK <payload hex>
  restart           emulate a process restart at the same addresses: close
                    both sockets (linger 0), forget the buffer, reset seq to 0,
                    bind again.                                    -> OK
  replay on|off     answer or silently ignore replay requests.     -> OK
  stats             -> OK next_seq=<n> replays=<requests served> buffered=<n>
  quit              -> OK, then exit.

Batch JSON (keys optional unless stated):
  {"ts": 1700000000.5,          float timestamp (default time.time())
   "dp_rank": 0,                int or null (default 0)
   "legacy_batch": false,       true: 2-element batch [ts, events] (vLLM 0.9)
   "format": "map",             "map" (vLLM >= PR #42892) or "array" (older
                                vLLM, SGLang: tagged positional arrays)
   "stored_len": 12,            array form: BlockStored length incl. tag,
                                one of 6,7,8,9,10,12 (see section 1.6)
   "removed_len": 4,            array form: BlockRemoved length, 2, 3 or 4
   "events": [                  required
     {"type": "BlockStored", "block_hashes": [h...], "parent_block_hash": h|null,
      "token_ids": [int...], "block_size": 16, "lora_id": null, "medium": "GPU",
      "lora_name": null, "extra_keys": null, "group_idx": null,
      "kv_cache_spec_kind": null, "kv_cache_spec_sliding_window": null},
     {"type": "BlockRemoved", "block_hashes": [h...], "medium": "GPU", "group_idx": null},
     {"type": "AllBlocksCleared"}]}
  A hash h is an int (0 <= h < 2**64 like vLLM, negative like SGLang) or a
  string "hex:<digest>" for a byte hash (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0).
  Map form writes "type" first, the required fields in declaration order even
  when null, and the optional ones (extra_keys, group_idx, kv_cache_spec_kind,
  kv_cache_spec_sliding_window; group_idx for BlockRemoved) only when not null,
  as msgspec does with omit_defaults.
"""

import argparse
import collections
import json
import os
import sys
import time

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)

STORED_FIELDS = [
    "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
    "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind",
    "kv_cache_spec_sliding_window",
]
STORED_REQUIRED = 7  # block_hashes .. lora_name are always written in map form
STORED_LENS = {6: 5, 7: 6, 8: 7, 9: 8, 10: 9, 12: 11}  # array length -> fields
REMOVED_FIELDS = ["block_hashes", "medium", "group_idx"]


def conv_hash(h):
    if isinstance(h, str) and h.startswith("hex:"):
        return bytes.fromhex(h[4:])
    if h is None or isinstance(h, int):
        return h
    raise ValueError("bad hash %r" % (h,))


def conv_value(name, v):
    if name == "block_hashes":
        return [conv_hash(h) for h in v]
    if name == "parent_block_hash":
        return conv_hash(v)
    if name == "extra_keys" and v is not None:
        return [tuple(k) if isinstance(k, list) else k for k in v]
    return v


def build_event(ev, fmt, stored_len, removed_len):
    tag = ev["type"]
    if tag == "BlockStored":
        fields, required = STORED_FIELDS, STORED_REQUIRED
        if fmt == "array":
            fields = fields[: STORED_LENS[stored_len]]
    elif tag == "BlockRemoved":
        fields, required = REMOVED_FIELDS, 2
        if fmt == "array":
            fields = fields[: removed_len - 1]
    elif tag == "AllBlocksCleared":
        fields, required = [], 0
    else:
        raise ValueError("unknown event type %r" % (tag,))
    defaults = {"medium": "GPU"} if tag != "AllBlocksCleared" else {}
    values = [conv_value(f, ev.get(f, defaults.get(f))) for f in fields]
    if fmt == "array":
        return [tag] + values
    out = {"type": tag}  # msgspec writes the tag first
    for i, (f, v) in enumerate(zip(fields, values)):
        if i < required or v is not None:
            out[f] = v
    return out


def build_batch(spec):
    fmt = spec.get("format", "map")
    if fmt not in ("map", "array"):
        raise ValueError("format must be map or array")
    stored_len = int(spec.get("stored_len", 12))
    removed_len = int(spec.get("removed_len", 4))
    if stored_len not in STORED_LENS or removed_len not in (2, 3, 4):
        raise ValueError("bad stored_len/removed_len")
    events = [build_event(e, fmt, stored_len, removed_len) for e in spec["events"]]
    ts = float(spec.get("ts", time.time()))  # always float64 on the wire
    batch = [ts, events]
    if not spec.get("legacy_batch", False):
        batch.append(spec.get("dp_rank", 0))
    return msgpack.packb(batch, use_bin_type=True)


class Publisher:
    def __init__(self, args):
        self.args = args
        self.topic = args.topic.encode()
        self.ctx = zmq.Context.instance()
        self.pub_ep = args.pub
        self.replay_ep = args.replay
        self.replay_on = True
        self.replays = 0
        self.open()

    @staticmethod
    def bind(sock, ep):
        # libzmq closes a socket asynchronously in its I/O thread, so right
        # after "restart" the old listener may still hold the port briefly.
        deadline = time.monotonic() + 5.0
        while True:
            try:
                sock.bind(ep)
                return sock.getsockopt(zmq.LAST_ENDPOINT).decode()
            except zmq.ZMQError as e:
                if e.errno != zmq.EADDRINUSE or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def open(self):
        self.seq = 0
        self.buffer = collections.deque(maxlen=self.args.buffer_steps)
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.set_hwm(self.args.hwm)
        self.pub_ep = self.bind(self.pub, self.pub_ep)
        self.router = None
        if self.replay_ep:
            self.router = self.ctx.socket(zmq.ROUTER)
            self.replay_ep = self.bind(self.router, self.replay_ep)

    def close(self):
        self.pub.close(linger=0)
        if self.router is not None:
            self.router.close(linger=0)

    def next(self, payload, send=True, buffer=True):
        seq = self.seq
        self.seq += 1
        if send:
            self.pub.send_multipart([self.topic, seq.to_bytes(8, "big"), payload])
        if buffer:
            self.buffer.append((seq, payload))
        return seq

    def serve_replay(self):
        frames = self.router.recv_multipart()
        if len(frames) != 3 or frames[1] != b"" or len(frames[2]) != 8:
            return  # vLLM logs and ignores malformed requests
        if not self.replay_on:
            return
        self.replays += 1
        ident, start = frames[0], int.from_bytes(frames[2], "big")
        sglang = self.args.replay_shape == "sglang"
        for seq, payload in self.buffer:
            if seq >= start:
                head = [ident, b""] if sglang else [ident, b"", self.topic]
                self.router.send_multipart(head + [seq.to_bytes(8, "big"), payload])
        end = [ident, b"", END_SEQ, b""] if sglang else [ident, b"", b"", END_SEQ, b""]
        self.router.send_multipart(end)

    def command(self, line):
        parts = line.split(None, 1)
        if not parts:
            return "ERR empty command"
        cmd, rest = parts[0], (parts[1] if len(parts) > 1 else "")
        words = rest.split()
        if cmd in ("tick", "drop"):
            n = int(words[0]) if words else 1
            prefix = words[1] if len(words) > 1 else "p"
            last = -1
            for _ in range(n):
                last = self.next(("%s%d" % (prefix, self.seq)).encode(), send=(cmd == "tick"))
            return "OK %d" % last
        if cmd == "lose":
            n = int(words[0]) if words else 1
            last = -1
            for _ in range(n):
                last = self.next(b"", send=False, buffer=False)
            return "OK %d" % last
        if cmd == "raw":
            return "OK %d" % self.next(bytes.fromhex(rest.strip()))
        if cmd == "batch":
            payload = build_batch(json.loads(rest))
            return "OK %d %s" % (self.next(payload), payload.hex())
        if cmd == "encode":
            return "OK %s" % build_batch(json.loads(rest)).hex()
        if cmd == "restart":
            self.close()
            self.open()
            return "OK"
        if cmd == "replay":
            self.replay_on = rest.strip() != "off"
            return "OK"
        if cmd == "stats":
            return "OK next_seq=%d replays=%d buffered=%d" % (self.seq, self.replays, len(self.buffer))
        if cmd == "quit":
            return "OK"
        return "ERR unknown command %r" % (cmd,)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pub", required=True)
    ap.add_argument("--replay", default="")
    ap.add_argument("--topic", default="kv-events")
    ap.add_argument("--buffer-steps", type=int, default=10000)
    ap.add_argument("--hwm", type=int, default=100000)
    ap.add_argument("--replay-shape", choices=("vllm", "sglang"), default="vllm")
    args = ap.parse_args()

    p = Publisher(args)
    out = sys.stdout
    out.write("READY %s %s\n" % (p.pub_ep, p.replay_ep or "-"))
    out.flush()

    stdin_fd = sys.stdin.fileno()
    pending = b""
    while True:
        poller = zmq.Poller()  # rebuilt: "restart" replaces the router
        poller.register(stdin_fd, zmq.POLLIN)
        if p.router is not None:
            poller.register(p.router, zmq.POLLIN)
        for sock, _ in poller.poll():
            if sock is p.router:
                p.serve_replay()
                continue
            chunk = os.read(stdin_fd, 65536)
            if not chunk:
                p.close()
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                line = line.decode().strip()
                if not line:
                    continue
                try:
                    reply = p.command(line)
                except Exception as e:  # report, keep serving
                    reply = "ERR %s: %s" % (type(e).__name__, e)
                out.write(reply + "\n")
                out.flush()
                if line == "quit":
                    p.close()
                    return


if __name__ == "__main__":
    main()
