// gslbd operator console: plain JS, no framework. Data from the admin API (docs/api.md#console);
// live updates from Server-Sent Events (GET /api/v1/events). Every value from the server is put into
// the page with textContent, never as HTML.
"use strict";

const PAGE = 100;
const TOKEN_KEY = "gslbd-token";
const view = { q: "", state: "", offset: 0, selected: null, total: 0, hasPeersOrCluster: false };
const $ = (id) => document.getElementById(id);
const started = performance.now();
let firstPaint = null;

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

async function getJSON(url, options) {
  const response = await fetch(url, Object.assign({ cache: "no-store" }, options || {}));
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const message = body && body.error ? body.error : `HTTP ${response.status}`;
    throw new Error(message);
  }
  return body;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "never";
  if (seconds < 90) return `${seconds.toFixed(1)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function when(unix) {
  if (unix === null || unix === undefined) return "";
  return new Date(unix * 1000).toLocaleTimeString();
}

// -- one refresh at a time; a request during one runs once more after it ------------------------

function serial(fn) {
  let running = null, again = false;
  const run = async () => {
    if (running) { again = true; return running; }
    running = (async () => {
      do { again = false; try { await fn(); } catch (e) { console.error(e); } } while (again);
    })();
    try { await running; } finally { running = null; }
  };
  return run;
}

// -- the service list ------------------------------------------------------------------------

function setCounts(counts) {
  const s = counts.services, e = counts.endpoints;
  $("n-services").textContent = s.total.toLocaleString();
  $("n-up").textContent = s.up.toLocaleString();
  $("n-degraded").textContent = s.degraded.toLocaleString();
  $("n-down").textContent = s.down.toLocaleString();
  $("n-endpoints").textContent = e.total.toLocaleString();
  $("n-ep-up").textContent = e.up.toLocaleString();
  $("n-ep-down").textContent = e.down.toLocaleString();
  $("n-ep-admin").textContent = (e.admin_down + e.admin_up).toLocaleString();
}

function adminCell(row) {
  const td = el("td");
  if (row.admin_down) td.append(el("span", `${row.admin_down} forced down`, "tag admin-down"));
  if (row.admin_up) td.append(" ", el("span", `${row.admin_up} forced up`, "tag admin-up"));
  return td;
}

function renderRows(doc) {
  const body = $("rows");
  const fragment = document.createDocumentFragment();
  for (const row of doc.rows) {
    const tr = el("tr", null, `state-${row.state}`);
    tr.dataset.service = row.name;
    tr.dataset.state = row.state;
    if (row.name === view.selected) tr.classList.add("selected");
    tr.append(el("td", row.name), el("td", row.policy), el("td", row.state),
      el("td", `${row.endpoints_up}/${row.endpoints}`), adminCell(row));
    fragment.append(tr);
  }
  body.replaceChildren(fragment);
  view.total = doc.total;
  $("empty").hidden = doc.total !== 0;
  const last = Math.min(doc.offset + doc.rows.length, doc.total);
  $("page-info").textContent = doc.total
    ? `${(doc.offset + 1).toLocaleString()}–${last.toLocaleString()} of ${doc.total.toLocaleString()}`
    : "0 of 0";
  $("prev").disabled = doc.offset === 0;
  $("next").disabled = last >= doc.total;
  setCounts(doc.counts);
  if (firstPaint === null && doc.rows.length) {
    firstPaint = 0;
    requestAnimationFrame(() => setTimeout(() => { // after the frame with the rows is painted
      firstPaint = performance.now() - started;
      performance.mark("gslbd-rows-painted");
      document.body.dataset.firstRows = firstPaint.toFixed(0);
    }, 0));
  }
  document.body.dataset.seq = doc.seq;
}

const refreshRows = serial(async () => {
  for (;;) {
    const params = new URLSearchParams({ q: view.q, state: view.state, offset: view.offset, limit: PAGE });
    const doc = await getJSON(`/api/v1/service-rows?${params}`);
    if (doc.offset > 0 && doc.offset >= doc.total) { // this page emptied (e.g. under a state filter)
      view.offset = Math.max(0, (Math.ceil(doc.total / PAGE) - 1) * PAGE); // the last page left
      continue;
    }
    renderRows(doc);
    return;
  }
});

// -- the header: readiness, peers, cluster -----------------------------------------------------

const refreshSummary = serial(async () => {
  const doc = await getJSON("/api/v1/summary");
  const ready = $("ready");
  ready.textContent = doc.ready ? "ready" : "not ready";
  ready.className = `badge ${doc.ready ? "up" : "down"}`;
  setCounts(doc);
  $("n-peers").textContent = doc.peers.total;
  $("n-peers-fresh").textContent = doc.peers.fresh;
  $("n-peers-stale").textContent = doc.peers.stale;
  const cut = $("partitioned");
  cut.hidden = !doc.peers.partitioned;
  cut.title = "this site hears fewer than a majority of the sites: remote endpoints keep their last agreed verdicts (fail static)";
  const c = doc.cluster;
  view.hasPeersOrCluster = Boolean(c) || doc.peers.total > 0;
  const redis = $("redis");
  if (c) {
    $("n-members").textContent = c.members === null ? "?" : `${c.members} member${c.members === 1 ? "" : "s"}`;
    redis.textContent = `Redis ${c.connected ? "connected" : "DOWN"}: ${c.redis}`;
    redis.className = `chip ${c.connected ? "up" : "down"}`;
    redis.title = `instance ${c.instance_id}, sync ${c.sync_mode}`;
  } else {
    $("n-members").textContent = "–";
    redis.textContent = "no cluster (single instance)";
    redis.className = "chip muted";
  }
  const peers = $("peers");
  if (!doc.peers.sites.length) {
    const tr = el("tr"); const td = el("td", "no peer sites", "muted"); td.colSpan = 6; tr.append(td);
    peers.replaceChildren(tr);
    return;
  }
  peers.replaceChildren(...doc.peers.sites.map((p) => {
    const tr = el("tr", null, p.state === "stale" ? "stale" : "");
    tr.dataset.peer = p.name;
    tr.title = p.detail || "";
    tr.append(el("td", p.name), el("td", p.state + (p.failing ? " (failing)" : ""), p.state === "stale" ? "down" : "up"),
      el("td", p.heartbeat === null ? "none published" : age(p.heartbeat_age)), el("td", age(p.last_answer_age)),
      el("td", p.endpoints), el("td", p.errors));
    return tr;
  }));
});

// -- one service's detail: endpoints, admin buttons, explain ----------------------------------

// Load feedback (docs/policies/load.md): the figure the answers use, the weight drawn by, the share.
function loadText(e) {
  const parts = [];
  if (e.load !== null && e.load !== undefined) parts.push(`load ${e.load.toFixed(2)}`);
  if (e.load_weight !== null && e.load_weight !== undefined) parts.push(`weight ${e.load_weight}`);
  if (e.share !== null && e.share !== undefined) parts.push(`share ${(e.share * 100).toFixed(1)}%`);
  return parts.join(", ");
}

function endpointRow(service, e) {
  const tr = el("tr", null, e.effective_up ? "" : "ep-down");
  if (e.admin === "down") tr.classList.add("ep-admin-down");
  tr.dataset.address = e.address;
  const check = e.last_check ? `${when(e.last_check.time)} ${e.last_check.ok ? "ok" : "failed"}: ${e.last_check.detail}` : "";
  const change = e.last_change ? `${when(e.last_change.time)} ${e.last_change.reason}` : "";
  const buttons = el("td", null, "admin-buttons");
  for (const state of ["up", "down", "obey"]) {
    const b = el("button", state);
    b.type = "button";
    b.dataset.admin = state;
    if (e.admin === state) b.classList.add("current");
    b.addEventListener("click", () => setAdmin(service, e.address, state));
    buttons.append(b);
  }
  // Several checks (endpoints[].checks): the combined verdict, then each check's own.
  const health = el("td", e.check ? e.health : "not checked", e.health);
  for (const c of e.checks || []) {
    const why = c.last_change ? c.last_change.reason : "";
    const part = el("span", ` ${c.name} ${c.health}`, `check-${c.health}`);
    part.title = why;
    health.append(part);
  }
  if (e.health_mode) health.title = `health: ${e.health_mode}`;
  tr.append(el("td", e.address), el("td", [e.site, e.region, e.zone].filter(Boolean).join(" / ")),
    health, el("td", e.admin),
    el("td", e.effective_up ? "yes" : "no", e.effective_up ? "up" : "down"), buttons,
    el("td", check, "reason"), el("td", change, "reason"), el("td", loadText(e), "load"));
  return tr;
}

const refreshDetail = serial(async () => {
  const name = view.selected;
  if (!name) { $("detail").hidden = true; $("hint").hidden = false; return; }
  const s = await getJSON(`/api/v1/services/${encodeURIComponent(name)}`);
  if (view.selected !== name) return;
  $("detail").hidden = false;
  $("hint").hidden = true;
  $("d-name").textContent = s.name;
  $("d-policy").textContent = `${s.policy}, ${s.endpoints_up} of ${s.endpoints.length} endpoints answering`;
  $("d-endpoints").replaceChildren(...s.endpoints.map((e) => endpointRow(s.name, e)));
});

function select(name) {
  view.selected = name;
  for (const tr of $("rows").children) tr.classList.toggle("selected", tr.dataset.service === name);
  $("answer").hidden = true;
  $("admin-msg").textContent = "";
  refreshDetail();
}

async function setAdmin(service, address, state) {
  const msg = $("admin-msg");
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) {
    msg.textContent = "Enter the API token above to change admin states.";
    msg.className = "msg error";
    return;
  }
  const url = `/api/v1/services/${encodeURIComponent(service)}/endpoints/${encodeURIComponent(address)}/admin`;
  try {
    await getJSON(url, {
      method: "PUT",
      headers: { "Authorization": `Bearer ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ state }),
    });
    msg.textContent = `${address}: admin ${state}`;
    msg.className = "msg ok";
  } catch (e) {
    msg.textContent = `${address}: ${e.message}`;
    msg.className = "msg error";
  }
  refreshDetail();
  refreshRows();
}

async function explainAnswer(event) {
  event.preventDefault();
  const name = view.selected;
  if (!name) return;
  const params = new URLSearchParams({ client: $("client").value.trim(), type: $("qtype").value });
  const box = $("answer");
  box.hidden = false;
  try {
    const a = await getJSON(`/api/v1/services/${encodeURIComponent(name)}/answer?${params}`);
    $("a-rcode").textContent = `${a.rcode} for ${a.client} (${a.type})` +
      (a.location_dependent ? ", depends on where the client is" : "");
    $("a-records").replaceChildren(...(a.answer.length ? a.answer : ["(no records)"]).map((r) => el("li", r)));
    $("a-explain").textContent = a.explanation;
  } catch (e) {
    $("a-rcode").textContent = e.message;
    $("a-records").replaceChildren();
    $("a-explain").textContent = "";
  }
}

// -- the change log and the event stream -----------------------------------------------------

function addChanges(changes) {
  const list = $("changes");
  for (const c of changes) {
    const what = c.service ? `${c.service} ${c.address || ""}` : "";
    const li = el("li", `${when(c.time)} ${c.kind} ${what} → ${c.state}${c.detail ? ": " + c.detail : ""}`,
      c.kind === "admin" ? "admin" : c.state === "down" || c.state === "refused" ? "down" : c.state === "up" ? "up" : "");
    li.value = c.seq;
    li.dataset.seq = c.seq;
    list.prepend(li);
  }
  while (list.children.length > 200) list.lastElementChild.remove();
}

async function loadChanges() {
  const doc = await getJSON("/api/v1/changes");
  $("changes").replaceChildren();
  addChanges(doc.changes);
}

function connect() {
  const live = $("live");
  const source = new EventSource("/api/v1/events");
  source.addEventListener("open", () => { live.textContent = "live"; live.className = "badge up"; });
  source.addEventListener("error", () => { live.textContent = "reconnecting"; live.className = "badge down"; });
  let hellos = 0;
  source.addEventListener("hello", () => { // after a reconnect: refetch what may have been missed
    if (hellos++) { refreshRows(); refreshSummary(); }
    loadChanges();
  });
  source.addEventListener("change", (event) => {
    const data = JSON.parse(event.data);
    if (data.missed) loadChanges(); else addChanges(data.changes);
    refreshRows();
    if (data.all) refreshSummary();
    if (view.selected && (data.all || data.services.includes(view.selected))) refreshDetail();
  });
}

// -- controls ----------------------------------------------------------------------------------

function showTokenState() {
  $("token-state").textContent = sessionStorage.getItem(TOKEN_KEY) ? "token set (this tab only)" : "no token";
}

function init() {
  let typing = null;
  $("search").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { view.q = $("search").value; view.offset = 0; refreshRows(); }, 150);
  });
  $("state").addEventListener("change", () => { view.state = $("state").value; view.offset = 0; refreshRows(); });
  for (const chip of document.querySelectorAll("[data-filter]")) {
    chip.addEventListener("click", () => {
      view.state = view.state === chip.dataset.filter ? "" : chip.dataset.filter;
      $("state").value = view.state; view.offset = 0; refreshRows();
    });
  }
  $("prev").addEventListener("click", () => { view.offset = Math.max(0, view.offset - PAGE); refreshRows(); });
  $("next").addEventListener("click", () => { view.offset += PAGE; refreshRows(); });
  $("rows").addEventListener("click", (event) => {
    const tr = event.target.closest("tr");
    if (tr && tr.dataset.service) select(tr.dataset.service);
  });
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    $("token").value = "";
    showTokenState();
  });
  $("forget").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); showTokenState(); });
  $("explain-form").addEventListener("submit", explainAnswer);
  showTokenState();
  refreshRows();
  refreshSummary();
  connect();
  setInterval(() => { // heartbeat and answer ages move without events
    if (view.hasPeersOrCluster) refreshSummary();
  }, 5000);
}

init();
