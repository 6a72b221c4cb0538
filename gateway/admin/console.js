// logway console: polls the admin listener's JSON endpoints and renders them. No framework, no build step.
// Everything that comes from the gateway (topic names, group ids, record keys and values) is put into the page as
// text nodes (textContent), never parsed as markup.
"use strict";

const REFRESH_MS = 2000;
const RATES_MS = 1000;

// -- small DOM helpers ---------------------------------------------------------------------------------------------
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function td(value, cls) {
  return el("td", cls ? { class: cls } : {}, value);
}

function $(id) {
  return document.getElementById(id);
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

function number(n) {
  return n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US");
}

async function getJSON(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${path}: HTTP ${response.status}`);
  return body;
}

// -- status ---------------------------------------------------------------------------------------------------------
async function refreshStatus() {
  const badge = $("status");
  try {
    const response = await fetch("/ready", { cache: "no-store" });
    const ready = await response.json();
    badge.textContent = ready.ready ? "ready" : ready.state;
    badge.className = "badge " + (ready.ready ? "ok" : "bad");
    $("listeners").textContent = Object.entries(ready.listeners || {}).map(([k, v]) => `${k} ${v}`).join(" · ");
  } catch (err) {
    badge.textContent = "unreachable";
    badge.className = "badge bad";
  }
}

// -- topics ---------------------------------------------------------------------------------------------------------
let knownTopics = [];

function renderTopics(topics) {
  knownTopics = topics;
  const body = $("topics").tBodies[0];
  const rows = [];
  for (const topic of topics) {
    topic.partitions.forEach((p, i) => {
      rows.push(el("tr", { class: i === 0 ? "first" : "", dataset: { topic: topic.name, partition: p.partition } },
        td(i === 0 ? topic.name : "", "topic"), td(i === 0 ? topic.format : ""), td(p.partition, "num"),
        td(number(p.log_start_offset), "num"), td(number(p.log_end_offset), "num"),
        td(number(p.last_stable_offset), "num"), td(number(p.log_end_offset - p.log_start_offset), "num"),
        td(bytes(p.size_bytes), "num"), td(p.segments, "num"),
        el("td", {}, el("button", { type: "button", onclick: () => browse(topic.name, p.partition) }, "messages"))));
    });
  }
  body.replaceChildren(...rows);
  $("topics-empty").hidden = topics.length > 0;
  fillTopicSelect();
}

function fillTopicSelect() {
  const select = $("browse-topic");
  const current = select.value;
  const names = knownTopics.map((t) => t.name);
  if (names.join("\u0000") !== Array.from(select.options).map((o) => o.value).join("\u0000")) {
    select.replaceChildren(...names.map((name) => el("option", { value: name }, name)));
    if (names.includes(current)) select.value = current;
  }
  fillPartitionSelect();
}

function fillPartitionSelect() {
  const select = $("browse-partition");
  const topic = knownTopics.find((t) => t.name === $("browse-topic").value);
  const count = topic ? topic.partitions.length : 0;
  if (select.options.length !== count) {
    const current = select.value;
    select.replaceChildren(...Array.from({ length: count }, (_, i) => el("option", { value: String(i) }, String(i))));
    if (Number(current) < count) select.value = current;
  }
}

function members_(n) {
  return n ? ` (${n} member${n === 1 ? "" : "s"})` : "";
}

// -- groups ---------------------------------------------------------------------------------------------------------
function renderGroups(groups) {
  const body = $("groups").tBodies[0];
  const rows = [];
  const members = [];
  for (const group of groups) {
    const parts = group.partitions.length ? group.partitions : [null];
    parts.forEach((p, i) => {
      const lag = p ? p.lag : null;
      rows.push(el("tr", { class: i === 0 ? "first" : "", dataset: { group: group.group } },
        td(i === 0 ? group.group : "", "group"),
        td(i === 0 ? group.state + members_(group.members.length) : ""),
        td(i === 0 ? group.type || "" : ""),
        td(p ? p.topic : ""), td(p ? p.partition : "", "num"), td(p ? number(p.committed) : "", "num"),
        td(p ? number(p.end) : "", "num"),
        td(p ? number(lag) : "", "num lag" + (lag > 0 ? " behind" : ""))));
    });
    for (const m of group.members) {
      const assigned = m.assignment.map(([t, p]) => `${t}-${p}`).join(", ") || "nothing assigned";
      members.push(el("p", { class: "member" }, el("strong", {}, group.group), ": ", m.member_id,
        el("span", { class: "muted" }, ` client ${m.client_id} at ${m.client_host}: ${assigned}`)));
    }
  }
  body.replaceChildren(...rows);
  $("members").replaceChildren(...members);
  $("groups-empty").hidden = groups.length > 0;
}

// -- rates ----------------------------------------------------------------------------------------------------------
const charts = new Map();

function chartFor(protocol) {
  let chart = charts.get(protocol);
  if (!chart) {
    const canvas = el("canvas", { width: 600, height: 180 });
    const legend = el("div", { class: "legend" });
    const box = el("div", { class: "chart", dataset: { protocol } }, el("h3", {}, protocol), canvas, legend);
    $("rates").append(box);
    chart = { canvas, legend };
    charts.set(protocol, chart);
  }
  return chart;
}

function draw(canvas, series) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 6;
  ctx.clearRect(0, 0, w, h);
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  ctx.strokeStyle = "#e3e6ec";
  ctx.lineWidth = 1;
  for (const f of [0, 0.5, 1]) {
    const y = pad + (h - 2 * pad) * f;
    ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(w, y); ctx.stroke();
  }
  for (const s of series) {
    const n = s.values.length;
    if (n < 2) continue;
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 3;
    ctx.beginPath();
    s.values.forEach((v, i) => {
      const x = (w * i) / (n - 1);
      const y = h - pad - ((h - 2 * pad) * v) / max;
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
  }
  ctx.fillStyle = "#6b7385";
  ctx.font = "22px system-ui, sans-serif";
  ctx.fillText(`${number(Math.round(max))}/s`, 8, 26);
}

function renderRates(rates) {
  const last = (values) => (values.length ? values[values.length - 1] : 0);
  for (const [protocol, s] of Object.entries(rates.protocols)) {
    const chart = chartFor(protocol);
    draw(chart.canvas, [{ values: s.records_in, color: "#2f6fde" }, { values: s.records_out, color: "#d9731a" }]);
    chart.legend.replaceChildren(
      el("span", { class: "in" }, `in ${number(Math.round(last(s.records_in)))} rec/s`), " · ",
      el("span", { class: "out" }, `out ${number(Math.round(last(s.records_out)))} rec/s`), " · ",
      `${bytes(Math.round(last(s.bytes_in)))}/s in, ${bytes(Math.round(last(s.bytes_out)))}/s out`);
  }
}

// -- message browser ------------------------------------------------------------------------------------------------
function shown(value, hex) {
  if (value === null || value === undefined) return el("span", { class: "null" }, "null");
  const text = hex || value.text === null ? value.hex.replace(/(..)/g, "$1 ").trim() : value.text;
  return [text, value.truncated ? el("span", { class: "muted" }, ` … (${bytes(value.size)})`) : null];
}

function cell(value, hex) {
  const content = shown(value, hex);
  return el("td", { class: "bytes" }, ...(Array.isArray(content) ? content : [content]));
}

let lastMessages = null;

function renderMessages() {
  const body = $("messages").tBodies[0];
  if (!lastMessages) return;
  const hex = $("browse-hex").checked;
  body.replaceChildren(...lastMessages.messages.map((m) => el("tr", { dataset: { offset: m.offset } },
    td(m.offset, "num"),
    td(m.timestamp === null ? "—" : new Date(m.timestamp).toISOString()),
    cell(m.key, hex), cell(m.value, hex),
    el("td", { class: "bytes" }, ...m.headers.flatMap((h, i) => [i ? "; " : "", `${h.key}=`,
      ...[].concat(shown(h.value, hex))])))));
}

async function browse(topic, partition) {
  if (topic !== undefined) {
    $("browse-topic").value = topic;
    fillPartitionSelect();
    $("browse-partition").value = String(partition);
  }
  const t = $("browse-topic").value, p = $("browse-partition").value;
  if (!t) return;
  const last = Math.min(500, Math.max(1, Number($("browse-last").value) || 20));
  const status = $("browse-status");
  status.textContent = "loading…";
  try {
    const path = `/api/topics/${encodeURIComponent(t)}/partitions/${encodeURIComponent(p)}/messages?last=${last}`;
    lastMessages = await getJSON(path);
    status.textContent = `${t}-${p}: ${lastMessages.messages.length} record(s) before offset ` +
      `${number(lastMessages.end_offset)} (${lastMessages.format})`;
    renderMessages();
  } catch (err) {
    status.textContent = String(err.message || err);
  }
}

// -- loops ----------------------------------------------------------------------------------------------------------
async function refresh() {
  await refreshStatus();
  try {
    const [topics, groups] = await Promise.all([getJSON("/api/topics"), getJSON("/api/groups")]);
    renderTopics(topics.topics);
    renderGroups(groups.groups);
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    $("updated").textContent = String(err.message || err);
  }
}

async function refreshRates() {
  try {
    renderRates(await getJSON("/api/rates"));
  } catch (err) {
    /* shown by the status badge */
  }
}

function every(ms, fn) {
  const tick = async () => { await fn(); setTimeout(tick, ms); };
  tick();
}

document.addEventListener("DOMContentLoaded", () => {
  $("browse").addEventListener("submit", (event) => { event.preventDefault(); browse(); });
  $("browse-topic").addEventListener("change", fillPartitionSelect);
  $("browse-hex").addEventListener("change", renderMessages);
  every(REFRESH_MS, refresh);
  every(RATES_MS, refreshRates);
});
