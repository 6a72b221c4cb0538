// logway console: polls the admin listener's JSON endpoints and renders them; its actions are native requests
// POSTed to /api/request, answered by the gateway's native handler (the steps `logway topics`, `logway groups` and
// `logway produce` take), each confirmed first. No framework, no build step. Everything that comes from the gateway
// (topic names, group ids, record keys and values) is put into the page as text nodes (textContent), never parsed
// as markup. Every time is shown in one format with its zone: local time or UTC, as chosen in the header.
"use strict";

const REFRESH_MS = 2000;
const RATES_MS = 1000;
const encoder = new TextEncoder();

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

function button(text, onclick, cls, action) {
  return el("button", { type: "button", class: cls || "act", onclick, dataset: { action: action || "" } }, text);
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

// -- who the console is: the login it sends with every request (HTTP Basic or the access token) ----------------------
let credentials = sessionStorage.getItem("logway-auth") || "";

function requestHeaders(extra) {
  // X-Logway-Console: a refused login gets no Basic challenge (the browser's own dialog), the console asks itself
  const headers = Object.assign({ "X-Logway-Console": "1" }, extra || {});
  if (credentials) headers.Authorization = credentials;
  return headers;
}

function loginNeeded() {
  $("login").hidden = false;
  $("login").textContent = "log in";
}

async function getJSON(path) {
  const response = await fetch(path, { cache: "no-store", headers: requestHeaders() });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    loginNeeded();
    throw new Error("log in first: " + (body.error || "the gateway asks who you are"));
  }
  if (!response.ok) throw new Error(body.error || `${path}: HTTP ${response.status}`);
  return body;
}

// -- times: one format, the zone shown -----------------------------------------------------------------------------
function utc() {
  return $("zone").value === "utc";
}

function pad(n, width) {
  return String(n).padStart(width || 2, "0");
}

// "2025-05-01 14:03:07.123 +02:00" (local) or "2025-05-01 12:03:07.123 UTC".
function fmtTime(ms) {
  if (ms === null || ms === undefined) return "—";
  const d = new Date(ms);
  const [y, mo, da, h, mi, s, mss] = utc()
    ? [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(),
      d.getUTCMilliseconds()]
    : [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds(),
      d.getMilliseconds()];
  return `${y}-${pad(mo)}-${pad(da)} ${pad(h)}:${pad(mi)}:${pad(s)}.${pad(mss, 3)} ${zoneName(d)}`;
}

function zoneName(d) {
  if (utc()) return "UTC";
  const offset = -(d || new Date()).getTimezoneOffset();
  return `${offset < 0 ? "-" : "+"}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
}

// The hh:mm:ss of a chart's time axis (in the chosen zone).
function clock(ms) {
  const d = new Date(ms);
  return utc() ? `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`
    : `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// A datetime-local input's value ("2025-05-01T14:03:07") in the chosen zone -> ms since the epoch (null: empty).
function inputTime(value) {
  if (!value) return null;
  const [date, time] = value.split("T");
  const [y, mo, da] = date.split("-").map(Number);
  const [h, mi, s] = (time + ":0:0").split(":").map(Number);
  return utc() ? Date.UTC(y, mo - 1, da, h, mi, s) : new Date(y, mo - 1, da, h, mi, s).getTime();
}

// -- notices and confirmation ---------------------------------------------------------------------------------------
function notice(text, bad) {
  const p = $("notice");
  p.textContent = text;
  p.className = bad ? "bad" : "ok";
  p.hidden = false;
}

// Resolves true when the operator confirms `text` (an in-page dialog: it names what will happen).
function confirmed(text, verb) {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = verb || "confirm";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

// -- actions: native requests through /api/request ----------------------------------------------------------------------
let session = { actions: false, auth: "none", user: null };

async function native(request) {
  const headers = requestHeaders({ "Content-Type": "application/json" });
  const response = await fetch("/api/request", { method: "POST", headers, body: JSON.stringify(request),
    cache: "no-store" });
  const answer = await response.json().catch(() => ({}));
  if (response.status === 401) {
    loginNeeded();
    throw new Error("log in first: " + ((answer.Error || {}).message || "the gateway asks who you are"));
  }
  if (answer.Error) throw new Error(answer.Error.message);
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return Object.values(answer)[0];
}

// Run `work` (an action), reporting its outcome (null: the operator cancelled); refresh what it changed.
async function act(work, done) {
  try {
    const text = await work();
    if (text === null) return;
    if (text) notice(text, false);
    if (done) done();
    refresh();
  } catch (err) {
    notice(String(err.message || err), true);
  }
}

function utf8(text) {
  return Array.from(encoder.encode(text));
}

// Kafka's default partitioner (murmur2 of the key), as `logway produce` and every Kafka producer use it.
function murmur2(data) {
  const m = 0x5bd1e995;
  let h = (0x9747b28c ^ data.length) >>> 0;
  const n4 = data.length & ~3;
  for (let i = 0; i < n4; i += 4) {
    let k = (data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)) >>> 0;
    k = Math.imul(k, m) >>> 0;
    k = (k ^ (k >>> 24)) >>> 0;
    k = Math.imul(k, m) >>> 0;
    h = (Math.imul(h, m) ^ k) >>> 0;
  }
  const extra = data.length & 3;
  if (extra === 3) h = (h ^ (data[n4 + 2] << 16)) >>> 0;
  if (extra >= 2) h = (h ^ (data[n4 + 1] << 8)) >>> 0;
  if (extra >= 1) {
    h = (h ^ data[n4]) >>> 0;
    h = Math.imul(h, m) >>> 0;
  }
  h = (h ^ (h >>> 13)) >>> 0;
  h = Math.imul(h, m) >>> 0;
  return (h ^ (h >>> 15)) >>> 0;
}

async function refreshSession() {
  try {
    session = await getJSON("/api/console");
    session.known = true;
  } catch (err) {
    return;  // (asked again at the next refresh)
  }
  document.body.classList.toggle("can-act", session.actions);
  $("login").hidden = session.auth !== "login" && !credentials;
  $("login").textContent = credentials ? `logged in as ${session.user}` : "log in";
}

function basic(user, password) {
  // HTTP Basic of UTF-8 text: btoa takes bytes as a string of char codes
  return "Basic " + btoa(String.fromCharCode(...encoder.encode(user + ":" + password)));
}

function login() {
  const dialog = $("login-dialog");
  dialog.addEventListener("close", () => {
    if (dialog.returnValue === "ok") {
      const user = $("login-user").value, password = $("login-password").value, token = $("login-token").value;
      credentials = user ? basic(user, password) : (token ? "Bearer " + token : "");
      $("login-password").value = $("login-token").value = "";
      sessionStorage.setItem("logway-auth", credentials);
      refreshSession().then(refresh);
    }
  }, { once: true });
  dialog.returnValue = "";
  dialog.showModal();
}

// -- status ---------------------------------------------------------------------------------------------------------
async function refreshStatus() {
  const badge = $("status");
  try {
    const response = await fetch("/ready", { cache: "no-store", headers: requestHeaders() });
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

function topicNamed(name) {
  return knownTopics.find((t) => t.name === name);
}

function renderTopics(topics) {
  knownTopics = topics;
  const body = $("topics").tBodies[0];
  const rows = [];
  for (const topic of topics) {
    topic.partitions.forEach((p, i) => {
      const buttons = el("td", { class: "buttons" },
        button("messages", () => browse(topic.name, p.partition), "look", "messages"),
        button("delete records…", () => openTopicPanel(topic.name, "delete-records", p.partition), "",
          "delete-records"));
      if (i === 0) {
        buttons.append(button("produce…", () => openTopicPanel(topic.name, "produce"), "", "produce"),
          button("config…", () => openTopicPanel(topic.name, "config"), "", "config"),
          button("partitions…", () => openTopicPanel(topic.name, "partitions"), "", "partitions"),
          button("delete topic…", () => deleteTopic(topic), "act danger", "delete"));
      }
      rows.push(el("tr", { class: i === 0 ? "first" : "", dataset: { topic: topic.name, partition: p.partition } },
        td(i === 0 ? topic.name : "", "topic"), td(i === 0 ? topic.format : ""), td(p.partition, "num"),
        td(number(p.log_start_offset), "num"), td(number(p.log_end_offset), "num"),
        td(number(p.last_stable_offset), "num"), td(number(p.log_end_offset - p.log_start_offset), "num"),
        td(bytes(p.size_bytes), "num"), td(p.segments, "num"), buttons));
    });
  }
  body.replaceChildren(...rows);
  $("topics-empty").hidden = topics.length > 0;
  fillTopicSelect($("browse-topic"));
  fillPartitionSelect($("browse-partition"), $("browse-topic").value);
}

function fillTopicSelect(select, extra) {
  const current = select.value;
  const names = (extra ? [extra] : []).concat(knownTopics.map((t) => t.name));
  if (names.join("\u0000") !== Array.from(select.options).map((o) => o.value).join("\u0000")) {
    select.replaceChildren(...names.map((name) => el("option", { value: name }, name || "(every topic it committed)")));
    if (names.includes(current)) select.value = current;
  }
}

// The partitions of `topicName` as options (`first`: an option before them, e.g. "by key"); keeps the choice when
// it still exists, else the first option is chosen (never none).
function fillPartitionSelect(select, topicName, first) {
  const topic = topicNamed(topicName);
  const values = (first ? [first[0]] : []).concat(topic ? topic.partitions.map((p) => String(p.partition)) : []);
  if (values.join(",") === Array.from(select.options).map((o) => o.value).join(",")) return;
  const current = select.value;
  select.replaceChildren(...values.map((v) => el("option", { value: v }, first && v === first[0] ? first[1] : v)));
  select.value = values.includes(current) ? current : (values[0] || "");
}

async function createTopic(event) {
  event.preventDefault();
  const name = $("create-name").value.trim();
  const partitions = Number($("create-partitions").value);
  if (!await confirmed(`Create topic ${name} with ${partitions} partition(s)?`, "create")) return;
  act(async () => {
    await native({ CreateTopic: { topic: name, partitions } });
    return `created topic ${name} with ${partitions} partition(s)`;
  }, () => { $("create-topic").hidden = true; });
}

async function deleteTopic(topic) {
  const records = topic.partitions.reduce((n, p) => n + p.log_end_offset - p.log_start_offset, 0);
  if (!await confirmed(`Delete topic ${topic.name}, its ${number(records)} record(s) and the offsets groups ` +
    "committed on it? This cannot be undone.", "delete topic")) return;
  act(async () => {
    await native({ DeleteTopic: { topic: topic.name } });
    return `deleted topic ${topic.name}`;
  }, closeTopicPanel);
}

// -- the topic panel: produce, config, partitions, delete records -------------------------------------------------------
let panelTopic = null;

function openTopicPanel(name, what, partition) {
  panelTopic = name;
  const panel = $("topic-panel");
  for (const id of ["produce", "partitions", "delete-records", "config"]) $(id).hidden = id !== what;
  const titles = { produce: "produce a test message to", partitions: "add partitions to", config: "the config of",
    "delete-records": "delete records of" };
  $("topic-panel-title").textContent = `${titles[what]} ${name}`;
  const topic = topicNamed(name);
  if (what === "produce") fillPartitionSelect($("produce-partition"), name, ["", "by key (as Kafka producers)"]);
  if (what === "partitions") $("partitions-count").value = topic ? topic.partitions.length + 1 : 1;
  if (what === "delete-records") {
    fillPartitionSelect($("delete-records-partition"), name);
    if (partition !== undefined) $("delete-records-partition").value = String(partition);
    const p = topic && topic.partitions.find((q) => String(q.partition) === $("delete-records-partition").value);
    $("delete-records-offset").value = p ? p.log_end_offset : 0;
  }
  if (what === "config") loadConfig(name);
  panel.hidden = false;
  panel.scrollIntoView({ block: "nearest" });
}

function closeTopicPanel() {
  $("topic-panel").hidden = true;
  panelTopic = null;
}

async function produce(event) {
  event.preventDefault();
  const topic = topicNamed(panelTopic);
  if (!topic) return;
  const key = $("produce-key").value;
  const value = $("produce-value").value;
  let partition = $("produce-partition").value;
  partition = partition !== "" ? Number(partition)
    : key ? (murmur2(encoder.encode(key)) & 0x7fffffff) % topic.partitions.length
      : Math.floor(Math.random() * topic.partitions.length);
  const record = { payload: utf8(value), key: key ? utf8(key) : null };
  if (!await confirmed(`Write a record to ${topic.name} partition ${partition}` + (key ? ` with key ${key}` : "") +
    `: ${value}?`, "produce")) return;
  act(async () => {
    const answer = await native({ Produce: { topic: topic.name, partition, records: [record] } });
    return `produced to ${topic.name} partition ${partition} at offset ${answer.offsets[0]}`;
  });
}

async function addPartitions(event) {
  event.preventDefault();
  const name = panelTopic;
  const partitions = Number($("partitions-count").value);
  act(async () => {
    await native({ CreatePartitions: { topic: name, partitions, validate_only: true } });  // refused here if wrong
    if (!await confirmed(`Grow topic ${name} to ${partitions} partitions? Partitions are never removed.`,
      "add partitions")) return null;
    const answer = await native({ CreatePartitions: { topic: name, partitions } });
    return `topic ${name} has ${answer.partitions} partition(s)`;
  }, closeTopicPanel);
}

async function deleteRecords(event) {
  event.preventDefault();
  const name = panelTopic;
  const partition = Number($("delete-records-partition").value);
  const offset = Number($("delete-records-offset").value);
  if (!await confirmed(`Delete every record below offset ${offset} of ${name} partition ${partition}? This ` +
    "cannot be undone.", "delete records")) return;
  act(async () => {
    const answer = await native({ DeleteRecords: { topic: name, partition, offset } });
    return `${name} partition ${partition}: log start offset ${answer.log_start_offset}`;
  }, closeTopicPanel);
}

async function loadConfig(name) {
  try {
    const answer = await native({ DescribeTopicConfig: { topic: name } });
    $("config-table").tBodies[0].replaceChildren(...answer.configs.map((c) => el("tr", { dataset: { name: c.name } },
      td(c.name), td(c.value), td(c.source + (c.read_only ? " (read-only)" : "")), td(c.default),
      el("td", {}, c.source === "topic" ? button("remove override…", () => removeOverride(name, c.name)) : null))));
    const select = $("alter-name");
    const names = answer.configs.filter((c) => !c.read_only).map((c) => c.name);
    select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
  } catch (err) {
    notice(String(err.message || err), true);
  }
}

async function alterConfig(event) {
  event.preventDefault();
  const name = panelTopic;
  const key = $("alter-name").value;
  const value = $("alter-value").value.trim();
  act(async () => {
    await native({ AlterTopicConfig: { topic: name, set: { [key]: value }, validate_only: true } });
    if (!await confirmed(`Set ${key}=${value} on topic ${name}? It applies at once.`, "set")) return null;
    await native({ AlterTopicConfig: { topic: name, set: { [key]: value } } });
    loadConfig(name);
    return `topic ${name}: ${key}=${value}`;
  });
}

async function removeOverride(name, key) {
  if (!await confirmed(`Remove ${key} from topic ${name}? The gateway's default applies again.`, "remove")) return;
  act(async () => {
    await native({ AlterTopicConfig: { topic: name, delete: [key] } });
    loadConfig(name);
    return `topic ${name}: ${key} is the gateway's default again`;
  });
}

// -- groups ---------------------------------------------------------------------------------------------------------
let knownGroups = [];

function membersText(n) {
  return n ? ` (${n} member${n === 1 ? "" : "s"})` : "";
}

function renderGroups(groups) {
  knownGroups = groups;
  const body = $("groups").tBodies[0];
  const rows = [];
  const members = [];
  for (const group of groups) {
    const parts = group.partitions.length ? group.partitions : [null];
    parts.forEach((p, i) => {
      const lag = p ? p.lag : null;
      rows.push(el("tr", { class: i === 0 ? "first" : "", dataset: { group: group.group } },
        td(i === 0 ? group.group : "", "group"),
        td(i === 0 ? group.state + membersText(group.members.length) : ""),
        td(i === 0 ? group.type || "" : ""),
        td(p ? p.topic : ""), td(p ? p.partition : "", "num"), td(p ? number(p.committed) : "", "num"),
        td(p ? number(p.end) : "", "num"),
        td(p ? number(lag) : "", "num lag" + (lag > 0 ? " behind" : "")),
        td(p && p.commit_time_ms ? fmtTime(p.commit_time_ms) : ""),
        el("td", { class: "buttons" }, i === 0 ? button("reset offsets…", () => openReset(group.group)) : null)));
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

// -- resetting a group's offsets: the plan (a dry run) first, as `logway groups reset-offsets` -------------------------
let resetGroup = null;
let resetRequest = null;

function openReset(group) {
  resetGroup = group;
  resetRequest = null;
  $("reset-title").textContent = `reset the offsets of group ${group}`;
  fillTopicSelect($("reset-topic"), "");
  $("reset-plan").hidden = true;
  $("reset-execute").hidden = true;
  $("reset-note").textContent = "The group must be inactive (no live Kafka members). Nothing changes until you " +
    "confirm the plan.";
  $("reset").hidden = false;
  $("reset").scrollIntoView({ block: "nearest" });
}

function resetTarget() {
  const to = $("reset-to").value;
  $("reset-offset-label").hidden = to !== "offset";
  $("reset-time-label").hidden = to !== "timestamp";
}

function resetBody(validateOnly) {
  const to = $("reset-to").value;
  const request = { group_id: resetGroup, to, validate_only: validateOnly };
  if (to === "offset") request.value = Number($("reset-offset").value);
  if (to === "timestamp") {
    request.value = inputTime($("reset-time").value);
    if (request.value === null) throw new Error("give the time to reset to");
  }
  const topic = $("reset-topic").value;
  if (topic) {
    const text = $("reset-partitions").value.trim();
    const partitions = text ? text.split(",").map((s) => Number(s.trim())) : null;
    if (partitions && partitions.some((n) => !Number.isInteger(n) || n < 0)) {
      throw new Error("partitions: numbers separated by commas, e.g. 0,2");
    }
    request.topics = [{ topic, partitions }];
  }
  return { ResetGroupOffsets: request };
}

async function planReset(event) {
  event.preventDefault();
  act(async () => {
    resetRequest = resetBody(false);
    const plan = await native(resetBody(true));
    $("reset-plan").tBodies[0].replaceChildren(...plan.offsets.map((o) => el("tr", {},
      td(o.topic), td(o.partition, "num"), td(number(o.previous_offset), "num"), td(number(o.offset), "num"))));
    $("reset-plan").hidden = false;
    $("reset-execute").hidden = plan.offsets.length === 0;
    $("reset-note").textContent = plan.offsets.length ? "The plan (a dry run: nothing changed yet)."
      : "Nothing to reset: the group has committed no offsets there.";
    return "";
  });
}

async function executeReset() {
  if (!resetRequest) return;
  const count = $("reset-plan").tBodies[0].rows.length;
  if (!await confirmed(`Move the committed offsets of group ${resetGroup} on ${count} partition(s), as planned?`,
    "reset offsets")) return;
  act(async () => {
    const answer = await native(resetRequest);
    return `group ${answer.group_id}: ${answer.offsets.length} offset(s) reset`;
  }, () => { $("reset").hidden = true; });
}

// -- rates ----------------------------------------------------------------------------------------------------------
const charts = new Map();
const AXIS = 34;  // canvas pixels under a chart for its time axis
const RATE_SAMPLES = 180;  // the rates the gateway keeps (/api/rates: the last 3 minutes)

function chartFor(protocol) {
  let chart = charts.get(protocol);
  if (!chart) {
    const canvas = el("canvas", { width: 600, height: 180 + AXIS });
    const legend = el("div", { class: "legend" });
    const box = el("div", { class: "chart", dataset: { protocol } }, el("h3", {}, protocol), canvas, legend);
    $("rates").append(box);
    chart = { canvas, legend };
    charts.set(protocol, chart);
  }
  return chart;
}

// Lines of per-second rates over `times` (unix seconds) in the window of `span` seconds up to the newest, with a
// time axis: a tick and a label every 30 s.
function draw(canvas, times, span, series) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height - AXIS, pad = 6;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  ctx.strokeStyle = "#e3e6ec";
  ctx.lineWidth = 1;
  for (const f of [0, 0.5, 1]) {
    const y = pad + (h - 2 * pad) * f;
    ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(w, y); ctx.stroke();
  }
  const t1 = times.length ? times[times.length - 1] : Date.now() / 1000, t0 = t1 - span;
  const x = (t) => (w * (t - t0)) / span;
  ctx.fillStyle = "#6b7385";
  ctx.font = "20px system-ui, sans-serif";
  ctx.strokeStyle = "#b8bfcc";
  let free = 0;  // where the next label may start (labels never overlap)
  for (let t = Math.ceil(t0 / 30) * 30; t <= t1; t += 30) {
    const at = x(t);
    ctx.beginPath(); ctx.moveTo(at, h); ctx.lineTo(at, h + 8); ctx.stroke();
    const label = clock(t * 1000);
    const width = ctx.measureText(label).width;
    const left = Math.min(Math.max(at - width / 2, 0), w - width);
    if (left < free) continue;
    ctx.fillText(label, left, h + 30);
    free = left + width + 12;
  }
  for (const s of series) {
    const n = Math.min(s.values.length, times.length);
    if (n < 2) continue;
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 3;
    ctx.beginPath();
    for (let i = 0; i < n; i++) {
      const y = h - pad - ((h - 2 * pad) * s.values[i]) / max;
      if (i === 0) ctx.moveTo(x(times[i]), y); else ctx.lineTo(x(times[i]), y);
    }
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
    draw(chart.canvas, rates.t, RATE_SAMPLES * rates.interval_s, [{ values: s.records_in, color: "#2f6fde" },
      { values: s.records_out, color: "#d9731a" }]);
    chart.legend.replaceChildren(
      el("span", { class: "in" }, `in ${number(Math.round(last(s.records_in)))} rec/s`), " · ",
      el("span", { class: "out" }, `out ${number(Math.round(last(s.records_out)))} rec/s`), " · ",
      `${bytes(Math.round(last(s.bytes_in)))}/s in, ${bytes(Math.round(last(s.bytes_out)))}/s out`);
  }
}

// -- message browser and search -------------------------------------------------------------------------------------
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
let lastQuery = null;

function renderMessages() {
  const body = $("messages").tBodies[0];
  if (!lastMessages) return;
  const hex = $("browse-hex").checked;
  body.replaceChildren(...lastMessages.messages.map((m) => el("tr", { dataset: { offset: m.offset } },
    td(m.offset, "num"),
    td(fmtTime(m.timestamp)),
    cell(m.key, hex), cell(m.value, hex),
    el("td", { class: "bytes" }, ...m.headers.flatMap((h, i) => [i ? "; " : "", `${h.key}=`,
      ...[].concat(shown(h.value, hex))])))));
}

function browseMode() {
  const from = $("browse-from").value;
  $("browse-offset-label").hidden = from !== "offset";
  $("browse-since-label").hidden = from !== "time";
  $("browse-until-label").hidden = from !== "time";
}

function browseQuery() {
  const query = new URLSearchParams();
  query.set("limit", String(Math.min(500, Math.max(1, Number($("browse-last").value) || 20))));
  const from = $("browse-from").value;
  if (from === "offset") query.set("offset", String(Math.max(0, Number($("browse-offset").value) || 0)));
  if (from === "time") {
    const since = inputTime($("browse-since").value), until = inputTime($("browse-until").value);
    if (since !== null) query.set("from_time", String(since));
    if (until !== null) query.set("to_time", String(until));
    if (since === null) query.set("offset", "0");
  }
  if ($("browse-key").value) query.set("key", $("browse-key").value);
  if ($("browse-contains").value) query.set("contains", $("browse-contains").value);
  return query;
}

async function browse(topic, partition) {
  if (topic !== undefined) {
    $("browse-topic").value = topic;
    fillPartitionSelect($("browse-partition"), topic);
    $("browse-partition").value = String(partition);
    $("browse-from").value = "newest";
    browseMode();
  }
  const t = $("browse-topic").value, p = $("browse-partition").value;
  if (!t || p === "") return;
  lastQuery = { t, p, query: browseQuery() };
  await show(lastQuery.query);
}

// The next page: older records when the newest were shown, else the records after the last shown.
async function more() {
  if (!lastQuery || !lastMessages) return;
  const query = new URLSearchParams(lastQuery.query);
  const scanned = lastMessages.scanned;
  if (query.has("offset") || query.has("from_time")) {
    query.delete("from_time");
    query.set("offset", String(scanned.to));
  } else {
    query.set("before", String(scanned.from));
  }
  lastQuery.query = query;
  await show(query);
}

async function show(query) {
  const { t, p } = lastQuery;
  const status = $("browse-status");
  status.textContent = "loading…";
  try {
    const path = `/api/topics/${encodeURIComponent(t)}/partitions/${encodeURIComponent(p)}/messages?${query}`;
    lastMessages = await getJSON(path);
    const s = lastMessages.scanned;
    const filtered = query.has("key") || query.has("contains") || query.has("to_time");
    status.textContent = `${t}-${p}: ${lastMessages.messages.length} record(s)` +
      (filtered ? " found" : "") + `, offsets ${number(s.from)}–${number(s.to)} looked at` +
      ` (the log ends at ${number(lastMessages.end_offset)}; ${lastMessages.format})`;
    $("browse-more").hidden = s.complete;
    $("browse-more").textContent = query.has("offset") || query.has("from_time") ? "more…" : "older…";
    renderMessages();
  } catch (err) {
    status.textContent = String(err.message || err);
  }
}

// -- loops ----------------------------------------------------------------------------------------------------------
let lastRates = null;
let updated = null;

async function refresh() {
  await refreshStatus();
  if (!session.known) await refreshSession();
  try {
    const [topics, groups] = await Promise.all([getJSON("/api/topics"), getJSON("/api/groups")]);
    renderTopics(topics.topics);
    renderGroups(groups.groups);
    updated = Date.now();
    $("updated").textContent = "updated " + fmtTime(updated);
  } catch (err) {
    $("updated").textContent = String(err.message || err);
  }
}

async function refreshRates() {
  try {
    lastRates = await getJSON("/api/rates");
    renderRates(lastRates);
  } catch (err) {
    /* shown by the status badge */
  }
}

function every(ms, fn) {
  const tick = async () => { await fn(); setTimeout(tick, ms); };
  tick();
}

function closeButtons(panel, onclose) {
  for (const b of panel.querySelectorAll("button.close")) {
    b.addEventListener("click", () => { panel.hidden = true; if (onclose) onclose(); });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("zone").value = localStorage.getItem("logway-zone") || "local";
  $("zone").addEventListener("change", () => {
    localStorage.setItem("logway-zone", $("zone").value);
    renderMessages();
    renderGroups(knownGroups);
    if (lastRates) renderRates(lastRates);
    if (updated) $("updated").textContent = "updated " + fmtTime(updated);
  });
  $("login").addEventListener("click", login);
  $("new-topic").addEventListener("click", () => { $("create-topic").hidden = false; $("create-name").focus(); });
  $("create-topic").addEventListener("submit", createTopic);
  closeButtons($("create-topic"));
  closeButtons($("topic-panel"), closeTopicPanel);
  $("produce").addEventListener("submit", produce);
  $("partitions").addEventListener("submit", addPartitions);
  $("delete-records").addEventListener("submit", deleteRecords);
  $("alter").addEventListener("submit", alterConfig);
  $("reset").addEventListener("submit", planReset);
  $("reset-to").addEventListener("change", resetTarget);
  $("reset-execute").addEventListener("click", executeReset);
  closeButtons($("reset"));
  $("browse").addEventListener("submit", (event) => { event.preventDefault(); browse(); });
  $("browse-topic").addEventListener("change", () => fillPartitionSelect($("browse-partition"),
    $("browse-topic").value));
  $("browse-from").addEventListener("change", browseMode);
  $("browse-hex").addEventListener("change", renderMessages);
  $("browse-more").addEventListener("click", more);
  every(REFRESH_MS, refresh);
  every(RATES_MS, refreshRates);
});
