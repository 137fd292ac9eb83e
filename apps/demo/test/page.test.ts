// The playground page in real headless Chromium (Debian's package, driven by playwright-core):
// load it, run an example, see the result; run an attack, see its error code.

import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultGuardSettings } from '../src/compose/guards.ts';
import { type StartedServer, startDemoServer } from './helpers/demo-server.ts';
import { waitFor } from './helpers/sse.ts';

/** The README's screenshot, refreshed when missing or with UPDATE_SCREENSHOT=1. */
const screenshotPath = new URL('../../../docs/images/playground.png', import.meta.url);

let started: StartedServer;
let browser: BrowserContext;
let page: Page;
let profile: string;

beforeAll(async () => {
  // The server's real guard settings, in the run's Redis: a person clicking around stays well
  // inside them.
  started = await startDemoServer({ admission: defaultGuardSettings });
  profile = await mkdtemp(join(tmpdir(), 'coda-demo-chromium-'));
  // A fresh profile directory per run: playwright takes it as the persistent context's userDataDir.
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    viewport: { width: 1360, height: 860 },
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

describe('the playground page', () => {
  it('loads with the examples and attacks from the server', async () => {
    const response = await page.goto(started.url);
    expect(response?.status()).toBe(200);
    await expect(page.title()).resolves.toBe('Coda Sandbox playground');
    await page.locator('#examples button').first().waitFor();
    expect(await page.locator('#examples button').count()).toBe(3);
    expect(await page.locator('#attacks button').count()).toBeGreaterThanOrEqual(8);
  });

  it('runs an example and shows the result event and the stats', async () => {
    await page.click('#examples button[data-id="query"]');
    await page.locator('#outcome[data-outcome="result"]').waitFor({ timeout: 15_000 });
    const result = page.locator('#events li[data-type="result"]');
    await expect(result.count()).resolves.toBe(1);
    expect(await result.textContent()).toContain('"customer"');
    expect(await page.locator('#stats td').first().textContent()).toBe('wall time');
  });

  it('runs an attack and shows its error code', async () => {
    await page.click('#attacks button[data-id="sync-cpu"]');
    await page.locator('#outcome[data-code="TIMEOUT"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('#events li[data-type="error"]').textContent()).toContain('TIMEOUT');
    await page.click('#attacks button[data-id="network-exfiltration"]');
    await page.locator('#outcome[data-code="RUNTIME"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('#outcome').textContent()).toContain('fetch is not defined');
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

  it('shows a refusal with the fields the server named', async () => {
    await page.fill('#user', '');
    await page.click('#run');
    await page.locator('#outcome[data-outcome="refused"][data-code="VALIDATION"]').waitFor();
    expect(await page.locator('#outcome').textContent()).toContain('headers.x-user-id');
    await page.fill('#user', 'playground-user');
  });

  it('streams status events live and takes the README screenshot', async () => {
    await page.click('#examples button[data-id="status-stream"]');
    await page.locator('#outcome[data-outcome="result"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('#events li[data-type="status"]').count()).toBe(10);
    const image = await page.screenshot({ fullPage: true });
    expect(image.subarray(1, 4).toString('latin1')).toBe('PNG');
    if (process.env.UPDATE_SCREENSHOT === '1' || !existsSync(screenshotPath)) {
      await writeFile(screenshotPath, image);
    }
  });
});
