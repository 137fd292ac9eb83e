// The playground's script: plain browser JavaScript, no build step. It posts the code to
// POST /v1/executions and reads the Server-Sent Events from the response body as they arrive
// (EventSource cannot POST, so the stream is parsed here). Every error is shown once, in plain
// words, with the field it is about marked.

const $ = (selector) => document.querySelector(selector);
const codeInput = $('#code');
const gutter = $('#gutter');
const codeError = $('#code-error');
const runButton = $('#run');
const cancelButton = $('#cancel');
const outcome = $('#outcome');
const results = $('#results');
const eventList = $('#events');
const eventCount = $('#event-count');
const statsBody = $('#stats tbody');
const narrowScreen = window.matchMedia('(max-width: 900px)');
let running;

/**
 * What each code means, for a person: refusals before a run (the request never ran) and the
 * ways a run ends. Data, so every code reads the same wherever it appears.
 */
const plainWords = {
  VALIDATION: 'The request was refused',
  RATE_LIMITED: 'Too many runs for this user',
  BUDGET_EXHAUSTED: 'This conversation turn has used all its runs',
  CAPACITY: 'The server is busy running other code',
  UNAVAILABLE: 'The server cannot take runs right now',
  CRASH: 'The sandbox failed; the server carried on',
  TIMEOUT: 'Stopped: the code ran past its time limit',
  OOM: 'Stopped: the code went over its memory limit',
  LIMIT_EXCEEDED: 'Stopped: the code went over a limit',
  RUNTIME: 'Your code threw an error',
  SYNTAX: 'Your code does not parse',
  CANCELLED: 'Cancelled',
};

init().catch((error) => showOutcome('error', 'Could not load the playground', String(error)));

async function init() {
  const [catalogue, limits, tools] = await Promise.all([
    getJson('/v1/examples'),
    getJson('/v1/limits'),
    getJson('/v1/tools'),
  ]);
  for (const example of catalogue.examples) addPicker('#examples', example, '');
  for (const attack of catalogue.attacks) addPicker('#attacks', attack, 'attack');
  showServerLimits(limits);
  showTools(tools.declarations);
  runButton.addEventListener('click', () => run());
  cancelButton.addEventListener('click', () => running?.abort());
  codeInput.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) run();
  });
  codeInput.addEventListener('input', () => {
    clearCodeError();
    updateGutter();
  });
  codeInput.addEventListener('scroll', () => {
    gutter.scrollTop = codeInput.scrollTop;
  });
  for (const input of document.querySelectorAll('input')) {
    input.addEventListener('input', () => unmark(input));
  }
  updateGutter();
}

async function getJson(path) {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

/** States the server's limits, and uses its ceilings as the limit inputs' placeholders. */
function showServerLimits({ admission, execution }) {
  for (const input of document.querySelectorAll('#limits input')) {
    const ceiling = execution[input.name];
    if (ceiling !== undefined) {
      input.placeholder = String(ceiling);
      input.max = String(ceiling);
    }
  }
  const ceilings = `A run may ask for at most ${execution.timeoutMs / 1000} s (timeoutMs) and ${execution.memoryMb} MiB (memoryMb): limits can be tightened here, never loosened.`;
  if (!admission) {
    $('#server-limits').textContent = ceilings;
    return;
  }
  const { ratePerUser, windowMs, burst, maxConcurrentPerUser, maxExecutionsPerTurn } = admission;
  const window = windowMs === 60000 ? 'a minute' : `per ${windowMs / 1000} s`;
  $('#server-limits').textContent =
    `This server admits, per user, ${ratePerUser} runs ${window} (${burst} back to back), ` +
    `${maxConcurrentPerUser} at once, and ${maxExecutionsPerTurn} per conversation turn. ${ceilings}`;
}

/** Lists the engine's tools by name, with the TypeScript a model would be given for them. */
function showTools(declarations) {
  const names = [...declarations.matchAll(/^ {2}([\w$]+)\(input/gm)].map((match) => match[1]);
  if (names.length === 0) return;
  $('#tool-names').textContent = names.join(', ');
  $('#tool-declarations').textContent = declarations;
  const details = $('#tools');
  details.hidden = false;
  // Open where there is room; on a phone it would push the editor a screen down.
  details.open = !narrowScreen.matches;
}

function addPicker(container, item, className) {
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = item.title;
  button.dataset.id = item.id;
  if (className) button.className = className;
  button.addEventListener('click', () => {
    codeInput.value = item.code;
    updateGutter();
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
  // On a phone the results are below the editor: bring them up, or a tap shows nothing.
  if (narrowScreen.matches) results.scrollIntoView({ block: 'start' });
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
    if (!response.ok) await showRefusal(response);
    else for await (const event of readEvents(response.body)) render(event);
  } catch (error) {
    if (controller.signal.aborted)
      showOutcome('error', 'Cancelled by you: the server ended the execution.');
    else showOutcome('error', 'The request failed', String(error));
  } finally {
    if (running === controller) {
      running = undefined;
      runButton.disabled = false;
      cancelButton.disabled = true;
      if (narrowScreen.matches) results.scrollIntoView({ block: 'start' });
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
  // The error's words are in the outcome above; the log names only its code.
  if (event.type === 'status') message.textContent = event.message;
  else if (event.type === 'result') message.textContent = JSON.stringify(event.payload);
  else message.textContent = event.code;
  item.append(type, message);
  eventList.append(item);
  // Scroll the list, not the page: the page stays where the reader put it.
  eventList.scrollTop = eventList.scrollHeight;
  eventCount.textContent = `(${eventList.children.length})`;
  if (event.type === 'result') {
    showOutcome('result', 'Result', JSON.stringify(event.payload, null, 2));
    showStats(event.stats);
  } else if (event.type === 'error') {
    const syntax = event.code === 'RUNTIME' && event.details?.name === 'SyntaxError';
    const words = plainWords[syntax ? 'SYNTAX' : event.code] ?? event.code;
    // The location has its own box under the editor; the message need not repeat it.
    const message = event.details?.location
      ? event.message.replace(/ \(line \d+, column \d+\)$/, '')
      : event.message;
    showOutcome('error', words, message, event.code);
    showCodeError(event.details);
    showStats(event.stats);
  }
}

async function showRefusal(response) {
  const body = await response.json().catch(() => undefined);
  const error = body?.error ?? { code: 'CRASH', message: `HTTP ${response.status}` };
  const issues = error.details?.issues ?? [];
  const retry = Number(response.headers.get('retry-after'));
  let detail;
  if (issues.length > 0) {
    for (const issue of issues) mark(issue.path);
    detail = issues
      .map((issue) => `${issue.path || 'the body'}: ${issue.message} (you sent ${issue.received})`)
      .join('\n');
  } else if (retry > 0) {
    // One unit: the Retry-After header's seconds, not the milliseconds of the message.
    detail = `Try again in ${retry} s.`;
  } else {
    detail = error.message;
  }
  showOutcome(
    'refused',
    `${plainWords[error.code] ?? error.code} (HTTP ${response.status})`,
    detail,
    error.code,
  );
}

/** The input a refusal's field path is about: `code`, `limits.timeoutMs`, `headers.x-user-id`. */
function inputFor(path) {
  if (path === 'code') return codeInput;
  if (path === 'headers.x-user-id') return $('#user');
  const [group, name] = path.split('.');
  if (group === 'limits' && name)
    return document.querySelector(`#limits input[name="${CSS.escape(name)}"]`);
  return null;
}

function mark(path) {
  const input = inputFor(path);
  if (input) input.setAttribute('aria-invalid', 'true');
}

function unmark(input) {
  input.removeAttribute('aria-invalid');
}

function showOutcome(kind, title, detail, code) {
  outcome.dataset.outcome = kind;
  if (code) outcome.dataset.code = code;
  else delete outcome.dataset.code;
  const headline = document.createElement('strong');
  headline.textContent = title;
  outcome.replaceChildren(headline);
  if (code) {
    const badge = document.createElement('code');
    badge.className = 'code';
    badge.textContent = code;
    outcome.append(' ', badge);
  }
  if (detail) {
    const pre = document.createElement('pre');
    pre.textContent = detail;
    outcome.append(pre);
  }
}

/** Line numbers beside the code, so an error's line can be found (and marked) at a glance. */
function updateGutter(errorLine) {
  const lines = codeInput.value.split('\n').length;
  const numbers = [];
  for (let line = 1; line <= lines; line++) {
    numbers.push(line === errorLine ? `<mark>${line}</mark>` : String(line));
  }
  // Only digits and <mark>: nothing from the code reaches innerHTML.
  gutter.innerHTML = numbers.join('\n');
  gutter.scrollTop = codeInput.scrollTop;
}

/** Marks where in the code an error happened, from the event's `details.location`. */
function showCodeError(details) {
  const location = details?.location;
  if (!location || typeof location.line !== 'number') return;
  const { line, column } = location;
  updateGutter(line);
  codeInput.setAttribute('aria-invalid', 'true');
  const where = document.createElement('strong');
  where.textContent = `Line ${line}, column ${column}`;
  codeError.replaceChildren(where);
  if (typeof details.sourceLine === 'string') {
    const pre = document.createElement('pre');
    const caret = `${' '.repeat(Math.max(0, column - 1))}^`;
    pre.textContent = `${details.sourceLine}\n${caret}`;
    codeError.append(pre);
  }
  codeError.hidden = false;
  // Put the cursor on the spot, without scrolling the page to the editor.
  const offset = offsetOf(codeInput.value, line, column);
  codeInput.setSelectionRange(offset, offset);
}

function offsetOf(text, line, column) {
  const lines = text.split('\n');
  let offset = 0;
  for (let index = 0; index < line - 1 && index < lines.length; index++) {
    offset += lines[index].length + 1;
  }
  return Math.min(text.length, offset + Math.max(0, column - 1));
}

function clearCodeError() {
  codeError.hidden = true;
  codeError.replaceChildren();
  unmark(codeInput);
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
  for (const input of document.querySelectorAll('[aria-invalid]')) unmark(input);
  clearCodeError();
  updateGutter();
}
