// The plansmith playground: plan a request against the server's catalog (or a pasted one) and
// show what the planner decided and why. It calls the public API only (/v1/models, /v1/tools,
// /v1/plan) and builds every piece of text with textContent, never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);

const state = {
  key: sessionStorage.getItem('plansmith-key') || '',
  serverTools: null, // the server's catalog as OpenAI tools (GET /v1/tools)
  catalog: null, // a catalog the user chose to plan against instead, as parsed JSON
  recent: [], // {request, tools, choice, result}, oldest first; this page only
};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') node.className = v;
    else if (k === 'text') node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) node.append(c);
  }
  return node;
}

// One API call; the body, parsed, with the HTTP status. Network failures come back as status 0.
async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (state.key) headers.Authorization = 'Bearer ' + state.key;
  let resp;
  try {
    resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    return { status: 0, data: { error: { message: 'cannot reach the server: ' + e.message } } };
  }
  let data = null;
  try {
    data = await resp.json();
  } catch (_) {
    data = { error: { message: 'the server answered ' + resp.status + ' without JSON' } };
  }
  return { status: resp.status, data };
}

function needKey(message) {
  $('key-panel').hidden = false;
  $('key-message').textContent = message || '';
  $('key').focus();
}

async function loadServer() {
  const models = await api('GET', '/v1/models');
  if (models.status === 401) {
    needKey(models.data.error.message);
    return;
  }
  $('key-panel').hidden = true;
  const model = models.data && models.data.data && models.data.data[0];
  if (model) $('model').textContent = model.id;
  const tools = await api('GET', '/v1/tools');
  if (tools.status === 200) {
    state.serverTools = tools.data.tools;
    if (state.catalog === null) showServerCatalog();
  }
}

function showServerCatalog() {
  $('catalog').value = JSON.stringify(state.serverTools, null, 2);
  $('catalog-label').textContent = '· server’s, ' + state.serverTools.length + ' tools';
  $('catalog-error').hidden = true;
}

function catalogError(message) {
  const box = $('catalog-error');
  box.textContent = message;
  box.hidden = false;
  $('catalog-panel').open = true;
}

function useCatalog() {
  let parsed;
  try {
    parsed = JSON.parse($('catalog').value);
  } catch (e) {
    catalogError('not JSON: ' + e.message);
    return;
  }
  state.catalog = parsed;
  $('catalog-error').hidden = true;
  const n = Array.isArray(parsed) ? parsed.length + (parsed.length === 1 ? ' tool' : ' tools') : 'one object';
  $('catalog-label').textContent = '· yours, ' + n;
  if ($('request').value.trim()) plan();
}

function resetCatalog() {
  state.catalog = null;
  if (state.serverTools) showServerCatalog();
}

async function plan() {
  const text = $('request').value.trim();
  if (!text) return;
  const body = { request: text };
  const choice = $('tool-choice').value;
  if (choice !== 'auto') body.tool_choice = choice;
  if (state.catalog !== null) body.tools = state.catalog;
  const result = $('result');
  result.replaceChildren(el('p', { class: 'muted', text: 'planning…' }));
  $('plan').disabled = true;
  const resp = await api('POST', '/v1/plan', body);
  $('plan').disabled = false;
  if (resp.status === 200) {
    const entry = { request: text, tools: state.catalog, result: resp.data };
    state.recent.push(entry);
    show(entry);
    renderRecent();
    return;
  }
  const err = (resp.data && resp.data.error) || { message: 'unknown error' };
  if (resp.status === 401) needKey(err.message);
  const param = err.param || '';
  // The path is shown on its own; drop its repetition at the end of the message.
  const message = param && err.message.endsWith(' at ' + param)
    ? err.message.slice(0, -(' at ' + param).length)
    : err.message;
  if (param === 'tools' || param.startsWith('tools.') || param.startsWith('tools[')) {
    catalogError(param + ': ' + message);
  }
  result.replaceChildren(
    el('div', { class: 'card error-card', role: 'alert' },
      el('p', { class: 'outcome' },
        el('span', { class: 'badge bad', text: resp.status ? 'HTTP ' + resp.status : 'offline' }),
        ' ',
        el('span', { text: err.code || err.type || 'error' })),
      el('p', { class: 'error', text: message }),
      param ? el('p', { class: 'muted' }, 'at ', el('code', { class: 'param', text: param })) : null));
}

// What happened, in words: accepted, a no-call answer, escalated (with why), or the teacher's.
function outcomeOf(r) {
  if (r.source === 'teacher') {
    const detail = [r.harvested ? 'harvested for training' : null, r.reason].filter(Boolean).join(' · ');
    return { cls: 'teacher', label: 'answered by the teacher', detail };
  }
  if (r.escalated) return { cls: 'escalated', label: 'escalated', detail: r.reason };
  if (r.calls.length === 0) return { cls: 'accepted', label: 'accepted · no call', detail: r.reason };
  return { cls: 'accepted', label: 'accepted', detail: null };
}

// Confidence is a log-probability (0 = certain). The bar shows -log10(-c) from 1e1 to 1e-6,
// so floors near zero (the usual case) are not squeezed against the right edge.
function barPos(c) {
  if (c === null || c === undefined) return 0;
  if (c >= 0) return 1;
  const x = 1 - (Math.log10(-c) + 6) / 7;
  return Math.min(1, Math.max(0, x));
}

function fmt(x) {
  if (x === null || x === undefined) return '−∞';
  if (Math.abs(x) > 1e30) return x > 0 ? 'unreachable' : 'none';
  if (x === 0) return '0';
  return Math.abs(x) < 0.001 ? x.toExponential(2) : x.toFixed(4);
}

function confidenceBar(conf, floor) {
  const bar = el('div', { class: 'bar', role: 'img', 'aria-label': 'confidence ' + fmt(conf) + ', floor ' + fmt(floor) });
  const fill = el('div', { class: 'fill' + (conf !== null && conf >= floor ? ' ok' : ' low') });
  fill.style.width = (barPos(conf) * 100).toFixed(1) + '%';
  const mark = el('div', { class: 'floor', title: 'floor ' + fmt(floor) });
  mark.style.left = (barPos(floor) * 100).toFixed(1) + '%';
  bar.append(fill, mark);
  return el('div', { class: 'confidence' },
    bar,
    el('p', { class: 'muted small' },
      'confidence ', el('b', { text: fmt(conf) }), ' · floor ', el('b', { text: fmt(floor) }),
      ' (log-probability; 0 is certain, plans below the floor escalate)'));
}

// Every string value in the arguments, with its path (`target.label`, `items[0]`).
function stringLeaves(value, path, out) {
  if (typeof value === 'string') out.push({ path, value });
  else if (Array.isArray(value)) value.forEach((v, i) => stringLeaves(v, path + '[' + i + ']', out));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) stringLeaves(v, path ? path + '.' + k : k, out);
  }
  return out;
}

// Where each copied value sits in the request (case-insensitive; longest first, no overlaps).
function copiedSpans(request, calls) {
  const lower = request.toLowerCase();
  const found = [];
  calls.forEach((call, i) => {
    for (const leaf of stringLeaves(call.arguments || {}, '', [])) {
      const needle = leaf.value.trim().toLowerCase();
      if (needle.length === 0) continue;
      let at = lower.indexOf(needle);
      while (at >= 0 && found.some((s) => at < s.end && s.start < at + needle.length)) {
        at = lower.indexOf(needle, at + 1);
      }
      if (at >= 0) found.push({ start: at, end: at + needle.length, call: i, path: leaf.path });
    }
  });
  return found.sort((a, b) => a.start - b.start);
}

function highlighted(request, spans) {
  const p = el('p', { class: 'request-text' });
  let at = 0;
  for (const s of spans) {
    p.append(request.slice(at, s.start));
    p.append(el('mark', { class: 'copied', title: 'call ' + (s.call + 1) + ': ' + s.path, text: request.slice(s.start, s.end) }));
    at = s.end;
  }
  p.append(request.slice(at));
  return p;
}

function callCard(call, i, spans) {
  const copied = new Set(spans.filter((s) => s.call === i).map((s) => s.path));
  const args = el('dl', { class: 'args' });
  const leaves = [];
  const walk = (value, path) => {
    if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length) {
      for (const [k, v] of Object.entries(value)) walk(v, path ? path + '.' + k : k);
    } else {
      leaves.push({ path, value });
    }
  };
  walk(call.arguments || {}, '');
  for (const { path, value } of leaves) {
    if (!path) continue;
    const isCopied = copied.has(path);
    args.append(
      el('dt', { text: path }),
      el('dd', { class: isCopied ? 'copied' : '' },
        el('code', { text: typeof value === 'string' ? value : JSON.stringify(value) }),
        isCopied ? el('span', { class: 'tag', text: 'from the request' }) : null));
  }
  if (!args.children.length) args.append(el('dd', { class: 'muted', text: 'no arguments' }));
  return el('article', { class: 'card call' },
    el('h3', {}, el('span', { class: 'muted', text: (i + 1) + '. ' }), el('span', { class: 'tool', text: call.name })),
    args);
}

function hopsTable(r) {
  const rows = r.hops.map((h) => el('tr', { class: h.hop === r.hop ? 'answered' : '' },
    el('td', { text: h.hop }),
    el('td', { text: fmt(h.confidence) }),
    el('td', { text: fmt(h.floor) }),
    el('td', { text: h.accepted ? 'accepted' : 'passed on' }),
    el('td', { text: h.reason || '' }),
    el('td', { text: h.latency_ms.toFixed(1) + ' ms' })));
  return el('table', { class: 'hops' },
    el('caption', { text: 'Cascade: ' + (r.hop ? 'answered by ' + r.hop : 'no hop answered') }),
    el('thead', {}, el('tr', {}, ...['hop', 'confidence', 'floor', 'decision', 'reason', 'time'].map((t) => el('th', { text: t })))),
    el('tbody', {}, ...rows));
}

function show(entry) {
  const r = entry.result;
  const o = outcomeOf(r);
  const spans = copiedSpans(entry.request, r.calls);
  const parts = [
    el('p', { class: 'outcome' },
      el('span', { class: 'badge ' + o.cls, text: o.label }),
      o.detail ? el('span', { class: 'reason', text: o.detail }) : null,
      el('span', { class: 'muted latency', text: r.latency_ms.toFixed(1) + ' ms' + (r.queue_ms > 1 ? ' (+' + r.queue_ms.toFixed(1) + ' ms queued)' : '') })),
    highlighted(entry.request, spans),
    confidenceBar(r.confidence, r.floor),
  ];
  if (r.hops && r.hops.length) parts.push(hopsTable(r));
  if (r.spoken_text) parts.push(el('p', { class: 'spoken' }, el('span', { class: 'muted', text: 'says: ' }), r.spoken_text));
  parts.push(...r.calls.map((c, i) => callCard(c, i, spans)));
  $('result').replaceChildren(...parts);
}

// A trace per request that got an answer (accepted, or the teacher's), ready for `plansmith
// train`; escalated requests with no answer are left out (an empty plan would teach "no call").
function tracesJsonl() {
  return state.recent
    .filter((e) => e.result.source === 'teacher' || (!e.result.escalated && e.result.source === 'model'))
    .map((e) => {
      const t = { request: e.request, calls: e.result.calls, source: 'harvest' };
      if (e.tools !== null) t.tools = e.tools;
      if (e.result.spoken_text) t.spoken_text = e.result.spoken_text;
      return JSON.stringify(t);
    })
    .join('\n');
}

function renderRecent() {
  const list = $('recent');
  list.replaceChildren(...state.recent.slice().reverse().map((e) => {
    const o = outcomeOf(e.result);
    const names = e.result.calls.map((c) => c.name).join(', ');
    const item = el('li', { tabindex: '0', title: 'show this result again' },
      el('span', { class: 'badge small ' + o.cls, text: o.label }), ' ',
      el('span', { class: 'req', text: e.request }),
      names ? el('span', { class: 'muted', text: ' → ' + names }) : null);
    const again = () => { $('request').value = e.request; show(e); };
    item.addEventListener('click', again);
    item.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') again(); });
    return item;
  }));
  const lines = tracesJsonl();
  const n = lines ? lines.split('\n').length : 0;
  $('download').disabled = n === 0;
  $('download').textContent = 'Download ' + n + ' trace' + (n === 1 ? '' : 's') + ' (JSONL)';
}

function download() {
  const blob = new Blob([tracesJsonl() + '\n'], { type: 'application/x-ndjson' });
  const a = el('a', { href: URL.createObjectURL(blob), download: 'plansmith-playground.jsonl' });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

// For scripts driving the page (and its browser test): the downloadable traces.
window.plansmithTraces = tracesJsonl;

document.addEventListener('DOMContentLoaded', () => {
  $('plan-form').addEventListener('submit', (ev) => { ev.preventDefault(); plan(); });
  $('request').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      plan();
    }
  });
  $('catalog').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      useCatalog();
    }
  });
  $('catalog-use').addEventListener('click', useCatalog);
  $('catalog-reset').addEventListener('click', resetCatalog);
  $('download').addEventListener('click', download);
  $('key-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.key = $('key').value.trim();
    sessionStorage.setItem('plansmith-key', state.key);
    loadServer();
  });
  loadServer();
});
