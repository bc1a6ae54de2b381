// kvselect status page: reads GET /status every few seconds and renders it. No dependencies, no
// build step. Every value is inserted as text (never as HTML), so catalog contents cannot inject
// markup. With --auth-scope all the API wants a bearer token: the page asks for one on 401 and
// keeps it in sessionStorage for this tab only.
"use strict";

const params = new URLSearchParams(location.search);
const refreshMs = Math.max(500, Number(params.get("refresh") || 3000));

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function num(v) { return el("td", { class: "num" }, Number(v || 0).toLocaleString("en-US")); }

function state(s) { return el("span", { class: "state " + s }, s); }

function ratio(q) {
  if (!q || !q.bookings) return "–";
  if (!q.available_tokens) return "n/a (no cached prefix)";
  return (100 * q.achieved_tokens / q.available_tokens).toFixed(1) + "% of " +
    q.available_tokens.toLocaleString("en-US") + " tokens";
}

function fill(id, rows) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...rows);
}

function render(s) {
  document.getElementById("replica").textContent = s.replica_id ? "replica " + s.replica_id : "";
  fill("partitions", s.partitions.map(p => el("tr", { "data-partition": p.model_name + "/" + p.routing_group },
    el("td", {}, p.model_name), el("td", {}, p.routing_group), num(p.ranks), num(p.bookings), num(p.sessions),
    num(p.index_entries), num(p.index_nodes), num(p.index_bytes),
    el("td", { class: "quality" }, ratio(p.quality)), num(p.quality.not_max_overlap))));

  fill("workers", s.workers.map(w => {
    const ls = el("td", { class: "listeners" });
    for (const [rank, l] of Object.entries(w.listeners || {}).sort((a, b) => a[0] - b[0])) {
      const title = l.endpoint + (l.last_error ? " — " + l.last_error : "") + (l.watermark != null ? " — seq " + l.watermark : "");
      ls.append(el("span", { class: "listener", title: title, "data-rank": rank }, rank + ": ", state(l.status)));
    }
    if (!ls.childNodes.length) ls.append(el("span", { class: "muted" }, "none"));
    return el("tr", { "data-worker-id": w.worker_id },
      el("td", {}, w.worker_id), el("td", {}, w.model_name + " / " + w.routing_group), el("td", {}, w.endpoint || ""),
      el("td", { class: "lifecycle" }, state(w.lifecycle)), el("td", { class: "reasons" }, (w.not_schedulable_reasons || []).join("; ")), ls);
  }));

  const wf = document.getElementById("workers-file");
  if (s.workers_file) {
    wf.hidden = false;
    wf.textContent = "workers file " + s.workers_file.path + ": " + s.workers_file.owned_workers + " workers, " +
      s.workers_file.snapshots_applied + " snapshots applied" +
      (s.workers_file.last_error ? " — last error: " + s.workers_file.last_error : "");
  } else wf.hidden = true;

  const loads = document.getElementById("loads");
  const blocks = [];
  for (const part of s.loads) {
    const maxP = Math.max(1, ...part.loads.map(l => l.potential_prefill_tokens + l.potential_decode_blocks));
    blocks.push(el("h3", {}, part.model_name + " / " + part.routing_group +
      (part.pending_count ? " — " + part.pending_count + " queued" : "")));
    for (const l of part.loads) {
      const v = l.potential_prefill_tokens + l.potential_decode_blocks;
      const bar = el("div", { class: "bar" });
      bar.style.width = (100 * v / maxP).toFixed(1) + "%";
      blocks.push(el("div", { class: "loadrow", "data-owner": l.worker_id + ":" + l.dp_rank },
        el("span", {}, "worker " + l.worker_id + " rank " + l.dp_rank),
        el("div", { class: "track", title: "prefill tokens + decode blocks" }, bar),
        el("span", { class: "loadtext" }, l.active_requests + " requests, " + l.potential_prefill_tokens +
          " prefill tokens, " + l.potential_decode_blocks + " decode blocks")));
    }
  }
  if (!blocks.length) blocks.push(el("p", { class: "muted" }, "no partitions"));
  loads.replaceChildren(...blocks);

  const li = xs => xs.length ? xs : [el("li", { class: "muted" }, "none")];
  document.getElementById("peers").replaceChildren(...li(s.peers.map(p => el("li", {}, p))));
  document.getElementById("members").replaceChildren(...li(s.members.map(m =>
    el("li", { "data-replica": m.replica_id }, m.replica_id + (m.peer ? " (peer)" : "") + (m.http_addr ? " — " + m.http_addr : "")))));
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  document.body.dataset.loaded = "true";
}

async function refresh() {
  const err = document.getElementById("error");
  try {
    const headers = {};
    const tok = sessionStorage.getItem("kvselect-token");
    if (tok) headers.Authorization = "Bearer " + tok;
    const r = await fetch("/status", { headers, cache: "no-store" });
    if (r.status === 401) {
      document.getElementById("auth").hidden = false;
      throw new Error("this replica requires a bearer token");
    }
    if (!r.ok) throw new Error("GET /status: " + r.status);
    render(await r.json());
    err.hidden = true;
  } catch (e) {
    err.textContent = String(e.message || e);
    err.hidden = false;
  }
}

document.getElementById("auth").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem("kvselect-token", document.getElementById("token").value.trim());
  document.getElementById("auth").hidden = true;
  refresh();
});

refresh();
setInterval(refresh, refreshMs);
