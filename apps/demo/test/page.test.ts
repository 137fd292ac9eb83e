/// <reference lib="dom" />
// The playground page in real headless Chromium (Debian's package, driven by playwright-core), at
// desktop width (1280 px) and phone width (390 px), against a real server whose limits live in
// the run's Redis: load it, run examples and attacks, meet refusals, and see each error once.

import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultGuardSettings } from '../src/compose/guards.ts';
import { type StartedServer, startDemoServer, testGuardSettings } from './helpers/demo-server.ts';
import { waitFor } from './helpers/sse.ts';

/**
 * The README's screenshots, compared by eye: written when missing, rewritten only with
 * UPDATE_SCREENSHOT=1.
 */
const screenshots = {
  desktop: new URL('../../../docs/images/playground.png', import.meta.url),
  phone: new URL('../../../docs/images/playground-phone.png', import.meta.url),
};

async function keepScreenshot(path: URL, image: Buffer): Promise<void> {
  expect(image.subarray(1, 4).toString('latin1')).toBe('PNG');
  if (process.env.UPDATE_SCREENSHOT === '1' || !existsSync(path)) await writeFile(path, image);
}

let started: StartedServer;
let browser: BrowserContext;
let page: Page;
let profile: string;

beforeAll(async () => {
  // The server's real guard settings: a person clicking around stays well inside them.
  started = await startDemoServer({ admission: defaultGuardSettings });
  profile = await mkdtemp(join(tmpdir(), 'coda-demo-chromium-'));
  // A fresh profile directory per run: playwright takes it as the persistent context's userDataDir.
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    viewport: { width: 1280, height: 800 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  page = browser.pages()[0] ?? (await browser.newPage());
});

afterAll(async () => {
  await browser?.close();
  await started?.stop();
  if (profile) await rm(profile, { recursive: true, force: true });
});

/** How often `text` occurs in what the page shows. */
async function occurrences(target: Page, text: string): Promise<number> {
  const shown = (await target.locator('body').textContent()) ?? '';
  return shown.split(text).length - 1;
}

/** Whether the element's box lies wholly inside the viewport. */
async function onScreen(target: Page, selector: string): Promise<boolean> {
  return target.locator(selector).evaluate((element) => {
    const box = element.getBoundingClientRect();
    return box.top >= 0 && box.bottom <= window.innerHeight && box.height > 0;
  });
}

describe('the playground page at 1280 px', () => {
  it('loads with the examples, the attacks, the limits and a favicon', async () => {
    const icons: number[] = [];
    page.on('response', (response) => {
      if (response.url().includes('favicon')) icons.push(response.status());
    });
    const response = await page.goto(started.url);
    expect(response?.status()).toBe(200);
    await expect(page.title()).resolves.toBe('Coda Sandbox playground');
    await page.locator('#examples button').first().waitFor();
    expect(await page.locator('#examples button').count()).toBe(4);
    expect(await page.locator('#attacks button').count()).toBeGreaterThanOrEqual(8);
    await page.locator('#server-limits', { hasText: 'per user' }).waitFor();
    expect(await page.locator('#server-limits').textContent()).toBe(
      'This server admits, per user, 60 runs a minute (60 back to back), 2 at once, and 10 per ' +
        'conversation turn. A run may ask for at most 30 s (timeoutMs) and 256 MiB (memoryMb): ' +
        'limits can be tightened here, never loosened.',
    );
    expect(await page.locator('#limits input[name="timeoutMs"]').getAttribute('placeholder')).toBe(
      '30000',
    );
    await waitFor(() => icons.length > 0);
    expect(icons).toEqual([200]);
  });

  it("lists the engine's tools with their TypeScript declarations", async () => {
    expect(await page.locator('#tool-names').textContent()).toBe(
      'getOrder, revenueByRegion, topCustomers',
    );
    expect(await page.locator('#tools').getAttribute('open')).toBe('');
    expect(await page.locator('#tool-declarations').textContent()).toBe(
      started.engine.toolDeclarations(),
    );
    expect(await page.locator('#tool-declarations').textContent()).toContain(
      '  topCustomers(input: {\n    /** How many customers, 1 to 8 */\n    limit: number;',
    );
    await page.click('#examples button[data-id="tools"]');
    await page.locator('#outcome[data-outcome="result"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('#outcome pre').textContent()).toContain('"region": "EMEA"');
  });

  it('marks where in the code a syntax error and a runtime error are', async () => {
    await page.fill('#limits input[name="timeoutMs"]', '');
    await page.fill('#code', 'const x = 1;\nreturn x +;');
    await page.click('#run');
    await page.locator('#outcome[data-code="RUNTIME"]').waitFor();
    expect(await page.locator('#outcome strong').textContent()).toBe('Your code does not parse');
    expect(await page.locator('#outcome pre').textContent()).toBe(
      "SyntaxError: Unexpected token ';'",
    );
    expect(await page.locator('#gutter mark').textContent()).toBe('2');
    expect(await page.locator('#code-error strong').textContent()).toBe('Line 2, column 11');
    expect(await page.locator('#code-error pre').textContent()).toBe('return x +;\n          ^');
    expect(await page.locator('#code').getAttribute('aria-invalid')).toBe('true');
    expect(
      await page.locator('#code').evaluate((area: HTMLTextAreaElement) => area.selectionStart),
    ).toBe(23);
    expect(await occurrences(page, 'line 2')).toBe(0);

    await page.fill('#code', 'const x = 1;\n  missing();\nreturn x;');
    // Editing clears the mark of the last run.
    expect(await page.locator('#gutter mark').count()).toBe(0);
    expect(await page.locator('#code-error').isHidden()).toBe(true);
    await page.click('#run');
    await page.locator('#outcome[data-code="RUNTIME"]').waitFor();
    expect(await page.locator('#outcome strong').textContent()).toBe('Your code threw an error');
    expect(await page.locator('#outcome pre').textContent()).toBe(
      'ReferenceError: missing is not defined',
    );
    expect(await page.locator('#code-error strong').textContent()).toBe('Line 2, column 3');
    expect(await page.locator('#gutter mark').textContent()).toBe('2');
  });

  it('runs an example and shows the result event and the stats', async () => {
    await page.click('#examples button[data-id="query"]');
    await page.locator('#outcome[data-outcome="result"]').waitFor({ timeout: 15_000 });
    const result = page.locator('#events li[data-type="result"]');
    await expect(result.count()).resolves.toBe(1);
    expect(await result.textContent()).toContain('"customer"');
    expect(await page.locator('#stats td').first().textContent()).toBe('wall time');
  });

  it('runs an attack and says once, in plain words, what stopped it', async () => {
    await page.click('#attacks button[data-id="sync-cpu"]');
    await page.locator('#outcome[data-code="TIMEOUT"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('#outcome strong').textContent()).toBe(
      'Stopped: the code ran past its time limit',
    );
    // The event log names the code; the words are in the outcome only.
    expect(await page.locator('#events li[data-type="error"] .message').textContent()).toBe(
      'TIMEOUT',
    );
    await page.click('#attacks button[data-id="network-exfiltration"]');
    await page.locator('#outcome[data-code="RUNTIME"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('#outcome strong').textContent()).toBe('Your code threw an error');
    expect(await occurrences(page, 'fetch is not defined')).toBe(1);
  });

  it('cancels a run from the page: the server ends the execution', async () => {
    await page.fill('#code', "reportStatus('started');\nwhile (true) { await Promise.resolve(); }");
    await page.fill('#limits input[name="timeoutMs"]', '25000');
    await page.click('#run');
    await page.locator('#events li[data-type="status"]').waitFor();
    expect(started.server.running).toBe(1);
    await page.click('#cancel');
    await page.locator('#outcome', { hasText: 'Cancelled by you' }).waitFor();
    await waitFor(() => started.server.running === 0 && started.engine.stats().active === 0);
  });

  it('shows a refusal once, each field the server named marked', async () => {
    await page.fill('#user', '');
    await page.fill('#limits input[name="timeoutMs"]', '999999');
    await page.click('#run');
    await page.locator('#outcome[data-outcome="refused"][data-code="VALIDATION"]').waitFor();
    expect(await page.locator('#outcome strong').textContent()).toBe(
      'The request was refused (HTTP 400)',
    );
    expect(await page.locator('#outcome pre').textContent()).toBe(
      'limits.timeoutMs: at most 30000 on this server (you sent 999999)\n' +
        'headers.x-user-id: required: the id of the user the execution runs for (you sent "")',
    );
    expect(await occurrences(page, 'at most 30000 on this server')).toBe(1);
    expect(await occurrences(page, 'headers.x-user-id')).toBe(1);
    const invalid = await page
      .locator('[aria-invalid="true"]')
      .evaluateAll((elements) =>
        elements.map((element) => element.id || element.getAttribute('name')),
      );
    expect(invalid.sort()).toEqual(['timeoutMs', 'user']);
    // Typing in a marked field clears its mark.
    await page.fill('#user', 'playground-user');
    await page.fill('#limits input[name="timeoutMs"]', '');
    expect(await page.locator('[aria-invalid="true"]').count()).toBe(0);
  });

  it('says when to retry a rate-limited run, in seconds only', async () => {
    const strict = await startDemoServer({
      admission: { ...testGuardSettings, ratePerUser: 1, burst: 1 },
    });
    const own = await browser.newPage();
    try {
      await own.goto(strict.url);
      await own.locator('#examples button').first().waitFor();
      await own.fill('#user', `rate-${randomUUID()}`);
      await own.click('#run');
      await own.locator('#outcome[data-outcome="result"]').waitFor();
      await own.click('#run');
      await own.locator('#outcome[data-code="RATE_LIMITED"]').waitFor();
      expect(await own.locator('#outcome strong').textContent()).toBe(
        'Too many runs for this user (HTTP 429)',
      );
      expect(await own.locator('#outcome pre').textContent()).toMatch(/^Try again in \d+ s\.$/);
      expect(await own.locator('#outcome').textContent()).not.toContain('ms');
    } finally {
      await own.close();
      await strict.stop();
    }
  });

  it('streams status events live and takes the README screenshot', async () => {
    await page.click('#examples button[data-id="status-stream"]');
    await page.locator('#outcome[data-outcome="result"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('#events li[data-type="status"]').count()).toBe(10);
    await keepScreenshot(screenshots.desktop, await page.screenshot({ fullPage: true }));
  });
});

describe('the playground page at 390 px', () => {
  let phone: Page;

  beforeAll(async () => {
    phone = await browser.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    await phone.goto(started.url);
    await phone.locator('#attacks button').first().waitFor();
  });
  afterAll(() => phone?.close());

  it('brings the outcome and the stats into view after an attack is tapped', async () => {
    // The attack buttons are at the top; the results panel starts a screen or more below.
    expect(await onScreen(phone, '#outcome')).toBe(false);
    await phone.click('#attacks button[data-id="network-exfiltration"]');
    await phone.locator('#outcome[data-code="RUNTIME"]').waitFor({ timeout: 15_000 });
    await phone.locator('#stats td').first().waitFor();
    await waitFor(
      async () => (await onScreen(phone, '#outcome')) && (await onScreen(phone, '#stats')),
    );
    const width = await phone.evaluate(() => document.documentElement.scrollWidth);
    expect(width).toBe(390);
    await keepScreenshot(screenshots.phone, await phone.screenshot());
  });
});
