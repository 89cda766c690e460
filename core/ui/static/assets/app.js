// prorl dashboard: reads the host's API with the user's token (kept in
// this tab's sessionStorage, sent as a bearer header, never in a URL).
"use strict";

const state = { overview: null, rows: [], sort: { key: "age_seconds", dir: -1 }, filter: "", status: "", stream: null };

function token(kind) { return sessionStorage.getItem(kind === "admin" ? "prorl-admin" : "prorl-token") || ""; }

async function api(path, opts = {}, kind = "user") {
  const headers = Object.assign({ "Content-Type": "application/json" }, opts.headers || {});
  const t = token(kind) || token("user");
  if (t) headers.Authorization = "Bearer " + t;
  const r = await fetch(path, Object.assign({}, opts, { headers }));
  if (r.status === 401) { askToken(); throw new Error("a token is needed"); }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) { const e = new Error((body.error && body.error.message) || r.statusText); e.status = r.status; throw e; }
  return body;
}

function askToken() {
  const d = document.getElementById("token-dialog");
  if (!d.open) d.showModal();
}

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    // Styles through the CSSOM: the page's policy refuses style attributes.
    if (k === "class") e.className = v; else if (k === "style") { if (v) e.style.cssText = v; } else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function fmt(n, d = 1) { return typeof n === "number" ? (Number.isInteger(n) ? String(n) : n.toFixed(d)) : "–"; }

// ---- live overview over SSE (fetch streaming: EventSource cannot send a header)
async function connect() {
  if (state.stream) state.stream.abort();
  const ctl = new AbortController();
  state.stream = ctl;
  const live = document.getElementById("live");
  try {
    const headers = {};
    if (token("user")) headers.Authorization = "Bearer " + token("user");
    const r = await fetch("/v1/ui/stream", { headers, signal: ctl.signal });
    if (r.status === 401) { live.textContent = "token needed"; askToken(); return; }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    live.textContent = "live";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, i); buf = buf.slice(i + 2);
        const data = ev.split("\n").filter(l => l.startsWith("data: ")).map(l => l.slice(6)).join("\n");
        if (data) { state.overview = JSON.parse(data); onOverview(); }
      }
    }
  } catch (e) {
    if (ctl.signal.aborted) return;
  }
  live.textContent = "reconnecting…";
  setTimeout(connect, 2000);
}

function onOverview() {
  const o = state.overview;
  document.getElementById("live").textContent = "live · " + new Date(o.time).toLocaleTimeString();
  if (["overview", "backends", "plugins"].includes(route().page)) renderOverview();
}

// ---- pages
function route() {
  const h = location.hash.replace(/^#/, "") || "/";
  const m = h.match(/^\/rollouts\/(.+)$/);
  if (m) return { page: "viewer", id: decodeURIComponent(m[1]) };
  if (h.startsWith("/rollouts")) return { page: "rollouts" };
  if (h === "/backends" || h === "/plugins") return { page: h.slice(1) };
  if (h === "/" || h === "") return { page: "overview" };
  return { page: "notfound" };
}

function render() {
  const r = route();
  if (r.page === "overview" || r.page === "backends" || r.page === "plugins") renderOverview();
  else if (r.page === "rollouts") loadRollouts();
  else if (r.page === "viewer") renderViewer(r.id);
  else notFound("No page " + location.hash);
}

function notFound(msg) {
  const m = document.getElementById("main");
  m.replaceChildren(el("section", { id: "not-found" }, el("h2", {}, "Not found"), el("p", {}, msg), el("a", { href: "#/rollouts" }, "All rollouts")));
}

function card(k, v, id) { return el("div", { class: "card", id }, el("div", { class: "v" }, v), el("div", { class: "k" }, k)); }

function renderOverview() {
  const m = document.getElementById("main");
  const o = state.overview;
  if (!o) { m.replaceChildren(el("p", {}, "Waiting for the host…")); return; }
  const s = o.stages;
  const cards = el("div", { class: "cards" },
    card("rollouts/s (10 s)", fmt(o.tally.per_second), "c-rate"),
    card("finished", fmt(o.tally.finished), "c-finished"),
    card("init: queued / running", `${s.init_queue} / ${s.active_init}`, "c-init"),
    card("run: queued / running", `${s.run_queue} / ${s.active_run}`, "c-run"),
    card("eval: queued / running", `${s.eval_queue} / ${s.active_eval}`, "c-eval"),
    card("in flight", fmt(s.total), "c-total"),
    card("policy version", fmt(o.policy.version) + (o.policy.paused ? " (paused)" : ""), "c-policy"),
    card("results not acked", fmt(o.unacked_results), "c-unacked"),
    card(`stuck (> ${fmt(o.stuck_after_seconds)} s in a stage)`, fmt(o.stuck), "c-stuck"),
    o.sandboxes ? card("sandboxes running / starting", `${o.sandboxes.running} / ${o.sandboxes.starting}`, "c-sandboxes") : null);
  const backends = el("section", { id: "backends" }, el("h2", {}, "Backends"), table(["id", "url", "healthy", "in_flight", "slots", "error"],
    (o.backends || []).map(b => [b.id, b.url, b.healthy ? "yes" : "NO", b.in_flight ?? b.inflight ?? "", b.slots || "", b.last_error || ""])));
  const plugins = el("section", { id: "plugins" }, el("h2", {}, "Plugins"), table(["name", "state", "restarts", "last error"],
    (o.plugins || []).map(p => [p.name, p.state, p.restarts, p.last_error || ""])));
  const fails = Object.entries(o.tally.by_reason || {}).sort((a, b) => b[1] - a[1]);
  const failures = el("section", { id: "failures" }, el("h2", {}, "Finished, by status and reason"), table(["status / reason", "rollouts"], fails));
  const rewards = el("section", { id: "rewards" }, el("h2", {}, "Rewards per domain"),
    ...Object.entries(o.tally.rewards || {}).map(([d, h]) => {
      const top = Math.max(1, ...h);
      return el("div", {}, el("div", {}, `${d} (below 0 · ten bins over [0, 1] · above 1)`),
        el("div", { class: "bars", "data-domain": d }, ...h.map(c => el("div", { title: String(c), style: `height:${Math.round(60 * c / top)}px` }))));
    }));
  const keys = [...new Set((o.tally.timeline || []).flatMap(b => Object.keys(b.counts)).filter(k => k !== "completed"))].sort();
  const peak = Math.max(1, ...(o.tally.timeline || []).map(b => keys.reduce((n, k) => n + (b.counts[k] || 0), 0)));
  const timeline = el("section", { id: "failures-over-time" }, el("h2", {}, "Not completed, over the last 10 minutes (10 s bars)"),
    keys.length ? el("div", { class: "bars" }, ...(o.tally.timeline || []).map(b => {
      const n = keys.reduce((m, k) => m + (b.counts[k] || 0), 0);
      return el("div", { title: new Date(b.start).toLocaleTimeString() + ": " + keys.filter(k => b.counts[k]).map(k => `${k} ${b.counts[k]}`).join(", "), style: `height:${Math.round(60 * n / peak)}px;background:#d9534f` });
    })) : el("p", {}, "none"));
  const health = el("section", { id: "health" }, el("h2", {}, "Health checks (finished rollouts that tripped one)"),
    table(["check", "rollouts"], ["loop", "runaway_generation", "template_mismatch", "slow_init"].map(k => [k, (o.tally.health || {})[k] || 0])));
  if (route().page === "backends") return m.replaceChildren(backends);
  if (route().page === "plugins") return m.replaceChildren(plugins);
  const parts = [cards, health, backends, plugins, failures, timeline, rewards];
  if (o.nodes && o.nodes.length) parts.push(el("section", { id: "nodes" }, el("h2", {}, "Nodes"),
    table(["id", "url", "state", "outstanding", "capacity"], o.nodes.map(n => [n.id, n.url, n.state, n.outstanding, n.load.capacity]))));
  m.replaceChildren(...parts);
}

function table(head, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, ...head.map(h => el("th", {}, h)))),
    el("tbody", {}, ...rows.map(r => el("tr", {}, ...r.map(c => el("td", {}, c))))));
}

async function loadRollouts() {
  const stuck = new URLSearchParams(location.hash.split("?")[1] || "").get("stuck_after") || "";
  try {
    const d = await api("/v1/ui/rollouts?limit=1000" + (stuck ? "&stuck_after=" + encodeURIComponent(stuck) : ""));
    // One sortable figure: the trainer's expected_tokens, else the learned one.
    state.rows = d.rollouts.map(r => ({ ...r, expected: r.expected_tokens || r.learned_tokens }));
    renderRollouts();
  } catch (e) {
    document.getElementById("main").replaceChildren(el("p", { class: "error" }, e.message));
  }
}

const columns = [["id", "id"], ["status", "status"], ["stage", "stage"], ["domain", "domain"], ["group_id", "group"], ["age_seconds", "age (s)"], ["expected", "expected tokens"], ["backend", "backend"], ["reward", "reward"], ["health", "health"]];

function renderRollouts() {
  const m = document.getElementById("main");
  const q = state.filter.toLowerCase();
  let rows = state.rows.filter(r => (!state.status || r.status === state.status || (state.status === "stuck" && r.stuck)) &&
    (!q || [r.id, r.group_id, r.domain, r.status, r.stage, r.backend].some(v => (v || "").toLowerCase().includes(q))));
  const { key, dir } = state.sort;
  rows = rows.slice().sort((a, b) => (a[key] ?? -Infinity) > (b[key] ?? -Infinity) ? dir : (a[key] ?? -Infinity) < (b[key] ?? -Infinity) ? -dir : 0);
  const search = el("input", { type: "search", id: "filter", placeholder: "filter: id, group, domain, status, stage", value: state.filter,
    oninput: e => { state.filter = e.target.value; renderRollouts(); document.getElementById("filter").focus(); } });
  const statuses = ["", "queued", "running", "stuck", "completed", "failed", "timeout", "cancelled", "truncated"];
  const sel = el("select", { id: "status-filter", onchange: e => { state.status = e.target.value; renderRollouts(); } },
    ...statuses.map(s => { const o = el("option", { value: s }, s || "any status"); if (s === state.status) o.selected = true; return o; }));
  const head = el("tr", {}, ...columns.map(([k, label]) => el("th", { "data-key": k, onclick: () => { state.sort = { key: k, dir: state.sort.key === k ? -state.sort.dir : 1 }; renderRollouts(); } },
    label + (state.sort.key === k ? (state.sort.dir > 0 ? " ▲" : " ▼") : ""))), el("th", {}, ""));
  const body = el("tbody", {}, ...rows.map(r => el("tr", { class: r.stuck ? "stuck" : "", "data-id": r.id },
    el("td", {}, el("a", { href: "#/rollouts/" + encodeURIComponent(r.id) }, r.id)),
    el("td", {}, el("span", { class: "badge " + r.status }, r.status), r.stuck ? el("span", { class: "badge stuck" }, "stuck") : null),
    el("td", {}, r.stage), el("td", {}, r.domain), el("td", {}, r.group_id), el("td", {}, fmt(r.age_seconds)),
    el("td", { title: r.expected_tokens || !r.expected ? "" : "learned from the task's earlier rollouts" }, r.expected ? r.expected + (r.expected_tokens ? "" : " (learned)") : ""),
    el("td", {}, r.backend || ""),
    el("td", {}, r.reward === undefined ? "" : fmt(r.reward, 3)),
    el("td", { class: "health" }, ...(r.health || []).map(h => el("span", { class: "badge failed" }, h))),
    el("td", {}, r.finished_at ? "" : el("button", { type: "button", class: "cancel", onclick: () => cancel({ id: r.id }) }, "cancel"),
      r.finished_at ? "" : el("button", { type: "button", class: "cancel-group", onclick: () => cancel({ group_id: r.group_id }) }, "cancel group")))));
  m.replaceChildren(el("section", { id: "rollouts" }, el("h2", {}, `Rollouts (${rows.length} of ${state.rows.length})`),
    el("div", {}, search, " ", sel, " ", el("button", { type: "button", id: "refresh", onclick: loadRollouts }, "refresh")),
    el("p", { id: "cancel-msg" }), el("table", {}, el("thead", {}, head), body)));
}

async function cancel(what) {
  const msg = () => document.getElementById("cancel-msg");
  try {
    const r = await api("/v1/ui/cancel", { method: "POST", body: JSON.stringify(what) }, "admin");
    msg().textContent = `cancelled ${r.cancelled}`;
    setTimeout(loadRollouts, 300);
  } catch (e) {
    msg().textContent = e.status === 403 ? "Cancelling needs the admin token (Token button)." : e.message;
    msg().className = "error";
  }
}

async function renderViewer(id) {
  const m = document.getElementById("main");
  m.replaceChildren(el("p", {}, "Loading " + id + "…"));
  let res;
  try {
    res = await api("/v1/rollouts/" + encodeURIComponent(id));
  } catch (e) {
    if (e.status === 404) return notFound("No rollout " + id);
    m.replaceChildren(el("p", { class: "error" }, e.message));
    return;
  }
  const head = el("section", { id: "summary" }, el("h2", {}, "Rollout " + res.id),
    el("div", { class: "cards" }, card("status", res.status, "v-status"), card("reward", fmt(res.reward, 3), "v-reward"), card("domain", res.domain),
      card("attempt", res.attempt), card("turns", (res.turns || []).length), card("policy", res.policy_version)),
    res.failure ? el("p", { class: "error" }, `${res.failure.stage}: ${res.failure.reason}: ${res.failure.message || ""}`) : null);
  const msgs = el("section", { id: "messages" }, el("h2", {}, "Messages"), ...(res.messages || []).map(mm => el("div", { class: "msg " + mm.role },
    el("div", { class: "role" }, mm.role + (mm.name ? " · " + mm.name : "")), mm.reasoning_content ? el("div", { class: "reasoning" }, mm.reasoning_content) : null,
    mm.content || "", ...(mm.tool_calls || []).map(c => el("div", { class: "call" }, `→ ${c.function.name}(${c.function.arguments})`)))));
  const tokens = el("section", { id: "tokens" }, el("h2", {}, "Tokens (grey: prompt and observations; green: generated, darker = more likely; | turn start)"), el("div", { class: "tokens", id: "token-view" }, "…"));
  const wf = waterfall(res);
  const info = el("section", { id: "info" }, el("h2", {}, "Reward and domain info"), el("pre", {}, JSON.stringify({ reward: res.reward, resolved: res.resolved, metrics: res.metrics, info: res.info }, null, 2)));
  const patch = res.info && (res.info.patch || res.info.model_patch);
  const parts = [head, wf, msgs, tokens, info];
  if (patch) parts.push(el("section", { id: "patch" }, el("h2", {}, "Patch"), el("pre", { class: "diff" }, ...String(patch).split("\n").map(l => el("div", { class: l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "" }, l)))));
  m.replaceChildren(...parts);
  try {
    const t = await api("/v1/ui/rollouts/" + encodeURIComponent(id) + "/tokens");
    renderTokens(res, t.texts);
  } catch (e) {
    document.getElementById("token-view").textContent = "ids only (" + e.message + "): " + (res.tokens.ids || []).join(" ");
  }
}

function renderTokens(res, texts) {
  const view = document.getElementById("token-view");
  const ids = res.tokens.ids || [], mask = res.tokens.loss_mask || [], lp = res.tokens.logprobs || [];
  // Turn starts: each turn's prompt delta comes before its response.
  const starts = new Set();
  let at = 0;
  for (const t of res.turns || []) { starts.add(at); at += (t.prompt_delta_ids || []).length + (t.response_ids || []).length; }
  const out = [];
  for (let i = 0; i < texts.length; i++) {
    if (starts.has(i) && i > 0) out.push(el("span", { class: "turn-sep", title: "turn start" }));
    const gen = mask[i] === 1;
    const p = gen && lp[i] !== undefined ? Math.exp(lp[i]) : 1;
    out.push(el("span", { class: "tok " + (gen ? "gen" : "prompt"), "data-i": i, "data-id": ids[i], "data-mask": mask[i] || 0,
      title: `#${i} id ${ids[i]}` + (gen ? ` logprob ${fmt(lp[i], 3)}` : ""), style: gen ? `--a:${(0.15 + 0.6 * p).toFixed(2)}` : null }, texts[i]));
  }
  view.replaceChildren(...out);
}

function waterfall(res) {
  const t = res.timing || {};
  const total = Math.max(1, t.total || 0);
  const scale = ms => Math.max(1, Math.round(600 * ms / total)) + "px";
  const rows = [["queued", t.queued, "queued"], ["init", t.init, ""]];
  (res.turns || []).forEach((tu, i) => { rows.push([`turn ${i} generate`, tu.generate_ms, ""]); rows.push([`turn ${i} tools`, tu.tools_ms, "tools"]); });
  rows.push(["eval", t.eval, "eval"]);
  return el("section", { id: "waterfall", class: "waterfall" }, el("h2", {}, `Timing (${fmt(t.total)} ms)`),
    ...rows.map(([k, ms, cls]) => el("div", { class: "row" }, el("span", { style: "width:9em" }, k), el("div", { class: "bar " + cls, style: "width:" + scale(ms || 0) }), fmt(ms || 0) + " ms")));
}

// ---- start
document.getElementById("token-btn").addEventListener("click", askToken);
document.getElementById("token-form").addEventListener("submit", () => {
  sessionStorage.setItem("prorl-token", document.getElementById("token-input").value.trim());
  sessionStorage.setItem("prorl-admin", document.getElementById("admin-input").value.trim());
  document.getElementById("token-input").value = document.getElementById("admin-input").value = "";
  connect(); render();
});
window.addEventListener("hashchange", render);
connect();
render();
