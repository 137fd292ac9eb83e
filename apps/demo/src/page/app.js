// The playground's script: plain browser JavaScript, no build step. It posts the code to
// POST /v1/executions and reads the Server-Sent Events from the response body as they arrive
// (EventSource cannot POST, so the stream is parsed here).

const $ = (selector) => document.querySelector(selector);
const codeInput = $('#code');
const runButton = $('#run');
const cancelButton = $('#cancel');
const outcome = $('#outcome');
const eventList = $('#events');
const eventCount = $('#event-count');
const statsBody = $('#stats tbody');
let running;

init().catch((error) => showOutcome('error', 'Could not load the examples', String(error)));

async function init() {
  const response = await fetch('/v1/examples');
  const { examples, attacks } = await response.json();
  for (const example of examples) addPicker('#examples', example, '');
  for (const attack of attacks) addPicker('#attacks', attack, 'attack');
  runButton.addEventListener('click', () => run());
  cancelButton.addEventListener('click', () => running?.abort());
  codeInput.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) run();
  });
}

function addPicker(container, item, className) {
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = item.title;
  button.dataset.id = item.id;
  if (className) button.className = className;
  button.addEventListener('click', () => {
    codeInput.value = item.code;
    setLimits(item.limits);
    run();
  });
  $(container).append(button);
}

function setLimits(limits) {
  for (const input of document.querySelectorAll('#limits input')) {
    input.value = limits[input.name] ?? '';
  }
}

function readLimits() {
  const limits = {};
  for (const input of document.querySelectorAll('#limits input')) {
    if (input.value !== '') limits[input.name] = Number(input.value);
  }
  return limits;
}

async function run() {
  running?.abort();
  const controller = new AbortController();
  running = controller;
  reset();
  showOutcome('running', 'Running…');
  runButton.disabled = true;
  cancelButton.disabled = false;
  try {
    const response = await fetch('/v1/executions', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'x-user-id': $('#user').value,
      },
      body: JSON.stringify({ code: codeInput.value, limits: readLimits() }),
      signal: controller.signal,
    });
    if (!response.ok) return showRefusal(response);
    for await (const event of readEvents(response.body)) render(event);
  } catch (error) {
    if (controller.signal.aborted)
      showOutcome('error', 'Cancelled by you: the server ended the execution.');
    else showOutcome('error', 'Request failed', String(error));
  } finally {
    if (running === controller) {
      running = undefined;
      runButton.disabled = false;
      cancelButton.disabled = true;
    }
  }
}

/** Yields each `data:` payload of an SSE body, parsed, as events complete. */
async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  while (true) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end = buffer.indexOf('\n\n');
    while (end !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n');
      if (data) yield JSON.parse(data);
      end = buffer.indexOf('\n\n');
    }
  }
}

function render(event) {
  const item = document.createElement('li');
  item.dataset.type = event.type;
  const type = document.createElement('span');
  type.className = 'type';
  type.textContent = event.type === 'status' ? event.source : event.type;
  const message = document.createElement('span');
  message.className = 'message';
  if (event.type === 'status') message.textContent = event.message;
  else if (event.type === 'result') message.textContent = JSON.stringify(event.payload);
  else message.textContent = `${event.code}: ${event.message}`;
  item.append(type, message);
  eventList.append(item);
  item.scrollIntoView({ block: 'nearest' });
  eventCount.textContent = `(${eventList.children.length})`;
  if (event.type === 'result') {
    showOutcome('result', 'Result', JSON.stringify(event.payload, null, 2));
    showStats(event.stats);
  } else if (event.type === 'error') {
    showOutcome('error', `${event.code}: ${event.message}`, undefined, event.code);
    showStats(event.stats);
  }
}

async function showRefusal(response) {
  const body = await response
    .json()
    .catch(() => ({ error: { code: 'HTTP', message: response.statusText } }));
  const { code, message, details } = body.error;
  const retry = response.headers.get('retry-after');
  const extra = [
    `HTTP ${response.status}${retry ? `, retry after ${retry} s` : ''}`,
    ...(details?.issues ?? []).map(
      (issue) => `${issue.path}: ${issue.message} (got ${issue.received})`,
    ),
  ].join('\n');
  showOutcome('refused', `${code}: ${message}`, extra, code);
}

function showOutcome(kind, title, detail, code) {
  outcome.dataset.outcome = kind;
  if (code) outcome.dataset.code = code;
  else delete outcome.dataset.code;
  outcome.textContent = title;
  if (detail) {
    const pre = document.createElement('pre');
    pre.textContent = detail;
    outcome.append(pre);
  }
}

function showStats(stats) {
  statsBody.replaceChildren();
  if (!stats) return;
  const rows = [
    ['wall time', `${Math.round(stats.wallMs)} ms`],
    ['CPU time', `${Math.round(stats.cpuMs)} ms`],
    ['heap used', formatBytes(stats.heapUsedBytes)],
    ['data requests', stats.dataRequests],
    ['data received', formatBytes(stats.dataBytes)],
    ['status events', `${stats.statusEvents} (${stats.statusDropped} dropped)`],
    ['status bytes', formatBytes(stats.statusBytes)],
    ['result size', formatBytes(stats.resultBytes)],
  ];
  for (const [name, value] of rows) {
    const row = statsBody.insertRow();
    row.insertCell().textContent = name;
    row.insertCell().textContent = String(value);
  }
}

function formatBytes(bytes) {
  if (typeof bytes !== 'number') return '—';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function reset() {
  eventList.replaceChildren();
  statsBody.replaceChildren();
  eventCount.textContent = '';
}
